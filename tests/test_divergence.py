"""Warp-synchronous operations (``.aligned`` raw instructions, ``T.cuda.cta_sync``,
``T.cuda.cluster_sync``) under a condition that differs between the lanes of a warp warn at the
operation's line, naming the condition; warp-uniform conditions do not warn."""

from __future__ import annotations

import importlib.util
import itertools
import warnings

import pytest

from jittile import JittileWarning
from jittile.frontend.lower import lower_kernel
from jittile.ptx.instructions import INSTRUCTIONS
from jittile.targets import Target

HEADER = """\
import jittile
from jittile import T


@jittile.func
def sync_all():
    T.cuda.cta_sync()  # helper-sync


@jittile.kernel
def kernel(Out: T.Tensor((64,), "uint32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128, cluster=(2, 1, 1)))
    lane = T.cuda.lane_id()
    tid = T.cuda.thread_idx()
    tx = T.cuda.thread_idx("x")
    warp = T.cuda.warp_id()
"""
ALIGNED = "T.ptx.barrier.cluster.arrive.aligned()"
TCGEN05_WAIT = "T.ptx.tcgen05.wait__ld.sync.aligned()"
_serial = itertools.count()


def lower_with_warnings(body: str, tmp_path, target: str = "sm_100a"):
    """(messages, path, line of each body line) of lowering HEADER + body."""
    name = f"divergence_{next(_serial)}"
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + "".join(f"    {line}\n" for line in body.splitlines()))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    specializer = module.kernel.specializer
    params = specializer.params(specializer.annotation_specs())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered = lower_kernel(module.kernel.source, params, Target.parse(target))
    messages = [str(w.message) for w in caught if issubclass(w.category, JittileWarning)]
    assert messages == [m for m in lowered.warnings if "lanes of a warp" in m]
    return messages, str(path), HEADER.count("\n") + 1


DIVERGENT = [  # (body, the line offset of the operation, of the condition, the condition text)
    (f"if lane == 0:\n    {ALIGNED}", 1, 0, "lane == 0"),
    ("if lane == 0:\n    T.cuda.cta_sync()", 1, 0, "lane == 0"),
    ("if tid == 0:\n    T.cuda.cluster_sync()", 1, 0, "tid == 0"),
    (f"if tx < 16:\n    {TCGEN05_WAIT}", 1, 0, "tx < 16"),
    (f"if tid % 32 < 8:\n    {ALIGNED}", 1, 0, "tid % 32 < 8"),
    (f"x = lane * 2\ny = x + n\nif y > 3:\n    {ALIGNED}", 3, 2, "y > 3"),
    (f"if lane == 0:\n    pass\nelse:\n    {ALIGNED}", 3, 0, "lane == 0"),
    (f"if warp == 0:\n    if lane < 4:\n        {ALIGNED}", 2, 1, "lane < 4"),
    (f"for i in range(lane):\n    {ALIGNED}", 1, 0, "for i in range(lane):"),
    (f"while tid < n:\n    {ALIGNED}", 1, 0, "tid < n"),
    (f"if lane != 0:\n    return\n{ALIGNED}", 2, 0, "lane != 0"),
    # shared memory read at a lane-dependent index; a local array stored into under a lane
    # condition (each thread's own)
    (
        f"s = T.alloc_shared((32,), 'int32')\nT.cuda.cta_sync()\nif s[lane] == 1:\n    {ALIGNED}",
        3,
        2,
        "s[lane] == 1",
    ),
    (
        f"a = T.alloc_local((2,), 'int32')\na[0] = 0\nif lane == 0:\n    a[0] = 1\n"
        f"if a[0] == 1:\n    {ALIGNED}",
        5,
        4,
        "a[0] == 1",
    ),
    (f"for i in range(4):\n    if lane == i:\n        continue\n    {ALIGNED}", 3, 1, "lane == i"),
    (
        f"x = T.uint32(0)\nif lane == 0:\n    x = T.uint32(1)\nif x == 1:\n    {ALIGNED}",
        4,
        3,
        "x == 1",
    ),
]


@pytest.mark.parametrize(
    "body, op, cond, text", DIVERGENT, ids=[f"divergent-{i}" for i in range(len(DIVERGENT))]
)
def test_a_synchronising_operation_under_a_lane_condition_warns(body, op, cond, text, tmp_path):
    messages, path, first = lower_with_warnings(body, tmp_path)
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"{path}:{first + op}:")
    assert f"({path}:{first + cond}:" in messages[0] and repr(text) in messages[0]
    assert "under a condition on T.cuda.warp_id()" in messages[0]


