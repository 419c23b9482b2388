"""Kernels written into their own temporary module files (jittile reads a kernel's source from its
file), imported under a fresh module name."""

from __future__ import annotations

import importlib.util
import itertools
import linecache
import textwrap
from pathlib import Path

_serial = itertools.count()

HEADER = """\
import jittile
from jittile import T


"""


def module_from(tmp_path: Path, source: str, header: str = HEADER, path: Path | None = None):
    """Import ``header + dedent(source)`` from a new file under ``tmp_path`` (or written over
    ``path``: an edit of that file), as a new module."""
    name = f"_jittile_test_kernels_{next(_serial)}"
    path = path or tmp_path / f"{name}.py"
    path.write_text(header + textwrap.dedent(source))
    linecache.checkcache(str(path))  # an edited file: jittile reads the source through linecache
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def body_kernel(tmp_path: Path, body: str, params: str = 'A: T.Tensor((16,), "uint32")'):
    """A kernel whose body is ``body`` (after a one-warp ``T.device_entry``); returns it and
    its file."""
    source = (
        f"@jittile.kernel\ndef kernel({params}):\n"
        f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
    )
    module = module_from(tmp_path, source)
    return module.kernel, Path(module.__file__)
