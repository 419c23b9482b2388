"""The disk-hit path (issue #5): a hit is keyed before lowering and restores the kernel's IR from the
entry, so it runs neither the frontend nor numba, and reports the kernel as it is now."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from jittile import JittileWarning, T
from jittile.cache.store import metadata_digest
from jittile.frontend import lower as frontend_lower
from jittile.frontend.lower import lower_kernel
from jittile.ir import KernelIR
from jittile.patterns import registry
from jittile.targets import Target

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "examples"), str(REPO / "tests")]

import gpu_kernels  # noqa: E402
import tma_reduce_add  # noqa: E402
import tma_store  # noqa: E402
import tma_swizzled_copy  # noqa: E402
import tma_two_boxes  # noqa: E402
import tmem_decompress  # noqa: E402

_serial = itertools.count()
F32 = T.Tensor((None, None), "float32")
F32_3D = T.Tensor((None, None, None), "float32")

# (kernel, example arguments, target): TMA loads, stores, reductions, swizzle with coord_steps,
# multicast in a cluster, a runtime predicate, a cache policy, interleave, tcgen05.cp, helpers.
CASES = [
    (tma_two_boxes.tma_load, None, "sm_90a"),
    (tma_store.tma_store, None, "sm_90a"),
    (tma_reduce_add.tma_reduce_add, None, "sm_90a"),
    (tma_swizzled_copy.swizzled_copy, (F32, F32, 256, 128, 64, 32), "sm_90a"),
    (gpu_kernels.tma_multicast, (F32, F32_3D, 4), "sm_90a"),
    (gpu_kernels.tma_predicated, (F32, F32, T.int32(1)), "sm_90a"),
    (gpu_kernels.tma_cache_hint, (F32, F32), "sm_90a"),
    (
        gpu_kernels.tma_interleaved,
        (T.Tensor((None,) * 4, "uint16"), T.Tensor((None,) * 3, "uint16"), 2, 1),
        "sm_90a",
    ),
    (tmem_decompress.decompress_to_tmem, None, "sm_100a"),
    (gpu_kernels.tma_with_helper, (F32, F32), "sm_90a"),  # a site inlined from a @jittile.func
]


def _lowered(kernel, args, target: str):
    specs = kernel.specializer.annotation_specs() if args is None else args
    params = kernel.specializer.params(specs)
    return lower_kernel(kernel.source, params, Target.parse(target)), params


@pytest.mark.parametrize("kernel, args, target", CASES, ids=lambda c: getattr(c, "__name__", None))
def test_ir_record_restores_the_same_ir(kernel, args, target):
    lowered, params = _lowered(kernel, args, target)
    record = json.loads(json.dumps(lowered.ir.record(kernel.source.node_indices())))  # plain JSON
    restored = KernelIR.restore(record, params, kernel.source.locate, registry.plan_schema())
    assert restored == lowered.ir
    assert restored.sites and all(s.plan for s in restored.sites)
    assert str(restored.plan) == str(lowered.ir.plan) and "__jt_" not in str(restored.plan)


KERNEL = """\
import jittile
from jittile import T
{above}

