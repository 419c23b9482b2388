"""CUDA compiler pieces from the pip wheels: nvJitLink (PTX -> cubin; a standalone ptxas for kernels
that set register budgets), nvdisasm/cuobjdump (SASS).

Nothing here looks at ``/usr/local/cuda``: the tools are found in the ``nvidia-cuda-*`` wheels of the
running Python environment (or on PATH as a last resort), so NVVM, nvJitLink and the disassembler are
one CUDA version.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import ToolchainError
from ..targets import Target
from .ptx_post import uses_setmaxnreg


@functools.cache
def find_tool(name: str) -> str | None:
    """Path of a CUDA binary (ptxas, nvdisasm, cuobjdump) from the wheels, else PATH, else None."""
    candidates = []
    for entry in sys.path:
        for sub in (
            "nvidia/cu13/bin",
            "nvidia/cuda_nvcc/bin",
            "nvidia/cuda_nvdisasm/bin",
            "nvidia/cuda_cuobjdump/bin",
        ):
            candidates.append(Path(entry) / sub / name)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which(name)


def nvjitlink_version() -> str:
    from cuda.bindings import nvjitlink

    major, minor = nvjitlink.version()
    return f"{major}.{minor}"


def libraries() -> dict:
    """The NVVM and nvJitLink libraries in use (a wheel's or a system CUDA's): their paths and
    versions, for an entry's metadata; loading them is a no-op once a compile has."""
    from cuda import pathfinder
    from cuda.bindings import nvvm

    found = {
        name: pathfinder.load_nvidia_dynamic_lib(name).abs_path for name in ("nvvm", "nvJitLink")
    }
    return {
        "nvvm_library": found["nvvm"],
        "nvvm_version": ".".join(map(str, nvvm.version())),
        "nvjitlink_library": found["nvJitLink"],
        "nvjitlink_version": nvjitlink_version(),
    }


def link_cubin(ptx: str, target: Target, name: str = "kernel") -> tuple[bytes, str]:
    """Assemble and link PTX into a cubin with nvJitLink; returns (cubin, ptxas info log)."""
    from cuda.bindings import nvjitlink

    options = [f"-arch={target.name}", "-verbose"]
    try:
        handle = nvjitlink.create(len(options), options)
    except nvjitlink.nvJitLinkError as exc:  # an nvJitLink older than the target
        raise ToolchainError(
            f"nvJitLink {nvjitlink_version()} cannot build for {target}: {exc}; "
            f"install a newer nvidia-nvjitlink wheel or choose another "
            f"target"
        ) from exc
    try:
        data = ptx.encode()
        try:
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), f"{name}.ptx")
            nvjitlink.complete(handle)
        except nvjitlink.nvJitLinkError as exc:
            raise ToolchainError(
                f"nvJitLink could not assemble {name} for {target}: "
                f"{_log(nvjitlink, handle, 'error')}"
            ) from exc
        cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
        nvjitlink.get_linked_cubin(handle, cubin)
        return bytes(cubin), _log(nvjitlink, handle, "info")
    finally:
        nvjitlink.destroy(handle)


@dataclass(frozen=True)
class Linked:
    """A cubin, ptxas' info log, which linker built it (``ck.metadata["toolchain"]["linker"]``)
    and, where the kernel could not get the linker it needs, why (a warning for the kernel)."""

    cubin: bytes
    log: str
    linker: str
    note: str | None = None


def build_cubin(ptx: str, target: Target, name: str = "kernel") -> Linked:
    """The cubin of a kernel's PTX. nvJitLink's ptxas ignores ``setmaxnreg`` (C7504: it keeps
    register counts compatible across compilation units), so a kernel that sets register budgets
    is assembled by a standalone ptxas as a whole program (``ptxas -arch=...`` without ``-c``:
    one unit, a cubin directly); without one (or one too old for the PTX) it falls back to
    nvJitLink, with a note saying so."""
    if uses_setmaxnreg(ptx):
        ptxas = find_tool("ptxas")
        if ptxas is None:
            note = (
                "setmaxnreg needs a standalone ptxas (the nvidia-cuda-nvcc wheel's, or a CUDA "
                "toolkit's on PATH) and none was found: linked with nvJitLink, which ignores "
                "it"
            )
        else:
            try:
                cubin, log = assemble_whole_program(ptxas, ptx, target, name)
                return Linked(cubin, log, f"ptxas {ptxas_version(ptxas)} ({ptxas})")
            except ToolchainError as exc:
                note = f"setmaxnreg: {exc.message}; linked with nvJitLink, which ignores it"
        cubin, log = link_cubin(ptx, target, name)
        return Linked(cubin, log, f"nvJitLink {nvjitlink_version()}", note)
    cubin, log = link_cubin(ptx, target, name)
    return Linked(cubin, log, f"nvJitLink {nvjitlink_version()}")


