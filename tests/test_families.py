"""The opcode family is the unit of the compiler (issue #21): each family is one module under
``jittile/patterns/`` registered once, and everything else derives from the registry.

The proof: no module outside ``jittile/patterns/`` (the demo aside) holds a string literal naming
a registered family's opcodes (its prefixes and its companion raw instructions), so the
interpreter's dispatch, the raw instruction table, the completions and the reference cannot have a
hand-kept list of them. Docstrings are prose, not code, and may cite an instruction.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jittile.errors import JittileError
from jittile.interpreter import instructions
from jittile.ir import PlanFields, RecordedPlan
from jittile.patterns import registry
from jittile.ptx.instructions import INSTRUCTIONS

PACKAGE = Path(__file__).resolve().parents[1] / "jittile"
EXEMPT = {PACKAGE / "demo.py"}


def opcode_words() -> set[str]:
    """Every registered family's opcode prefixes and companion opcodes."""
    words = set()
    for pattern in registry.patterns():
        words.update(pattern.prefixes)
        words.update(companion.opcode for companion in pattern.companions)
    return words


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def opcode_literals(source: str, words: set[str]) -> list[tuple[int, str]]:
    """(line, literal) of each string constant of ``source`` (docstrings aside) that names one of
    ``words`` as a whole dotted opcode or a prefix of one."""
    pattern = re.compile(
        "|".join(
            rf"(?<![\w.:]){re.escape(w)}(?![\w:])" for w in sorted(words, key=len, reverse=True)
        )
    )
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and pattern.search(node.value)
    )


def test_no_module_outside_patterns_names_a_family_opcode():
    words = opcode_words()
    assert {
        "wgmma.mma_async",
        "wgmma.fence.sync.aligned",
        "cp.async.bulk.commit_group",
        "tcgen05.cp",
        "cp.async.bulk.tensor",
        "cp.reduce.async.bulk",
    } <= words
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path in EXEMPT or (PACKAGE / "patterns") in path.parents:
            continue
        found = opcode_literals(path.read_text(), words)
        if found:
            offenders[str(path.relative_to(PACKAGE.parent))] = found
    assert not offenders


def test_the_scan_finds_literals_and_skips_docstrings():
    words = {"wgmma.mma_async", "cp.async.bulk"}
    source = (
        '"""Cites wgmma.mma_async in prose."""\n'
        'RAW = [("cp.async.bulk.commit_group", None)]\n'
        'HEAD = "wgmma.mma_async"\nOTHER = "cp.async.bulkish"\nNAME = "wgmma_group"\n'
    )
    assert opcode_literals(source, words) == [
        (2, "cp.async.bulk.commit_group"),
        (3, "wgmma.mma_async"),
    ]


@pytest.mark.parametrize("pattern", registry.patterns(), ids=lambda p: p.family)
def test_a_family_declares_everything_the_rest_derives(pattern):
    # completions: one per form, each known to the registry
    assert set(pattern.completions) == set(pattern.operand_forms)
    assert {c.name for c in pattern.completions.values()} <= set(registry.completions())
    # its plan fields are a frozen dataclass
    assert issubclass(pattern.fields_type, PlanFields)
    assert pattern.fields_type.__dataclass_params__.frozen
    # the interpreter's semantics of its records
    assert callable(instructions._semantics(pattern))
    # its companions are raw instructions with interpreter semantics, not tile opcodes
    for companion in pattern.companions:
        assert companion.opcode in INSTRUCTIONS
        assert registry.pattern_for(companion.opcode) is None
        assert any(head == companion.opcode for head, _ in instructions.raw())
    # its example's opcode is one of its own, parsed into a typed opcode
    opcode = re.search(r'T\.ptx\["([^"]+)"\]', pattern.example).group(1)
    assert registry.pattern_for(opcode) is pattern
    assert pattern.parse(opcode).text == opcode


def _sample(field: dataclasses.Field):
    """A non-default value for a plan field, from its annotation."""
    text = str(field.type)
    if "Major" in text:
        from jittile.patterns.matrix_descriptors import Major

        return Major.MN
    if text.startswith("bool"):
        return True
    if text.startswith("int"):
        return 7
    if text.startswith("str"):
        return "text"
    return (1, 2)


@pytest.mark.parametrize("pattern", registry.patterns(), ids=lambda p: p.family)
def test_plan_fields_round_trip_through_json(pattern):
    cls = pattern.fields_type
    value = cls(**{f.name: _sample(f) for f in dataclasses.fields(cls)})
    data = json.loads(json.dumps(value.to_json()))
    assert cls.from_json(data) == value
    assert [name for name, _ in value.items()] == [f.name for f in dataclasses.fields(cls)]
    with pytest.raises(ValueError, match="not recorded"):
        cls.from_json({**data, "unknown": 1})


def test_the_schema_refuses_an_unknown_family_or_completion():
    assert {"mbarrier", "bulk_group", "tcgen05_commit", "wgmma_group", "none"} == set(
        registry.completions()
    )
    schema = registry.plan_schema()
    with pytest.raises(ValueError, match="no family"):
        schema.record({"completion": "none"}, "mma.sync")
    with pytest.raises(ValueError, match="unknown completion 'eventually'"):
        schema.record({"completion": "eventually"}, "cp.async.bulk")
    with pytest.raises(ValueError, match="unknown completion 'wgmma_group' for cp.async.bulk"):
        schema.record({"completion": "wgmma_group"}, "cp.async.bulk")


def test_every_registered_module_declares_the_family_it_is_registered_as():
    assert [p.family for p in registry.patterns()] == list(registry.FAMILY_MODULES)


def test_a_cache_hit_decodes_a_plan_only_when_it_is_read():
    # A restored site keeps its recorded plan until it is read; reading it loads the family.
    code = (
        "import jittile.ir as ir, sys\n"
        "from jittile.patterns import registry\n"
        "data = [{'opcode': 'x', 'instance': [], 'coords': [], 'shared_offset': 0, 'bytes': 16,"
        " 'operands': [], 'asm': None, 'completion': 'none', 'barrier': None,"
        " 'fields': {'runtime_alignment_check': True}, 'results': []}]\n"
        "plan = ir.RecordedPlan(data, 'cp.async.bulk', registry.plan_schema())\n"
        "assert len(plan) == 1 and 'jittile.patterns.bulk_copy' not in sys.modules\n"
        "assert plan[0].fields.runtime_alignment_check is True\n"
        "assert 'jittile.patterns.bulk_copy' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent
    )
    assert done.returncode == 0, done.stderr


def test_a_recorded_plan_that_does_not_decode_is_a_jittile_error():
    schema = registry.plan_schema()
    with pytest.raises(ValueError, match="no family"):
        RecordedPlan([], "mma.sync", schema)
    plan = RecordedPlan([{"completion": "wgmma_group"}], "cp.async.bulk", schema)
    with pytest.raises(JittileError, match="cp.async.bulk family does not decode"):
        plan[0]