UNIFORM = [
    f"if warp == 0:\n    {ALIGNED}",
    f"if tid < 32:\n    {ALIGNED}",
    f"if tid >= 64:\n    {ALIGNED}",
    f"if tid // 32 == 1:\n    {ALIGNED}",
    f"if (tid >> 5) == 1:\n    {ALIGNED}",
    f"if n > 3:\n    {ALIGNED}",
    f"for i in range(n):\n    {ALIGNED}",
    f"if lane == 0:\n    Out[0] = 1\n{ALIGNED}",
    "if lane == 0:\n    T.ptx.mbarrier.init.shared.b64(T.uint32(0), T.uint32(1))",
    "T.cuda.cta_sync()\nT.cuda.cluster_sync()",
    f"if T.cuda.thread_idx('y') == 0:\n    {ALIGNED}",
    # memory every lane sees, written by one thread, read at a lane-independent index
    f"s = T.alloc_shared((4,), 'int32')\nif tid == 0:\n    s[warp] = n\nT.cuda.cta_sync()\n"
    f"if s[warp] == 1:\n    {ALIGNED}",
    f"if tid == 0:\n    Out[warp] = 1\nif Out[warp] == 1:\n    {ALIGNED}",
    # a store under a lane condition assigns its array, not the names in its index
    f"i = warp\nif lane == 0:\n    Out[i] = 1\nif i == 1:\n    {ALIGNED}",
]


@pytest.mark.parametrize("body", UNIFORM, ids=[f"uniform-{i}" for i in range(len(UNIFORM))])
def test_warp_uniform_conditions_do_not_warn(body, tmp_path):
    messages, _, _ = lower_with_warnings(body, tmp_path)
    assert messages == []


def test_a_helpers_barrier_warns_at_the_helpers_line(tmp_path):
    messages, path, first = lower_with_warnings("if lane == 0:\n    sync_all()", tmp_path)
    helper_line = HEADER.splitlines().index("    T.cuda.cta_sync()  # helper-sync") + 1
    assert len(messages) == 1 and messages[0].startswith(f"{path}:{helper_line}:")
    assert f"({path}:{first}:" in messages[0]


def test_the_instruction_table_says_which_instructions_are_aligned():
    aligned = {op for op, spec in INSTRUCTIONS.items() if spec.warp_aligned}
    assert "barrier.cluster.arrive.aligned" in aligned
    assert "tcgen05.ld.sync.aligned.32x32b.x1.b32" in aligned
    assert "barrier.cluster.arrive" not in aligned and "elect.sync" not in aligned
    assert all(".aligned" in op for op in aligned)


def test_a_condition_tainted_by_an_assignment_under_a_lane_condition_names_it(tmp_path):
    """The analysis follows names, not program order: a name a producer thread sets under
    ``if tid == 0:`` differs by lane in the consumer warps' code too, and the warning says which
    assignment made it so."""
    body = f"if warp == 0:\n    if tid == 0:\n        k = n\nelse:\n    k = n\n    for i in range(k):\n        {ALIGNED}"
    messages, path, first = lower_with_warnings(body, tmp_path)
    assert len(messages) == 1, messages
    assert messages[0].startswith(f"{path}:{first + 6}:")
    assert (
        f"It differs because 'k' is assigned under 'tid == 0' at {path}:{first + 2}:"
        in (messages[0])
    )


@pytest.mark.parametrize(
    "body, cause",
    [
        (f"for i in range(lane):\n    {ALIGNED}", None),  # the lane itself: nothing to name
        (f"x = lane * 2\ny = x + n\nif y > 3:\n    {ALIGNED}", None),
        (
            f"x = T.uint32(0)\nif lane == 0:\n    x = T.uint32(1)\ny = x + 1\nif y == 2:\n"
            f"    {ALIGNED}",
            "It differs because 'x' is assigned under 'lane == 0'",
        ),
    ],
)
def test_the_warning_names_an_assignment_only_where_one_is_the_cause(body, cause, tmp_path):
    messages, _, _ = lower_with_warnings(body, tmp_path)
    assert len(messages) == 1, messages
    assert ("It differs because" in messages[0]) == (cause is not None)
    if cause is not None:
        assert cause in messages[0]
