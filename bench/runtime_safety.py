"""Issue #19 on the GPU: launches that must never give a wrong answer inside real programs.

Each check returns what it counted; tests/test_gpu_runtime.py asserts on them, and run as a script
this writes them all to one results file:

- ``threads``: 8 Python threads x 5,000 launches of the swizzled TMA copy
  (examples/tma_swizzled_copy.py), each thread copying its own inputs into a fresh output slot per
  launch; on one shared torch stream, on per-thread current streams, on explicit ``stream=``;
  every output compared with its input afterwards (wrong, and wrong holding another thread's data);
- ``first_call``: 8 threads' simultaneous first call of a fresh kernel: builds made, all correct;
- ``graphs``: torch.cuda.graph capture (each capture error mode) and CuPy stream capture of the
  TMA copy and the GEMM example, replayed after new values are written into the same inputs;
- ``pending_producer``: a launch on a non-blocking torch stream right after a slow producer wrote
  its input on that stream;
- ``torch_compile``: a jittile custom op (``torch.library.custom_op`` with a fake) under
  ``torch.compile(fullgraph=True)`` and ``mode="reduce-overhead"``, several calls.

    PYTHONPATH=$PWD python3 bench/runtime_safety.py [--json FILE]
"""

import argparse
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import jittile

TILE = 64  # the copy's (64, 64) float32 matrix: two (64, 32) swizzled boxes
SLOTS = 8  # distinct inputs per thread


def _copy():
    from tma_swizzled_copy import swizzled_copy

    return swizzled_copy


def copy(a, out, **launch) -> None:
    """``out = a`` for (64, 64) float32 device arrays through the swizzled TMA copy."""
    _copy()(a, out, TILE, TILE, 64, 32, **launch)


def _inputs(torch, thread: int):
    base = torch.arange(TILE * TILE, device="cuda", dtype=torch.float32).reshape(TILE, TILE)
    return [base / 8192 + thread * 1000 + slot * 10 for slot in range(SLOTS)]


def thread_stress(mode: str, threads: int = 8, launches: int = 5000) -> dict:
    """``mode``: "shared" (every thread on torch's current stream, the same one), "current"
    (each thread inside ``torch.cuda.stream(its own)``), "explicit" (``stream=`` its own)."""
    import torch

    copy(*_inputs(torch, 0)[:2])  # compiled and loaded before the threads start
    torch.cuda.synchronize()
    start = threading.Barrier(threads)
    results: dict[int, tuple] = {}
    failures: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            inputs = _inputs(torch, t)
            outputs = list(torch.full((launches, TILE, TILE), -1.0, device="cuda").unbind(0))
            stream = torch.cuda.Stream()
            torch.cuda.synchronize()
            start.wait()
            if mode == "current":
                with torch.cuda.stream(stream):
                    for j in range(launches):
                        copy(inputs[j % SLOTS], outputs[j])
            elif mode == "explicit":
                for j in range(launches):
                    copy(inputs[j % SLOTS], outputs[j], stream=stream)
            else:
                for j in range(launches):
                    copy(inputs[j % SLOTS], outputs[j])
            torch.cuda.synchronize()
            results[t] = (inputs, outputs)
        except BaseException as exc:  # reported, not lost in the thread
            failures.append(exc)
            start.abort()

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    began = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.perf_counter() - began
    if failures:
        raise failures[0]
    wrong = foreign = 0
    for t, (inputs, outputs) in results.items():
        stacked = torch.stack(outputs)
        expected = torch.stack([inputs[j % SLOTS] for j in range(launches)])
        bad = (stacked != expected).flatten(1).any(1)
        wrong += int(bad.sum())
        owner = torch.div(stacked[:, 0, 0], 1000, rounding_mode="floor")
        foreign += int((bad & (owner != t) & (stacked[:, 0, 0] >= 0)).sum())
    return {
        "mode": mode,
        "threads": threads,
        "launches_per_thread": launches,
        "wrong": wrong,
        "foreign": foreign,
        "seconds": round(seconds, 3),
    }


def first_call(threads: int = 8) -> dict:
    """A fresh kernel object called by ``threads`` threads at once: builds made, outputs right."""
    import torch

    kernel = jittile.kernel(_copy().pyfunc, cache=False)
    module = sys.modules["jittile.kernel"]
    builds, real = [], module.build

    def counting(*args, **kwargs):
        builds.append(threading.get_ident())
        return real(*args, **kwargs)

    module.build = counting
    start = threading.Barrier(threads)
    wrong = []
    try:

        def worker(t: int) -> None:
            a = _inputs(torch, t)[0]
            out = torch.full_like(a, -1.0)
            start.wait()
            kernel(a, out, TILE, TILE, 64, 32)
            torch.cuda.synchronize()
            if not torch.equal(out, a):
                wrong.append(t)

        workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        module.build = real
    return {"threads": threads, "builds": len(builds), "wrong": len(wrong)}


def _gemm_inputs(torch, m=256, n=384, k=192):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    return a, b, torch.empty(m, n, device="cuda", dtype=torch.bfloat16)


def _gemm_error(torch, a, b, c) -> float:
    expected = a.float() @ b.float().T
    return float((c.float() - expected).abs().max() / expected.abs().max())


