"""What each instruction of a lowered kernel does, for the interpreter.

Tile-pattern instructions are the plan records themselves (``__jt_rS_K`` -> ``ir.sites[S].plan[K]``):
the registry names the family of each site, the family its interpreter module
(:mod:`.families`), which gets the record, its opcode parsed by the family and its operands in the
record's role order; their completion (mbarrier transaction bytes, bulk group, tcgen05 commit) is
the record's. Raw PTX and the language's built-ins arrive as their asm statement, named by the
opcode it issues (:data:`RAW`, and the families' companion instructions). Asynchronous copies and
wgmma MMAs complete when issued.
"""

from __future__ import annotations

import importlib
import struct

import numpy as np

from ..patterns import registry
from ..ptx.atomics import ATOMIC_PREFIX
from ..ptx.instructions import ASYNC_SHARED_FENCE, INSTRUCTIONS
from ..ptx.math import SHUFFLE_PREFIX
from . import math
from .asynchronous import arrive, barrier_at, maybe_complete
from .atomics import atomic
from .machine import Block, Fault, MBarrier
from .tma import round_to_bfloat16
from .tmem import tensor_memory


def execute(machine, thread, name: str, args: tuple):
    """Carry out instruction global ``name`` for ``thread`` with operand ``args``."""
    return handler(machine, name)(machine, thread, args)


def handler(machine, name: str):
    """``run(machine, thread, args)`` for instruction global ``name``, resolved once per launch
    (a thread that calls it directly skips the lookup)."""
    run = machine.handlers.get(name)
    if run is None:
        run = machine.handlers[name] = _handler(machine, name)
    return run


def blocks(ir, namespace: dict, name: str) -> bool:
    """Whether instruction global ``name`` may block its thread, so the thread must yield it to
    the scheduler; any other instruction runs as a plain call in the thread's own frame (the
    scheduler would run the thread on after it anyway, so the order is the same)."""
    spec = namespace[name]
    if spec[0] == "record":
        run = _semantics(registry.family(ir.sites[spec[1]].family))
    else:
        run = next((run for head, run in raw() if spec[1].comment.startswith(head)), None)
    return getattr(run, "blocks", False)


def _semantics(pattern):
    """The ``execute`` of the interpreter module the family declares."""
    return importlib.import_module(pattern.interpreter).execute


def _blocking(run):
    """Mark an instruction's semantics as one that can return :class:`Block`."""
    run.blocks = True
    return run


def _handler(machine, name: str):
    """``run(machine, thread, args)`` for instruction global ``name``, resolved once per launch:
    the plan record's family with its operands by role, or the raw opcode's semantics."""
    if name == "__jt_syncthreads":
        return lambda machine, thread, args: Block(("sync",))
    spec = machine.namespace[name]
    if spec[0] == "record":
        site = machine.ir.sites[spec[1]]
        record = site.plan[spec[2]]
        pattern = registry.family(site.family)
        execute, op = _semantics(pattern), pattern.parse(record.opcode)
        roles = [role for role, _ in record.operands]
        if pattern.register_operands:
            return lambda machine, thread, args: execute(machine, thread, record, op, args)
        return lambda machine, thread, args: execute(
            machine, thread, record, op, dict(zip(roles, map(_plain, args)))
        )
    asm = spec[1]
    opcode = asm.comment
    for head, run in raw():
        if opcode.startswith(head):
            convert = list if getattr(run, "typed", False) else lambda a: list(map(_plain, a))
            return lambda machine, thread, args: run(machine, thread, opcode, convert(args), name)
    raise Fault(f"the interpreter does not know the semantics of {opcode or asm.template!r}")


_NUMPY_INTEGERS = frozenset(
    {np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64}
)


def _plain(value):
    """A NumPy integer as a Python int (addresses and counts do arithmetic without wrapping)."""
    return int(value) if type(value) in _NUMPY_INTEGERS else value


# ---------------------------------------------------------------------------------- mbarriers
def _mbarrier_init(machine, thread, opcode, values, name):
    address, count = values
    if address % 8:
        raise Fault(f"mbarrier at shared {address:#x} is not 8-byte aligned")
    thread.cta.smem.check(address, 8)
    if not 1 <= count < 2**20:
        raise Fault(f"mbarrier.init count {count} is outside 1..2^20-1")
    thread.cta.mbarriers[address] = MBarrier(count, count)


