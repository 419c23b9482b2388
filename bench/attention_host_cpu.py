"""Host microseconds of one ``examples/attention_fwd.py`` ``attention()`` call on a machine
without a GPU: the driver calls are stand-ins (bench/launch_host_cpu.py's) and so is torch (a
module whose tensors carry a pointer, shape, strides and dtype, and whose ``empty_like`` /
``empty`` only hand out pointers), so what is timed is the example's and jittile's Python work
per call: argument checks, the globals watch, fingerprints, parameter packing, TensorMap
fields. Two cases: the outputs at the same pointers every call (torch's caching allocator
handing back the block the last call's output freed: O's and LSE's TensorMaps kept), and at a
fresh pointer every call (O's TensorMap made anew: its fields checked, the encoding itself a
stand-in). ``--profile`` adds cProfile's top entries of the fresh-pointer case.

    PYTHONPATH=$PWD python3 bench/attention_host_cpu.py [--profile] [--json FILE]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import itertools
import json
import pstats
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "examples"))
import launch_host_cpu  # noqa: E402

SHAPE = (16, 16, 1024, 128)  # the short shape whose host time showed in run 56's events


class _DType:
    def __init__(self, name: str, itemsize: int):
        self.name, self.itemsize = name, itemsize

    def __str__(self) -> str:
        return f"torch.{self.name}"


class TensorLike:
    """What attention() and a launch read of a torch CUDA tensor."""

    __module__ = "torch"
    is_cuda = True

    def __init__(self, ptr: int, shape: tuple, dtype: _DType):
        self._ptr, self.shape, self.dtype = ptr, tuple(shape), dtype
        step, strides = 1, []
        for extent in reversed(self.shape):
            strides.append(step)
            step *= extent
        self._stride = tuple(reversed(strides))
        self.device = types.SimpleNamespace(type="cuda", index=0)

    def data_ptr(self) -> int:
        return self._ptr

    def stride(self) -> tuple:
        return self._stride

    def get_device(self) -> int:
        return 0


def torch_stand_in(fresh: bool) -> types.ModuleType:
    """A ``torch`` module for attention(): new tensors at one pointer per shape, or (``fresh``)
    at a new pointer every time."""
    torch = types.ModuleType("torch")
    torch.bfloat16, torch.float32 = _DType("bfloat16", 2), _DType("float32", 4)
    torch.Tensor = TensorLike
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=lambda device: 0)
    pointers = itertools.count(0x7F00_0000_0000, 0x100_0000)
    kept: dict = {}

    def pointer(shape) -> int:
        if fresh:
            return next(pointers)
        return kept.setdefault(tuple(shape), next(pointers))

    torch.empty_like = lambda t: TensorLike(pointer(t.shape), t.shape, t.dtype)
    torch.empty = lambda shape, device=None, dtype=None: TensorLike(pointer(shape), shape, dtype)
    return torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", action="store_true", help="cProfile the fresh-pointer case")
    parser.add_argument("--json", help="also write the results to this file")
    options = parser.parse_args()
    calls = launch_host_cpu.fake_driver()
    import attention_fwd

    batch, heads, seq, head_dim = SHAPE
    q, k, v = (
        TensorLike(0x7000_0000_0000 + i * 0x1000_0000, SHAPE, _DType("bfloat16", 2))
        for i in range(3)
    )
    measured = {}
    for case, fresh in (("kept_outputs", False), ("fresh_outputs", True)):
        sys.modules["torch"] = torch_stand_in(fresh)
        measured[case] = launch_host_cpu.per_launch_us(lambda: attention_fwd.attention(q, k, v))
        print(case, json.dumps(measured[case]), flush=True)
    if options.profile:
        profile = cProfile.Profile()
        profile.runcall(lambda: [attention_fwd.attention(q, k, v) for _ in range(20000)])
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
        print(text.getvalue())
    payload = {
        "shape": SHAPE,
        "us_per_call": measured,
        "driver_calls": calls,
        "python": sys.version.split()[0],
    }
    launch_host_cpu.emit(payload, options.json)


if __name__ == "__main__":
    main()