def torch_graph(kernel: str, mode: str, warm: bool = True) -> dict:
    """Capture one launch with ``torch.cuda.graph(capture_error_mode=mode)``, then write new
    values into the same inputs and replay: the outputs follow the new inputs. ``warm``: the
    kernel launched once before the capture (torch's own advice); else its first launch (compile
    and module load) happens inside the capture."""
    import gemm_bf16
    import torch

    if kernel == "copy":
        a, out = _inputs(torch, 1)[0], torch.empty(TILE, TILE, device="cuda")
        run = (
            (lambda: copy(a, out))
            if warm
            else (lambda: jittile.kernel(_copy().pyfunc, cache=False)(a, out, TILE, TILE, 64, 32))
        )
    else:
        a, b, c = _gemm_inputs(torch)
        run = lambda: gemm_bf16.launch(a, b, c)  # noqa: E731
    if warm:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            run()
        torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode=mode):
        run()
    checks = []
    for step in range(3):
        if kernel == "copy":
            a.copy_(_inputs(torch, step + 2)[step])
            out.fill_(-1.0)
            graph.replay()
            torch.cuda.synchronize()
            checks.append(bool(torch.equal(out, a)))
        else:
            a.copy_(torch.randn_like(a))
            b.copy_(torch.randn_like(b))
            c.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            checks.append(_gemm_error(torch, a, b, c) < 0.02)
    return {"kernel": kernel, "mode": mode, "warm": warm, "replays_correct": checks}


def cupy_graph(kernel: str) -> dict:
    """The same through CuPy's ``stream.begin_capture()`` / ``end_capture()`` (CuPy arrays)."""
    import cupy
    import gemm_bf16

    rng = cupy.random.default_rng(0)
    stream = cupy.cuda.Stream(non_blocking=True)
    if kernel == "copy":
        a = rng.standard_normal((TILE, TILE), dtype=cupy.float32)
        out = cupy.empty_like(a)
        run = lambda: copy(a, out)  # noqa: E731
    else:
        import torch

        ta, tb, tc = _gemm_inputs(torch)
        try:
            a, b, c = cupy.from_dlpack(ta), cupy.from_dlpack(tb), cupy.from_dlpack(tc)
        except Exception as exc:  # a CuPy without bfloat16 arrays
            return {"kernel": kernel, "not_run": f"CuPy cannot hold bfloat16: {exc}"}
        run = lambda: gemm_bf16.launch(a, b, c)  # noqa: E731
    with stream:
        run()
        stream.synchronize()
        stream.begin_capture()
        run()
        graph = stream.end_capture()
    checks = []
    for _ in range(3):
        if kernel == "copy":
            a[...] = rng.standard_normal((TILE, TILE), dtype=cupy.float32)
            out.fill(-1.0)
            graph.launch(stream)
            stream.synchronize()
            checks.append(bool((out == a).all()))
        else:
            ta.copy_(torch.randn_like(ta))
            tc.fill_(float("nan"))
            torch.cuda.synchronize()
            graph.launch(stream)
            stream.synchronize()
            checks.append(_gemm_error(torch, ta, tb, tc) < 0.02)
    return {"kernel": kernel, "replays_correct": checks}


def graphed_callable() -> dict:
    """``torch.cuda.make_graphed_callables`` around a function that launches the copy."""
    import torch

    def double_copy(a):
        out = torch.empty_like(a)
        copy(a, out)
        return out * 2

    a = _inputs(torch, 3)[0]
    graphed = torch.cuda.make_graphed_callables(double_copy, (a,))
    checks = []
    for step in range(3):
        fresh = _inputs(torch, 4)[step]
        checks.append(bool(torch.equal(graphed(fresh), fresh * 2)))
    return {"replays_correct": checks}


def pending_producer() -> dict:
    """A slow producer on a non-blocking stream writes the input, then the launch (no
    ``stream=``) inside that stream reads it: it must run after the producer."""
    import torch
    from cuda.bindings import driver as cu

    err, handle = cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
    stream = torch.cuda.ExternalStream(int(handle))
    a = torch.zeros(TILE, TILE, device="cuda")
    out = torch.full_like(a, -1.0)
    copy(a, out)
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(50_000_000)  # about 30 ms of device time before the producer's write
        a.fill_(7.0)
        copy(a, out)
    stream.synchronize()
    correct = bool((out == 7.0).all())
    cu.cuStreamDestroy(handle)
    return {"correct": correct}


def torch_compile() -> dict:
    """A jittile kernel as a torch custom op (the language reference's recipe), compiled."""
    import torch

    @torch.library.custom_op("jittile_bench::tile_copy", mutates_args=())
    def tile_copy(a: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(a)
        copy(a, out)
        return out

    @tile_copy.register_fake
    def _(a):
        return torch.empty_like(a)

    def step(a):
        return tile_copy(a * 2) + 1

    results = {}
    for name, options in (
        ("fullgraph", {"fullgraph": True}),
        ("reduce_overhead", {"mode": "reduce-overhead", "fullgraph": True}),
    ):
        compiled = torch.compile(step, **options)
        checks = []
        for call in range(5):
            a = _inputs(torch, 5)[call % SLOTS]
            checks.append(bool(torch.equal(compiled(a), a * 2 + 1)))
        results[name] = checks
    return results


def run_all() -> dict:
    out = {
        "threads": [thread_stress(mode) for mode in ("shared", "current", "explicit")],
        "first_call": first_call(),
    }
    out["graphs"] = (
        [torch_graph(k, m) for k in ("copy", "gemm") for m in ("global", "thread_local", "relaxed")]
        + [torch_graph("copy", "global", warm=False)]
        + [cupy_graph(k) for k in ("copy", "gemm")]
    )
    out["graphed_callable"] = graphed_callable()
    out["pending_producer"] = pending_producer()
    out["torch_compile"] = torch_compile()
    return out


def main() -> None:
    import common

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results to this file")
    options = parser.parse_args()
    payload = {
        "date": time.strftime("%Y-%m-%d"),
        "device": common.device(),
        "versions": common.versions(),
        "command": "python3 bench/runtime_safety.py",
        "results": run_all(),
    }
    print(json.dumps(payload, indent=2))
    if options.json:
        Path(options.json).write_text(json.dumps(payload, indent=2))


if __name__ == "__main__":
    main()
