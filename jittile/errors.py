"""The exceptions and warnings users see.

Every error raised while compiling a kernel names the source position of the offending call first, so
that editors and terminals can jump to it (``path:line:col: message``); ``str(error)`` then shows that
source line with a caret under the offending argument, and a fix hint where the fix is known.
Compile errors leave the public entry points (``kernel.compile``, a launch) with jittile's own frames
removed from their tracebacks; ``JITTILE_DEBUG=1`` keeps them. Warnings about a kernel's code are
attributed to the kernel's line, and strict mode (``@jittile.kernel(strict=True)`` or
``JITTILE_STRICT=1``) raises them as :class:`ContractError` instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import linecache
import os
import re
import sys
import types
import warnings
from dataclasses import dataclass, field

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@dataclass(frozen=True)
class Location:
    """A position in a kernel's source file (1-based line, 0-based column, like ``ast``).

    ``end_col_offset`` (where the node ends, on the same line) only widens the caret under the
    source line; it takes no part in equality."""

    filename: str
    lineno: int
    col_offset: int
    end_col_offset: int | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}:{self.col_offset}"


def source_excerpt(location: Location) -> str:
    """The source line at ``location`` with a caret under the column (a ``^~~`` run to
    ``end_col_offset``), or ``""`` when the line cannot be read."""
    line = linecache.getline(location.filename, location.lineno).rstrip()
    if not line.strip():
        return ""
    data = line.encode("utf-8")  # ast columns count UTF-8 bytes

    def column(offset: int) -> int:
        return len(data[:offset].decode("utf-8", "replace").expandtabs())

    start = column(location.col_offset)
    end = column(location.end_col_offset) if location.end_col_offset else start + 1
    gutter = f"  {location.lineno} | "
    return (
        f"{gutter}{line.expandtabs()}\n{' ' * (len(gutter) - 2)}| {' ' * start}^"
        f"{'~' * max(0, end - start - 1)}"
    )


class JittileError(Exception):
    """Base class of every error jittile raises on purpose.

    ``message`` is the text without the location; ``hint`` (or None) says how to fix it."""

    def __init__(self, message: str, location: Location | None = None, *, hint: str | None = None):
        self.message = message
        self.location = location
        self.hint = hint
        self.filename = location.filename if location else None
        self.lineno = location.lineno if location else None
        self.col_offset = location.col_offset if location else None
        super().__init__(f"{location}: {message}" if location else message)

    def __str__(self) -> str:
        parts = [self.args[0] if self.args else self.message]
        excerpt = source_excerpt(self.location) if self.location else ""
        if excerpt:
            parts.append(excerpt)
        if self.hint:
            parts.append(f"  hint: {self.hint}")
        return "\n".join(parts)


class CompileError(JittileError):
    """The kernel body uses something jittile cannot compile (unsupported syntax, unknown name...)."""


class ContractError(CompileError):
    """A tile call or PTX instruction breaks its opcode's contract; raised before any GPU work."""

    def __init__(
        self,
        message: str,
        location: Location | None = None,
        *,
        opcode: str | None = None,
        parameter: str | None = None,
        hint: str | None = None,
    ):
        self.opcode = opcode
        self.parameter = parameter
        prefix = []
        if opcode:
            prefix.append(f"opcode {opcode!r}")
        if parameter:
            prefix.append(f"parameter {parameter!r}")
        full = f"{', '.join(prefix)}: {message}" if prefix else message
        super().__init__(full, location, hint=hint)
        self.rule = message


class LaunchError(JittileError):
    """Arguments that cannot be launched; raised before the launch, leaving the context usable."""


class InterpreterError(JittileError):
    """The interpreter saw what the GPU would fault or hang on, or a race it can see: names the
    kernel's source line, the CTA and thread, and the values."""


class ToolchainError(JittileError):
    """A CUDA compiler piece (NVVM, nvJitLink, nvdisasm...) is missing or failed."""


class JittileWarning(UserWarning):
    """Legal but almost certainly wrong, e.g. an expect_tx count that differs from the loads' bytes."""


# -- did you mean ---------------------------------------------------------------------------------

# Words a newcomer reaches for that are spelled differently in jittile (keywords of tile calls,
# of ``LaunchConfig``...): spelling distance alone does not find ``mbar`` from ``barrier``.
SYNONYMS = {
    "barrier": "mbar",
    "mbarrier": "mbar",
    "bar": "mbar",
    "threads": "block",
    "num_threads": "block",
    "block_dim": "block",
    "block_size": "block",
    "threads_per_block": "block",
    "blocks": "grid",
    "grid_dim": "grid",
    "num_blocks": "grid",
    "grid_size": "grid",
    "cluster_dim": "cluster",
    "cluster_size": "cluster",
    "coord": "coords",
    "coordinate": "coords",
    "coordinates": "coords",
    "offset": "coords",
    "offsets": "coords",
    "index": "coords",
    "shape": "box",
    "box_shape": "box",
    "tile": "box",
    "box_size": "box",
    "strides": "element_strides",
    "swizzle_mode": "swizzle",
    "mask": "cta_mask",
    "multicast": "cta_mask",
    "predicate": "pred",
    "policy": "cache_policy",
    "steps": "coord_steps",
    "coord_step": "coord_steps",
}


