"""The compile stages of a specialization as data, and the switches that act on them.

A kernel goes through these stages, in order (Triton's ``compile()`` loop is the model):

====================  ===================================================================
``checked``           the tile call sites the frontend checked: location, family, opcode
``plan``              the native instructions each call site expands to (``ck.plan``)
``python``            the lowered Python function numba-cuda compiles (after reshaping)
``nvvm``              the NVVM IR numba-cuda hands NVVM (also under Triton's ``llir``)
``ptx``               the PTX, after jittile's post-pass (stable entry name, grid constants)
``cubin``             the cubin nvJitLink links
``sass``              its disassembly (made when asked: it needs nvdisasm)
====================  ===================================================================

``ck.asm[stage]`` holds each, the same on a fresh compile and a disk-cache hit (a hit keeps the
NVVM IR compressed in its metadata and unpacks it when asked). Environment switches:

- ``JITTILE_DUMP_DIR=dir``: every compile writes each stage to ``dir/<key[:16]>/<kernel>.<ext>``
  (``checked.txt``, ``plan.txt``, ``py``, ``ll``, ``ptx``, ``cubin``, and ``sass`` where nvdisasm
  is installed);
- ``JITTILE_OVERRIDE_DIR=dir``: a kernel with a ``dir/<key[:16]>/<kernel>.ptx`` (the dump's layout,
  so a dumped file can be edited in place) or a ``dir/<kernel>.ptx`` is linked from that PTX
  instead of the generated one, with a warning, and is never written to the disk cache;
- ``JITTILE_ALWAYS_COMPILE=1``: ``kernel.compile`` and the first launch of a specialization
  compile again instead of using the memory or disk cache (the result is still stored).
"""

from __future__ import annotations

import base64
import os
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

STAGES = ("checked", "plan", "python", "nvvm", "ptx", "cubin", "sass")
ALIASES = {"llir": "nvvm"}  # Triton's name for the LLVM IR stage
_DUMP_FILES = {
    "checked": "checked.txt",
    "plan": "plan.txt",
    "python": "py",
    "nvvm": "ll",
    "ptx": "ptx",
    "cubin": "cubin",
    "sass": "sass",
}


def always_compile() -> bool:
    """``JITTILE_ALWAYS_COMPILE`` set (not ``0``): bypass the memory and disk caches."""
    return os.environ.get("JITTILE_ALWAYS_COMPILE", "") not in ("", "0")


def pack_text(text: str) -> str:
    """Text kept compressed in a cache entry's metadata (the NVVM IR: large, rarely read)."""
    return base64.b64encode(zlib.compress(text.encode(), 6)).decode("ascii")


def unpack_text(packed: str) -> str:
    return zlib.decompress(base64.b64decode(packed)).decode()


class Stages(Mapping):
    """``ck.asm``: each stage by name (see the module docstring), made on first access where a
    stage is derived (``sass``) or kept packed (``nvvm`` on a cache hit)."""

    def __init__(self, makers: dict[str, Callable[[], object]]):
        self._makers = makers
        self._made: dict[str, object] = {}

    def __getitem__(self, name: str):
        stage = ALIASES.get(name, name)
        if stage not in self._makers:
            raise KeyError(
                f"{name!r} is not a compile stage; the stages are {', '.join(STAGES)}"
                f" (also {', '.join(ALIASES)})"
            )
        if stage not in self._made:
            self._made[stage] = self._makers[stage]()
        return self._made[stage]

    def __iter__(self) -> Iterator[str]:
        return iter(s for s in STAGES if s in self._makers)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"<jittile stages {', '.join(self)}>"


def override_ptx(name: str, key: str) -> Path | None:
    """The PTX file ``JITTILE_OVERRIDE_DIR`` holds for kernel ``name`` of cache key ``key``."""
    folder = os.environ.get("JITTILE_OVERRIDE_DIR")
    if not folder:
        return None
    for path in (Path(folder) / key[:16] / f"{name}.ptx", Path(folder) / f"{name}.ptx"):
        if path.is_file():
            return path
    return None


def dump(stages: Stages, name: str, key: str) -> Path | None:
    """Write every stage to ``JITTILE_DUMP_DIR`` (SASS where a disassembler is installed)."""
    from .errors import ToolchainError

    folder = os.environ.get("JITTILE_DUMP_DIR")
    if not folder:
        return None
    where = Path(folder) / key[:16]
    where.mkdir(parents=True, exist_ok=True)
    for stage in stages:
        try:
            value = stages[stage]
        except ToolchainError:  # no nvdisasm: every other stage is still written
            continue
        path = where / f"{name}.{_DUMP_FILES[stage]}"
        if isinstance(value, bytes):
            path.write_bytes(value)
        else:
            path.write_text(str(value))
    return where
