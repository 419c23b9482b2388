"""Issue #19 on the H200: concurrent launches, the framework's stream, CUDA graphs, torch.compile
(bench/runtime_safety.py makes the launches; its results file records the same counts)."""

from __future__ import annotations

import pytest

from bench import runtime_safety as safety

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("mode", ["shared", "current", "explicit"])
def test_eight_threads_launching_five_thousand_times_get_only_their_own_outputs(mode):
    result = safety.thread_stress(mode, threads=8, launches=5000)
    assert (result["wrong"], result["foreign"]) == (0, 0), result


def test_simultaneous_first_calls_compile_once_and_are_correct():
    assert safety.first_call(threads=8) == {"threads": 8, "builds": 1, "wrong": 0}


@pytest.mark.parametrize("kernel", ["copy", "gemm"])
@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_torch_graph_capture_replays_with_fresh_inputs(kernel, mode):
    assert safety.torch_graph(kernel, mode)["replays_correct"] == [True] * 3


def test_a_first_launch_inside_a_capture_is_recorded():
    assert safety.torch_graph("copy", "global", warm=False)["replays_correct"] == [True] * 3


@pytest.mark.parametrize("kernel", ["copy", "gemm"])
def test_cupy_stream_capture_replays_with_fresh_inputs(kernel):
    pytest.importorskip("cupy")
    result = safety.cupy_graph(kernel)
    if "not_run" in result:
        pytest.skip(result["not_run"])
    assert result["replays_correct"] == [True] * 3


def test_make_graphed_callables():
    assert safety.graphed_callable()["replays_correct"] == [True] * 3


def test_a_non_blocking_stream_with_a_pending_producer_orders_the_launch_after_it():
    assert safety.pending_producer() == {"correct": True}


def test_a_jittile_custom_op_under_torch_compile():
    result = safety.torch_compile()
    assert result == {"fullgraph": [True] * 5, "reduce_overhead": [True] * 5}, result


def test_a_launch_leaves_the_current_context_as_it_was():
    import torch

    from jittile.runtime import driver

    torch.zeros(1, device="cuda:0")  # torch's context current on this thread
    before = driver.current_context()
    a = torch.ones(64, 64, device="cuda:0")
    out = torch.empty_like(a)
    safety.copy(a, out)
    torch.cuda.synchronize()
    assert driver.current_context() == before and torch.equal(out, a)


def test_a_thread_without_a_context_launches_numpy_arrays_on_the_current_device():
    import threading

    import numpy as np

    a = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    out = np.zeros_like(a)
    thread = threading.Thread(target=safety.copy, args=(a, out))
    thread.start()
    thread.join()
    np.testing.assert_array_equal(out, a)


def test_the_reference_torch_operator_recipe_under_torch_compile(tmp_path):
    """docs/language.md's recipe, run as written: fullgraph and reduce-overhead, fresh inputs."""
    import importlib.util
    import re
    from pathlib import Path

    import torch

    text = (Path(__file__).resolve().parents[1] / "docs" / "language.md").read_text()
    (block,) = [
        b
        for b in re.findall(r"^```python\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
        if "torch.library.custom_op" in b
    ]
    path = tmp_path / "recipe.py"
    path.write_text(block)
    spec = importlib.util.spec_from_file_location("recipe", path)
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    op = recipe.torch_operator()
    for options in ({"fullgraph": True}, {"fullgraph": True, "mode": "reduce-overhead"}):
        compiled = torch.compile(lambda x: op(x, 2.0) + 1, **options)
        for rows in (8, 8, 8, 16):
            x = torch.randn(rows, 256, device="cuda")
            assert torch.equal(compiled(x), x * 2.0 + 1), options