def closest_name(word: str, candidates) -> str | None:
    """The candidate ``word`` most likely stands for: a known synonym among the candidates
    (``barrier`` for ``mbar``, ``threads`` for ``block``), else a close spelling."""
    names = list(dict.fromkeys(candidates))
    synonym = SYNONYMS.get(word.lower())
    if synonym in names:
        return synonym
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return close[0] if close else None


# -- debugging, tracebacks -------------------------------------------------------------------------


def debug_requested(topic: str) -> bool:
    """Whether ``JITTILE_DEBUG`` (a comma- or space-separated list) names ``topic``, or is ``1`` /
    ``all`` (everything: full tracebacks, the cache log)."""
    named = re.split(r"[,\s]+", os.environ.get("JITTILE_DEBUG", "").strip().lower())
    return topic in named or "1" in named or "all" in named


def _internal(tb: types.TracebackType) -> bool:
    filename = tb.tb_frame.f_code.co_filename
    return filename.startswith("<frozen importlib") or os.path.abspath(filename).startswith(
        _PACKAGE_DIR
    )


def user_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without the frames of jittile's own files (nor of the import machinery that ran
    the user's module for them)."""
    kept = []
    while tb is not None:
        if not _internal(tb):
            kept.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def user_frame() -> types.FrameType | None:
    """The innermost frame of the caller's stack outside jittile's files: the user's call."""
    frame = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
    return frame


def user_location() -> Location | None:
    """Where the user's code called into jittile: the innermost frame outside jittile's files,
    with the column of the call where Python records it (3.11 and later)."""
    frame = user_frame()
    if frame is None:
        return None
    column, end = 0, None
    positions = getattr(frame.f_code, "co_positions", None)
    if positions is not None:
        for index, (line, _, start, stop) in enumerate(positions()):
            if index == frame.f_lasti // 2:
                if line == frame.f_lineno and start is not None:
                    column, end = start, stop
                break
    return Location(frame.f_code.co_filename, frame.f_lineno, column, end)


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the caller name the first frame outside
    jittile (the user's call), however deep in jittile the warning is issued."""
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        _PACKAGE_DIR
    ):
        frame, level = frame.f_back, level + 1
    return level


def public_entry(function):
    """Decorator of the entry points users call (``kernel.compile``, launches): a
    :class:`CompileError` leaves them with jittile's frames removed from its traceback, so that it
    shows the user's frames and (in its message) the user's source line. ``JITTILE_DEBUG=1``
    (or ``traceback``) keeps every frame."""

    @functools.wraps(function)
    def without_jittile_frames(*args, **kwargs):
        __tracebackhide__ = True
        try:
            return function(*args, **kwargs)
        except CompileError as exc:
            if debug_requested("traceback"):
                raise
            raise exc.with_traceback(user_traceback(exc.__traceback__)) from None

    return without_jittile_frames


# -- warnings about a kernel's code ----------------------------------------------------------------

_strict = contextvars.ContextVar("jittile_strict", default=False)


def strict_requested() -> bool:
    """Whether the kernel being compiled is strict, or ``JITTILE_STRICT`` is set (not ``0``)."""
    return _strict.get() or os.environ.get("JITTILE_STRICT", "0").strip() not in ("", "0")


@contextlib.contextmanager
def strictness(strict: bool):
    """Compile in strict mode (a :class:`JittileWarning` about the kernel's code is raised as a
    :class:`ContractError`) while the block runs, when ``strict``."""
    token = _strict.set(strict)
    try:
        yield
    finally:
        _strict.reset(token)


def warn_at(
    message: str, location: Location, *, opcode: str | None = None, hint: str | None = None
) -> str:
    """Issue a :class:`JittileWarning` attributed to ``location`` (the user's line, not
    jittile's); in strict mode raise it as a :class:`ContractError`. Returns the warning text."""
    if strict_requested():
        raise ContractError(
            f"{message} (strict mode: JittileWarnings are errors)",
            location,
            opcode=opcode,
            hint=hint,
        )
    text = f"{location}: {message}" + (f"; {hint}" if hint else "")
    warnings.warn_explicit(JittileWarning(text), JittileWarning, location.filename, location.lineno)
    return text