def _mbarrier_arrive(machine, thread, opcode, values, name):
    cta, address = thread.cta, values[0]
    if ".shared::cluster" in opcode:
        cta, address = _cluster_target(machine, thread, address)
    if ".expect_tx" in opcode:
        barrier_at(cta, address).tx += values[1]
    arrive(machine, cta, address)


def _mbarrier_expect_tx(machine, thread, opcode, values, name):
    address, count = values
    barrier = barrier_at(thread.cta, address)
    barrier.tx += count
    maybe_complete(thread.cta, address, barrier)


@_blocking
def _mbarrier_wait(machine, thread, opcode, values, name):
    """``try_wait`` returns once the phase completed (it may wait as long as it likes)."""
    address, parity = values
    barrier = barrier_at(thread.cta, address)
    done = 1 if opcode.startswith("mbarrier") else None
    if barrier.completed(parity):
        return done
    return Block(("mbarrier", thread.cta, address, parity, done))


def _mbarrier_inval(machine, thread, opcode, values, name):
    thread.cta.mbarriers.pop(values[0], None)


# ------------------------------------------------------------------------ collectives & misc
def _warp_collective(run, mask: int | None = None, typed: bool = False):
    """A ``.sync`` instruction: the scheduler runs ``run(values_per_lane, threads)`` once every
    live lane of the warp (with operand ``mask``, every lane of that member mask) has reached
    the same instruction. ``typed``: the operands keep their NumPy types."""

    @_blocking
    def issue(machine, thread, opcode, values, name):
        key = (opcode, thread.instruction())
        if mask is not None:
            key += (int(values[mask]),)  # only the member lanes take part
        return Block(
            ("warp", key, lambda per_lane, threads: run(machine, opcode, per_lane, threads), values)
        )

    issue.typed = typed
    return issue


def _elect(machine, opcode, per_lane, threads):
    mask = per_lane[0][0]
    chosen = min((t.lane for t in threads if mask >> t.lane & 1), default=None)
    return [1 if t.lane == chosen else 0 for t in threads]


def _nothing(machine, thread, opcode, values, name):
    return None


# ------------------------------------------------------------------------------ the proxies
def _proxy_fence(machine, thread, opcode, values, name):
    """``fence.proxy.async`` (a form covering shared memory): the thread's generic writes so
    far become visible to the async proxy (see :class:`~.memory.SharedMemory`)."""
    if INSTRUCTIONS[opcode].proxy == ASYNC_SHARED_FENCE:
        thread.cta.smem.proxy_fence(thread.linear, thread.cta.syncs)


def _generic_write(thread, address: int, nbytes: int) -> None:
    """Bytes ``thread`` wrote through the generic proxy at the lowered line it is suspended at."""
    thread.cta.smem.generic_write(
        address, nbytes, thread.linear, thread.gen.gi_frame.f_lineno, thread.cta.syncs
    )


def _policy(machine, thread, opcode, values, name):
    return 0  # an opaque 64-bit cache policy: caches are not modelled


def _cluster_rank(machine, thread, opcode, values, name):
    return thread.cta.cluster_rank


# A shared::cluster address as the interpreter writes it: the CTA's cluster rank + 1 above the
# 24 bits of a CTA's shared window (228 KB at most); without them, as a shared::cta address, it
# is the issuing CTA's own (the PTX ISA: the shared::cta window lies in the shared::cluster one).
_RANK_SHIFT = 24


def _mapa(machine, thread, opcode, values, name):
    """``mapa.shared::cluster.u32 d, a, rank``: variable ``a`` of this CTA in CTA ``rank``."""
    address, rank = values
    machine.cta_of_rank(rank)  # a rank outside the cluster faults here, not at the use
    return (rank + 1) << _RANK_SHIFT | address & ((1 << _RANK_SHIFT) - 1)


def _cluster_target(machine, thread, address: int):
    """The CTA and its shared::cta address that a shared::cluster ``address`` names."""
    rank = address >> _RANK_SHIFT
    if rank == 0:
        return thread.cta, address
    return machine.cta_of_rank(rank - 1), address & ((1 << _RANK_SHIFT) - 1)


@_blocking
def _cluster_barrier(machine, thread, opcode, values, name):
    if ".wait" in opcode or opcode == "T.cuda.cluster_sync":
        return Block(("cluster",))
    return None  # arrive: the wait that follows blocks until everyone arrived


# ------------------------------------------------------------------------------ tcgen05
def _tcgen05_alloc(machine, opcode, per_lane, threads):
    address, ncols = per_lane[0]
    cta = threads[0].cta
    taddr = tensor_memory(cta).alloc(ncols)
    cta.tmem_sites[taddr] = threads[0].line(machine.where)  # named if it leaks (machine.py)
    cta.smem.write(address, np.array([taddr], dtype=np.uint32))
    return [None] * len(threads)