@functools.cache
def ptxas_version(ptxas: str) -> str:
    """``V13.0.88``-style version of a ptxas binary (``release 13.0`` gives ``13.0``)."""
    out = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else "unknown"


def assemble_whole_program(ptxas: str, ptx: str, target: Target, name: str) -> tuple[bytes, str]:
    """(cubin, info log) of ``ptxas -arch=<target> -v``: whole-program, so ``setmaxnreg`` holds."""
    with tempfile.TemporaryDirectory(prefix="jittile-ptxas-") as work:
        source, output = Path(work) / f"{name}.ptx", Path(work) / f"{name}.cubin"
        source.write_text(ptx)
        proc = subprocess.run(
            [ptxas, f"-arch={target.name}", "-v", "-o", str(output), str(source)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise ToolchainError(
                f"ptxas {ptxas_version(ptxas)} ({ptxas}) could not assemble "
                f"{name} for {target}: {proc.stderr.strip()}"
            )
        return output.read_bytes(), proc.stdout + proc.stderr


def _log(nvjitlink, handle, which: str) -> str:
    size = getattr(nvjitlink, f"get_{which}_log_size")(handle)
    buf = bytearray(size)
    getattr(nvjitlink, f"get_{which}_log")(handle, buf)
    return bytes(buf).rstrip(b"\0").decode(errors="replace")


_USAGE = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")


_ADVISORY = re.compile(r"\(C75\d\d\) Potential Performance Loss: (.*)")


def performance_advisories(info_log: str) -> list[str]:
    """ptxas' "Potential Performance Loss" notes (wgmma serialized, setmaxnreg ignored...):
    code that runs, but slower than the kernel was written to run."""
    return [m.group(1).strip() for m in _ADVISORY.finditer(info_log)]


def resource_usage(info_log: str) -> dict:
    """Registers, static shared bytes, local (stack) bytes and spills from ptxas' verbose log."""
    usage = {
        "registers": None,
        "static_shared_bytes": 0,
        "local_bytes": 0,
        "spill_stores": 0,
        "spill_loads": 0,
        "param_bytes": None,
    }
    if m := _USAGE.search(info_log):
        usage["registers"] = int(m.group(1))
    if m := _SMEM.search(info_log):
        usage["static_shared_bytes"] = int(m.group(1))
    if m := _STACK.search(info_log):
        usage["local_bytes"], usage["spill_stores"], usage["spill_loads"] = map(int, m.groups())
    if m := _CMEM.search(info_log):
        usage["param_bytes"] = int(m.group(1))
    return usage


def disassemble(cubin: bytes) -> str:
    """SASS of a cubin via nvdisasm (or cuobjdump); a clear error names the missing tool."""
    tool = find_tool("nvdisasm")
    args: list[str]
    if tool:
        args = [tool, "-c"]
    else:
        tool = find_tool("cuobjdump")
        if not tool:
            raise ToolchainError(
                "SASS needs nvdisasm or cuobjdump; install the wheels with "
                "`pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump` (jittile[dev] has them)"
            )
        args = [tool, "--dump-sass"]
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as handle:
        handle.write(cubin)
        path = handle.name
    try:
        proc = subprocess.run(args + [path], capture_output=True, text=True)
    finally:
        os.unlink(path)
    if proc.returncode != 0:
        raise ToolchainError(f"{Path(args[0]).name} failed: {proc.stderr.strip()}")
    return proc.stdout


def sass_opcodes(sass: str) -> dict[str, int]:
    """Count of each SASS opcode (first mnemonic word, predicates stripped) in a listing."""
    counts: dict[str, int] = {}
    for line in sass.splitlines():
        match = re.search(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if match:
            op = match.group(1)
            counts[op] = counts.get(op, 0) + 1
    return counts