@jittile.kernel
def probe(A: T.Tensor((16, 16), "uint32"), Out: T.Tensor((16, 16), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    shared = T.alloc_shared((2, 8, 16), "uint32", layout="default", align=128)
    mbar = T.alloc_shared((1,), "uint64", layout="default")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32({expect}))
    T.cuda.cta_sync(){inside}
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            shared, A, box=(8, 16), coords=(0, 0), coord_steps=((8, 0),), mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    T.cuda.cta_sync()
    for g, r in T.grid(2, 8):
        if lane < 16:
            Out[g * 8 + r, lane] = shared[g, r, lane]
"""


def _load(tmp_path: Path, above: str = "", inside: str = "", expect: int = 1024):
    name = f"hit_probe_{next(_serial)}"
    path = tmp_path / f"{name}.py"
    path.write_text(KERNEL.format(above=above, inside=inside, expect=expect))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.probe, path


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _no_lowering(*args, **kwargs):
    raise AssertionError("a disk hit lowered the kernel")


def test_hit_does_not_lower_and_reports_current_lines(tmp_path, cache_dir, monkeypatch):
    first, _ = _load(tmp_path)
    built = first.compile(target="sm_90a")
    assert built.metadata["cache"] == "stored"
    # The same kernel in another file, moved down and with comments inside: the key ignores both.
    moved, path = _load(tmp_path, above="\n# moved\n\n", inside="\n    # a comment\n    # another")
    monkeypatch.setattr(frontend_lower, "lower_kernel", _no_lowering)
    hit = moved.compile(target="sm_90a")
    assert hit.metadata["cache"] == "hit" and hit.cubin == built.cubin
    assert hit.lowered_source == built.lowered_source
    lines = path.read_text().splitlines()
    (site,) = hit.plan
    file, line, col = site["location"].rsplit(":", 2)
    assert file == str(path) and "T.cuda.tile.apply(" in lines[int(line) - 1]
    assert lines[int(line) - 1].index("T.cuda.tile.apply") == int(col)
    assert int(line) == int(built.plan[0]["location"].rsplit(":", 2)[1]) + 5
    assert [i["coords"] for i in site["instructions"]] == [(0, 0), (0, 8)]
    assert hit.ir.launch == built.ir.launch and hit.ir.host_tensormaps == built.ir.host_tensormaps
    assert hit.metadata["source_file"] == str(path)


@pytest.mark.parametrize(
    "signed, reason",
    [
        (False, "does not match its digest"),  # an edit: the store rejects it
        (
            True,
            "kernel_ir",
        ),  # metadata that verifies but cannot describe the launch: the kernel rejects it
    ],
)
def test_hit_without_a_recorded_ir_is_rebuilt(tmp_path, cache_dir, signed, reason):
    kernel, _ = _load(tmp_path)
    built = kernel.compile(target="sm_90a")
    (meta_file,) = cache_dir.rglob("probe.json")
    meta = json.loads(meta_file.read_text())
    del meta["kernel_ir"]
    if signed:
        meta["digest"] = metadata_digest(meta)
    meta_file.write_text(json.dumps(meta))
    again, _ = _load(tmp_path)
    with pytest.warns(JittileWarning, match=f"broken entry .*{reason}.*rebuilt") as record:
        rebuilt = again.compile(target="sm_90a")
    assert len([w for w in record if issubclass(w.category, JittileWarning)]) == 1
    assert (
        rebuilt.metadata["cache"] == "stored" and rebuilt.metadata["key"] == built.metadata["key"]
    )
    assert "kernel_ir" in json.loads(meta_file.read_text())


def test_hit_issues_the_lowering_warnings_again(tmp_path, cache_dir):
    kernel, _ = _load(tmp_path, expect=512)
    with pytest.warns(JittileWarning, match="expects 512 transaction bytes"):
        kernel.compile(target="sm_90a")
    moved, path = _load(tmp_path, above="\n\n", expect=512)
    with pytest.warns(JittileWarning, match="expects 512 transaction bytes") as record:
        hit = moved.compile(target="sm_90a")
    assert hit.metadata["cache"] == "hit"
    (warning,) = [w for w in record if issubclass(w.category, JittileWarning)]
    assert str(path) in str(warning.message)  # the kernel's current file and lines


def test_a_matching_expect_tx_hit_is_quiet(tmp_path, cache_dir, monkeypatch):
    kernel, _ = _load(tmp_path)
    kernel.compile(target="sm_90a")
    again, _ = _load(tmp_path)
    monkeypatch.setattr(frontend_lower, "lower_kernel", _no_lowering)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JittileWarning)
        assert again.compile(target="sm_90a").metadata["cache"] == "hit"


def test_launch_statics_are_part_of_the_key_without_lowering(tmp_path, cache_dir):
    kernel, _ = _load(tmp_path)
    spec = T.Tensor((16, 16), "uint32")
    own = kernel.compile(spec, spec, target="sm_90a")
    other = kernel.compile(
        spec, spec, target="sm_90a", launch=T.cuda.LaunchConfig(grid=1, block=64)
    )
    assert own.metadata["key"] != other.metadata["key"]
    assert own.metadata["key_components"]["launch"] is None
    assert other.metadata["key_components"]["launch"] == {"block": [64, 1, 1], "cluster": None}
    assert np.array_equal(
        np.frombuffer(own.cubin[:4], np.uint8), np.frombuffer(b"\x7fELF", np.uint8)
    )