def _tcgen05_dealloc(machine, opcode, per_lane, threads):
    taddr, ncols = per_lane[0]
    tensor_memory(threads[0].cta).dealloc(taddr, ncols)
    return [None] * len(threads)


def _tcgen05_relinquish(machine, opcode, per_lane, threads):
    tensor_memory(threads[0].cta).relinquish()
    return [None] * len(threads)


def _tcgen05_ld(machine, opcode, per_lane, threads):
    shape, num, pack = _ldst_form(opcode)
    tmem = tensor_memory(threads[0].cta)
    out = [None] * len(threads)
    for taddr, members in _by_address(per_lane).items():
        loaded = tmem.load_warp(
            shape, num, pack, taddr, threads[0].warp, [threads[i].lane for i in members]
        )
        for i, regs in zip(members, loaded):
            out[i] = regs[0] if len(regs) == 1 else tuple(regs)
    return out


def _tcgen05_st(machine, opcode, per_lane, threads):
    shape, num, pack = _ldst_form(opcode)
    tmem = tensor_memory(threads[0].cta)
    for taddr, members in _by_address(per_lane).items():
        tmem.store_warp(
            shape,
            num,
            pack,
            taddr,
            threads[0].warp,
            [threads[i].lane for i in members],
            [list(per_lane[i][1:]) for i in members],
        )
    return [None] * len(threads)


def _by_address(per_lane) -> dict:
    """The lanes (indices into ``per_lane``) of each TMEM address the lanes pass, in order."""
    groups: dict = {}
    for i, values in enumerate(per_lane):
        groups.setdefault(values[0], []).append(i)
    return groups


def _ldst_form(opcode: str) -> tuple[str, int, bool]:
    words = opcode.split(".")
    shape = next(w for w in words if "x" in w and w[0].isdigit() and "b" in w)
    num = int(next(w for w in words if w.startswith("x") and w[1:].isdigit())[1:])
    return shape, num, any(w in ("pack::16b", "unpack::16b") for w in words)


def _tcgen05_commit(machine, thread, opcode, values, name):
    """The copies issued before it already completed: arrive on the barrier (of every CTA in
    the mask with .multicast::cluster)."""
    address = values[0]
    targets = [thread.cta]
    if ".multicast::cluster" in opcode:
        targets = [machine.cta_of_rank(r) for r in range(16) if values[1] >> r & 1]
    for cta in targets:
        arrive(machine, cta, address)


def _cvt_packed(machine, thread, opcode, values, name):
    """``cvt.rn{.relu}.{bf16x2,f16x2}.f32 d, hi, lo``: two rounded halves, ``hi`` on top (one
    thread's two scalars: Python integer arithmetic on their float32 bits, no arrays)."""
    hi, lo = values
    if type(hi) is not np.float32:
        hi = np.float32(hi)
    if type(lo) is not np.float32:
        lo = np.float32(lo)
    if ".relu" in opcode:
        hi, lo = (np.float32(0) if h < 0 else h for h in (hi, lo))
    if "bf16x2" not in opcode:
        hi, lo = (int(h.astype(np.float16).view(np.uint16)) for h in (hi, lo))
        return hi << 16 | lo
    hi, lo = _PAIR_BITS.unpack(_PAIR.pack(hi, lo))
    return _bfloat16(hi) << 16 | _bfloat16(lo)


_cvt_packed.typed = True  # float operands: nothing for _plain to convert


def _bfloat16(bits: int) -> int:
    return 0x7FFF if bits & 0x7FFFFFFF > 0x7F800000 else round_to_bfloat16(bits)


_PAIR, _PAIR_BITS = struct.Struct("<2f"), struct.Struct("<2I")  # two float32s' bits, exactly


def _st_shared(machine, thread, opcode, values, name):
    address, *words = values
    thread.cta.smem.write(address, np.array(words, dtype=np.uint32))
    _generic_write(thread, address, 4 * len(words))


@_blocking
def _named_barrier(machine, thread, opcode, values, name):
    barrier, count = values
    if not 0 <= barrier < 16 or count <= 0 or count % 32:
        raise Fault(
            f"{opcode} barrier {barrier} with {count} threads: ids are 0..15 and the "
            f"count a positive multiple of 32"
        )
    return Block(("named", barrier, count, opcode.startswith("bar.sync")))


