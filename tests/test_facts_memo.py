"""The disk memo of the key's AST facts (jittile/cache/facts.py) and the lazily parsed kernel
source it allows: a fresh process keys a kernel it has keyed before without parsing its file."""

from __future__ import annotations

import importlib.util
import json

import pytest

from jittile.cache import components, facts
from jittile.frontend import source as source_module
from jittile.frontend.source import load_source

KERNEL_FILE = """
import jittile
from jittile import T

SCALE = 3

@jittile.kernel
def scaled(X: T.Tensor((4,), "float32")):
    X[0] = X[0] * SCALE + helper_value(
        1.0,
    )

@jittile.func
def helper_value(x):
    def inner(y):
        return y + 1.0
    return inner(
        x,
    )
"""


def _module(tmp_path, text=KERNEL_FILE, name="facts_kernels"):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def disk(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / facts.FOLDER


def test_the_text_spans_the_definition_to_its_last_line(tmp_path):
    module = _module(tmp_path)
    text = load_source(module.helper_value.pyfunc).text
    assert text.startswith("@jittile.func\ndef helper_value(x):")
    assert text.rstrip().endswith("x,\n    )")  # the last statement's closing line
    assert "return y + 1.0" in text  # the nested function's lines


def test_a_later_source_of_the_same_text_is_keyed_without_parsing(tmp_path, disk, monkeypatch):
    module = _module(tmp_path)
    first = load_source(module.scaled.pyfunc)
    digest = components.source_digest(first)
    chains = components.referenced_globals(first, first.globals, first.closure)
    assert chains == {"SCALE": "3"} and len(list(disk.glob("*.json"))) == 1
    monkeypatch.setattr(
        source_module, "_parse_definition", lambda *a: pytest.fail("parsed on a memo hit")
    )
    again = load_source(module.scaled.pyfunc)  # as a fresh process's first launch loads it
    assert components.source_digest(again) == digest
    assert components.referenced_globals(again, again.globals, again.closure) == chains
    assert again.parsed is None


def test_the_memo_holds_what_the_tree_gives_and_edits_are_new_entries(tmp_path, disk):
    module = _module(tmp_path)
    kept = load_source(module.scaled.pyfunc)
    assert components.source_digest(kept) == components.source_digest(kept.tree)
    edited = _module(tmp_path, KERNEL_FILE.replace("SCALE + ", "SCALE - "), "facts_edited")
    other = load_source(edited.scaled.pyfunc)
    assert components.source_digest(other) != components.source_digest(kept)
    assert len(list(disk.glob("*.json"))) == 2


def test_a_damaged_entry_is_ignored_and_rewritten(tmp_path, disk):
    module = _module(tmp_path)
    expected = components.source_digest(load_source(module.scaled.pyfunc))
    (entry,) = disk.glob("*.json")
    for damage in ("{not json", json.dumps({"digest": 7, "chains": []}), json.dumps([1])):
        entry.write_text(damage)
        assert components.source_digest(load_source(module.scaled.pyfunc)) == expected
        assert json.loads(entry.read_text())["digest"] == expected


def test_without_the_disk_cache_there_is_no_memo(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "0")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    module = _module(tmp_path)
    components.source_digest(load_source(module.scaled.pyfunc))
    assert not (tmp_path / "cache").exists()
