"""The static half of the proxy rule: shared memory written through the generic proxy (plain
stores, ``st.shared``, ``stmatrix``) and then read by an async-proxy instruction (a TMA or bulk
store, a wgmma operand, a tensor-memory copy's source) needs a proxy fence between the two (PTX
ISA, Memory Consistency Model: proxies; the fence is on the causality path from the write to the
read).

Checked in program (textual) order over the events lowering records, per shared buffer: a read
of a buffer whose last write no proxy fence follows is warned about. Loops are not unrolled and
a fence anywhere between counts, so a write that only a later iteration reads, or a fence that
a branch skips, goes unreported (the interpreter sees those); nothing is reported that textual
order does not show.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Location, warn_at
from ..ptx.instructions import ASYNC_SHARED_FENCE_CALL


@dataclass(frozen=True)
class ProxyEvent:
    """One step for the proxy rule: ``write`` (a generic write to ``buffers``), ``fence`` (a
    proxy fence covering shared memory) or ``read`` (``opcode`` reading ``buffers`` through the
    async proxy)."""

    kind: str
    location: Location
    buffers: tuple[str, ...] = ()
    opcode: str | None = None


def check_proxy_fences(events: list[ProxyEvent]) -> list[str]:
    """Warn at each async read of a buffer written since the last proxy fence; returns the
    warning texts."""
    unfenced: dict[str, Location] = {}  # buffer -> its first write since the last fence
    warned, seen = [], set()
    for event in events:
        if event.kind == "fence":
            unfenced.clear()
        elif event.kind == "write":
            for buffer in event.buffers:
                unfenced.setdefault(buffer, event.location)
        else:
            for buffer in event.buffers:
                write = unfenced.get(buffer)
                if write is not None and (buffer, event.location) not in seen:
                    seen.add((buffer, event.location))
                    at = (
                        f"line {write.lineno}"
                        if write.filename == event.location.filename
                        else str(write)
                    )
                    warned.append(
                        warn_at(
                            f"{event.opcode} reads shared buffer {buffer!r} through the async proxy, "
                            f"but the generic-proxy write to it at {at} is not followed by a proxy "
                            f"fence before this read, so the read may see the bytes from before the "
                            f"write",
                            event.location,
                            opcode=event.opcode,
                            hint=f"add {ASYNC_SHARED_FENCE_CALL} after the writes, before the "
                            f"barrier that orders them with the issuing thread",
                        )
                    )
    return warned