def _stmatrix(machine, opcode, per_lane, threads):
    """``stmatrix.m8n8.xN{.trans}.shared.b16``: lanes 8i..8i+7 address the rows of matrix i;
    each lane's register i holds two b16 of row lane // 4, columns 2 (lane % 4) and the next.
    The warp's rows move as one array; rows that overlap are written in order (last wins)."""
    count = int(next(w for w in opcode.split(".") if w[0] == "x" and w[1:].isdigit())[1:])
    by_lane = {t.lane: values for values, t in zip(per_lane, threads)}
    words = np.zeros((32, count), dtype=np.uint32)
    for lane, values in by_lane.items():
        words[lane] = [int(v) & 0xFFFFFFFF for v in values[1 : 1 + count]]
    # halves[matrix, row, column]: lane 4 row + q holds columns 2q, 2q + 1 (low half first)
    halves = words.view(np.uint16).reshape(8, 4, count, 2).transpose(2, 0, 1, 3)
    halves = halves.reshape(count, 8, 8)
    if ".trans" in opcode:
        halves = halves.transpose(0, 2, 1)
    addresses = [by_lane[8 * matrix + row][0] for matrix in range(count) for row in range(8)]
    smem = threads[0].cta.smem
    for address in addresses:
        smem.check(address, 16)
    rows = np.array(addresses, dtype=np.int64)
    ordered = np.sort(rows)
    data = np.ascontiguousarray(halves).reshape(-1, 8).view(np.uint8)  # (rows, 16) bytes
    if (np.diff(ordered) >= 16).all():
        smem.data[rows[:, None] + np.arange(16)] = data
    else:
        for address, row in zip(addresses, data):
            smem.data[address : address + 16] = row
    lanes = {t.lane: t for t in threads}
    for lane, address in enumerate(addresses):  # row i of the warp's matrices: lane i's address
        _generic_write(lanes[lane], address, 16)
    return [None] * len(threads)


# Raw PTX and built-ins by opcode prefix (longest first where prefixes overlap); the families'
# companion instructions follow (:func:`raw`).
RAW = [
    ("mbarrier.init", _mbarrier_init),
    ("mbarrier.inval", _mbarrier_inval),
    ("mbarrier.arrive", _mbarrier_arrive),
    ("mbarrier.expect_tx", _mbarrier_expect_tx),
    ("mbarrier.try_wait", _mbarrier_wait),
    ("T.cuda.mbarrier_wait", _mbarrier_wait),
    ("T.cuda.cluster_ctarank", _cluster_rank),
    ("mapa", _mapa),
    ("T.cuda.cluster_sync", _cluster_barrier),
    ("barrier.cluster", _cluster_barrier),
    ("fence.proxy.async", _proxy_fence),
    ("fence.", _nothing),
    ("prefetch.tensormap", _nothing),
    ("createpolicy.", _policy),
    ("elect.sync", _warp_collective(_elect, mask=0)),
    (SHUFFLE_PREFIX, _warp_collective(math.shuffle, mask=3, typed=True)),
    *math.MATH.items(),
    ("tcgen05.alloc", _warp_collective(_tcgen05_alloc)),
    ("tcgen05.dealloc", _warp_collective(_tcgen05_dealloc)),
    ("tcgen05.relinquish_alloc_permit", _warp_collective(_tcgen05_relinquish)),
    ("tcgen05.ld", _warp_collective(_tcgen05_ld)),
    ("tcgen05.st", _warp_collective(_tcgen05_st)),
    ("tcgen05.commit", _tcgen05_commit),
    ("tcgen05.wait", _nothing),
    ("tcgen05.fence", _nothing),
    ("setmaxnreg.", _nothing),  # registers are not a resource here
    ("cvt.rn.", _cvt_packed),
    ("st.shared.", _st_shared),
    ("stmatrix.", _warp_collective(_stmatrix)),
    ("bar.sync", _named_barrier),
    ("bar.arrive", _named_barrier),
    (ATOMIC_PREFIX, atomic),
]

# The semantics a family may give its companion instructions (Companion.interpreted).
COMPANION_SEMANTICS = {"at issue": _nothing}  # the family's instructions completed when issued
_raw: list | None = None


def raw() -> list:
    """:data:`RAW` and every family's companion instructions, with their semantics."""
    global _raw
    if _raw is None:
        _raw = RAW + [
            (companion.opcode, COMPANION_SEMANTICS[companion.interpreted])
            for _, companion in registry.companions()
        ]
    return _raw
