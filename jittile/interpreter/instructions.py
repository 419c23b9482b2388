"""What each instruction of a lowered kernel does, for the interpreter.

Tile-pattern instructions are the plan records themselves (``__jt_rS_K`` -> ``ir.sites[S].plan[K]``):
their operands arrive in the record's role order, their completion (mbarrier transaction bytes,
bulk group, tcgen05 commit) is the record's. Raw PTX and the language's built-ins arrive as their
asm statement, named by the opcode it issues. Asynchronous copies and wgmma MMAs complete when
issued.
"""
from __future__ import annotations

import contextlib
import struct

import numpy as np

from ..ir import PlanRecord
from ..ptx.instructions import ASYNC_SHARED_FENCE, INSTRUCTIONS
from ..ptx.math import SHUFFLE_PREFIX
from ..ptx.opcodes import parse_bulk_tensor, parse_tcgen05_cp
from . import math
from .memory import AsyncReader, MemoryFault
from .machine import MBarrier, Block, Fault, Pending
from .tma import round_to_bfloat16


def execute(machine, thread, name: str, args: tuple):
    """Carry out instruction global ``name`` for ``thread`` with operand ``args``."""
    run = machine.handlers.get(name)
    if run is None:
        run = machine.handlers[name] = _handler(machine, name)
    return run(machine, thread, args)


def blocks(ir, namespace: dict, name: str) -> bool:
    """Whether instruction global ``name`` may block its thread, so the thread must yield it to
    the scheduler; any other instruction runs as a plain call in the thread's own frame (the
    scheduler would run the thread on after it anyway, so the order is the same)."""
    spec = namespace[name]
    if spec[0] == "record":
        run = RECORD_FAMILIES[ir.sites[spec[1]].family]
    else:
        run = next((run for head, run in RAW if spec[1].comment.startswith(head)), None)
    return getattr(run, "blocks", False)


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
        family = RECORD_FAMILIES[site.family]
        roles = [role for role, _ in record.operands]
        if site.family in REGISTER_FAMILIES:
            return lambda machine, thread, args: family(machine, thread, record, args)
        return lambda machine, thread, args: family(machine, thread, record,
                                                    dict(zip(roles, map(_plain, args))))
    asm = spec[1]
    opcode = asm.comment
    for head, run in RAW:
        if opcode.startswith(head):
            convert = list if getattr(run, "typed", False) else lambda a: list(map(_plain, a))
            return lambda machine, thread, args: run(machine, thread, opcode, convert(args),
                                                     name)
    raise Fault(f"the interpreter does not know the semantics of {opcode or asm.template!r}")


_NUMPY_INTEGERS = frozenset({np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                             np.uint16, np.uint32, np.uint64})


def _plain(value):
    """A NumPy integer as a Python int (addresses and counts do arithmetic without wrapping)."""
    return int(value) if type(value) in _NUMPY_INTEGERS else value


# ---------------------------------------------------------------------------------- mbarriers
def _barrier(cta, address: int) -> MBarrier:
    barrier = cta.mbarriers.get(address)
    if barrier is None:
        raise Fault(f"no mbarrier was initialised at shared {address:#x} of CTA {cta.index}")
    return barrier


def arrive(machine, cta, address: int, count: int = 1) -> None:
    barrier = _barrier(cta, address)
    barrier.pending -= count
    _maybe_complete(cta, address, barrier)


def complete_tx(machine, cta, address: int, nbytes: int) -> None:
    barrier = _barrier(cta, address)
    barrier.tx -= nbytes
    _maybe_complete(cta, address, barrier)


def _maybe_complete(cta, address: int, barrier: MBarrier) -> None:
    if barrier.pending < 0:
        raise Fault(f"mbarrier at shared {address:#x} received more arrivals than its count "
                    f"({barrier.count}) in phase {barrier.phase}")
    if barrier.pending == 0 and barrier.tx == 0:
        barrier.phase += 1
        cta.syncs += 1
        barrier.pending = barrier.count
        cta.pending = [p for p in cta.pending if p.barrier != address]


def _mbarrier_init(machine, thread, opcode, values, name):
    address, count = values
    if address % 8:
        raise Fault(f"mbarrier at shared {address:#x} is not 8-byte aligned")
    thread.cta.smem.check(address, 8)
    if not 1 <= count < 2 ** 20:
        raise Fault(f"mbarrier.init count {count} is outside 1..2^20-1")
    thread.cta.mbarriers[address] = MBarrier(count, count)


def _mbarrier_arrive(machine, thread, opcode, values, name):
    address = values[0]
    if ".expect_tx" in opcode:
        _barrier(thread.cta, address).tx += values[1]
    arrive(machine, thread.cta, address)


def _mbarrier_expect_tx(machine, thread, opcode, values, name):
    address, count = values
    barrier = _barrier(thread.cta, address)
    barrier.tx += count
    _maybe_complete(thread.cta, address, barrier)


@_blocking
def _mbarrier_wait(machine, thread, opcode, values, name):
    """``try_wait`` returns once the phase completed (it may wait as long as it likes)."""
    address, parity = values
    barrier = _barrier(thread.cta, address)
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
        return Block(("warp", key,
                      lambda per_lane, threads: run(machine, opcode, per_lane, threads), values))
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
    thread.cta.smem.generic_write(address, nbytes, thread.linear, thread.gen.gi_frame.f_lineno,
                                  thread.cta.syncs)


@contextlib.contextmanager
def _async_read(machine, thread, what: str):
    """While the block runs, every shared access of ``thread``'s CTA is an async-proxy read of
    ``what``, which must not see an unfenced generic write."""
    cta = thread.cta

    def describe(writer: int, line: int) -> str:
        t = cta.threads[writer]
        return f"thread {t.index} (warp {t.warp}, lane {t.lane}) at {machine.where(line)}"

    def name(address: int) -> str:
        buffers = (spec[1] for spec in machine.namespace.values() if spec[0] == "smem")
        for buffer in buffers:
            if buffer.offset <= address < buffer.offset + buffer.nbytes:
                return f"byte {address - buffer.offset} of {buffer.name!r} (shared {address:#x})"
        return f"shared {address:#x}"

    cta.smem.reader = AsyncReader(what, describe, name)
    try:
        yield
    finally:
        cta.smem.reader = None


def _policy(machine, thread, opcode, values, name):
    return 0  # an opaque 64-bit cache policy: caches are not modelled


def _cluster_rank(machine, thread, opcode, values, name):
    return thread.cta.cluster_rank


@_blocking
def _cluster_barrier(machine, thread, opcode, values, name):
    if ".wait" in opcode or opcode == "T.cuda.cluster_sync":
        return Block(("cluster",))
    return None  # arrive: the wait that follows blocks until everyone arrived


# ------------------------------------------------------------------------------ tcgen05
def _tmem(cta):
    if cta.tmem is None:
        from .tmem import TensorMemory

        cta.tmem = TensorMemory()
    return cta.tmem


def _tcgen05_alloc(machine, opcode, per_lane, threads):
    address, ncols = per_lane[0]
    cta = threads[0].cta
    taddr = _tmem(cta).alloc(ncols)
    cta.tmem_sites[taddr] = threads[0].line(machine.where)  # named if it leaks (machine.py)
    cta.smem.write(address, np.array([taddr], dtype=np.uint32))
    return [None] * len(threads)


def _tcgen05_dealloc(machine, opcode, per_lane, threads):
    taddr, ncols = per_lane[0]
    _tmem(threads[0].cta).dealloc(taddr, ncols)
    return [None] * len(threads)


def _tcgen05_relinquish(machine, opcode, per_lane, threads):
    _tmem(threads[0].cta).relinquish()
    return [None] * len(threads)


def _tcgen05_ld(machine, opcode, per_lane, threads):
    shape, num, pack = _ldst_form(opcode)
    tmem = _tmem(threads[0].cta)
    out = [None] * len(threads)
    for taddr, members in _by_address(per_lane).items():
        loaded = tmem.load_warp(shape, num, pack, taddr, threads[0].warp,
                                [threads[i].lane for i in members])
        for i, regs in zip(members, loaded):
            out[i] = regs[0] if len(regs) == 1 else tuple(regs)
    return out


def _tcgen05_st(machine, opcode, per_lane, threads):
    shape, num, pack = _ldst_form(opcode)
    tmem = _tmem(threads[0].cta)
    for taddr, members in _by_address(per_lane).items():
        tmem.store_warp(shape, num, pack, taddr, threads[0].warp,
                        [threads[i].lane for i in members],
                        [list(per_lane[i][1:]) for i in members])
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


def _tcgen05_cp(machine, thread, record: PlanRecord, ops: dict):
    op = parse_tcgen05_cp(record.opcode)
    with _async_read(machine, thread, record.opcode):
        _tmem(thread.cta).copy_from_shared(op, ops["taddr"], ops["descriptor"], thread.cta.smem)


# --------------------------------------------------------------------------------- copies
def _destinations(machine, thread, ops: dict) -> list:
    if "cta_mask" in ops:
        mask = ops["cta_mask"]
        return [machine.cta_of_rank(r) for r in range(16) if mask >> r & 1]
    return [thread.cta]


def _tma(machine, thread, record: PlanRecord, ops: dict):
    from .tma import PACKED, tma_load, tma_store

    op = parse_bulk_tensor(record.opcode)
    count = op.rank if op.mode != "tile::gather4" and op.mode != "tile::scatter4" else 5
    coords = tuple(ops[f"coord{i}"] for i in range(count))
    rows = None
    if op.mode in ("tile::gather4", "tile::scatter4"):
        coords, rows = coords[:1], coords[1:]
    fields = ops["tensormap"]
    footprint = record.bytes * (2 if fields.data_type in PACKED else 1)
    if op.kind != "load":
        with _async_read(machine, thread, record.opcode):
            thread.cta.smem.check(ops["shared"], footprint)
        tma_store(fields, op, coords, rows, machine.memory, thread.cta.smem, ops["shared"])
        return None
    for cta in _destinations(machine, thread, ops):
        write = (lambda cta=cta: tma_load(fields, op, coords, rows, machine.memory, cta.smem,
                                          ops["shared"]))
        _issue_load(machine, thread, cta, ops["shared"], footprint, ops["barrier"], record, write)
    return None


def _issue_load(machine, thread, cta, address: int, footprint: int, barrier: int, record,
                write) -> None:
    """An asynchronous load into ``cta``'s shared memory: its bytes are unreadable until the
    barrier phase completes; it lands (``write()`` -> bytes) and completes its transaction
    bytes only when no thread can move without it (as late as the GPU may)."""
    phase = _barrier(cta, barrier).phase
    line = thread.line(machine.where)
    cta.pending.append(Pending(address, address + footprint, barrier, phase,
                               f"{record.opcode} at {line}"))

    def land() -> None:
        nbytes = write()
        cta.smem.async_write(address, footprint)
        complete_tx(machine, cta, barrier, nbytes)

    machine.inflight.append(land)


def _bulk(machine, thread, record: PlanRecord, ops: dict):
    size = ops["size"]
    words = record.opcode.split(".")
    if words[:4] == ["cp", "async", "bulk", "prefetch"]:
        machine.memory.read(ops["global"], size)  # faults like the GPU on a bad address
        return None
    _check_granule(ops["global"], "global")
    _check_granule(ops["shared"], "shared")
    if words[3] == "global" or words[1] == "reduce":
        with _async_read(machine, thread, record.opcode):
            data = thread.cta.smem.read(ops["shared"], size).copy()
        if words[1] == "reduce":
            from .tma import reduce_values

            redop, type_ = record.fields["reduction"].rsplit(".", 1)
            old = machine.memory.read(ops["global"], size).copy()
            data = reduce_values(redop.split(".")[0], type_, old, data)
        machine.memory.write(ops["global"], data)
        return None
    data = machine.memory.read(ops["global"], size).copy()

    def write(cta) -> int:
        cta.smem.write(ops["shared"], data)
        return size

    for cta in _destinations(machine, thread, ops):
        cta.smem.check(ops["shared"], size)
        _issue_load(machine, thread, cta, ops["shared"], size, ops["barrier"], record,
                    lambda cta=cta: write(cta))
    return None


def _check_granule(address: int, what: str) -> None:
    if address % 16:
        raise Fault(f"bulk copy {what} address {address:#x} is not 16-byte aligned")


@_blocking
def _wgmma(machine, thread, record: PlanRecord, values: tuple):
    from .wgmma import wgmma

    kind, key, run, operands = wgmma(machine, thread, record, values).reason

    def product(per_lane, threads):  # the warp's product reads A and B through the async proxy
        with _async_read(machine, threads[0], record.opcode):
            try:
                return run(per_lane, threads)
            except MemoryFault as exc:
                raise machine.error(threads[0], str(exc)) from None

    return Block((kind, key, product, operands))


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
        raise Fault(f"{opcode} barrier {barrier} with {count} threads: ids are 0..15 and the "
                    f"count a positive multiple of 32")
    return Block(("named", barrier, count, opcode.startswith("bar.sync")))


def _stmatrix(machine, opcode, per_lane, threads):
    """``stmatrix.m8n8.xN{.trans}.shared.b16``: lanes 8i..8i+7 address the rows of matrix i;
    each lane's register i holds two b16 of row lane // 4, columns 2 (lane % 4) and the next.
    The warp's rows move as one array; rows that overlap are written in order (last wins)."""
    count = int(next(w for w in opcode.split(".") if w[0] == "x" and w[1:].isdigit())[1:])
    by_lane = {t.lane: values for values, t in zip(per_lane, threads)}
    words = np.zeros((32, count), dtype=np.uint32)
    for lane, values in by_lane.items():
        words[lane] = [int(v) & 0xFFFFFFFF for v in values[1:1 + count]]
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
            smem.data[address:address + 16] = row
    lanes = {t.lane: t for t in threads}
    for lane, address in enumerate(addresses):  # row i of the warp's matrices: lane i's address
        _generic_write(lanes[lane], address, 16)
    return [None] * len(threads)


# Families whose operands are registers: they get the values as the kernel holds them, a tuple
# in the record's role order (float32 scalars stay float32); the others a dict role -> value
# with Python integers for addresses and counts.
REGISTER_FAMILIES = frozenset({"wgmma.mma_async"})
RECORD_FAMILIES = {"cp.async.bulk.tensor": _tma, "cp.async.bulk": _bulk, "tcgen05.cp": _tcgen05_cp,
                   "wgmma.mma_async": _wgmma}

# Raw PTX and built-ins by opcode prefix (longest first where prefixes overlap).
RAW = [
    ("mbarrier.init", _mbarrier_init),
    ("mbarrier.inval", _mbarrier_inval),
    ("mbarrier.arrive", _mbarrier_arrive),
    ("mbarrier.expect_tx", _mbarrier_expect_tx),
    ("mbarrier.try_wait", _mbarrier_wait),
    ("T.cuda.mbarrier_wait", _mbarrier_wait),
    ("T.cuda.cluster_ctarank", _cluster_rank),
    ("T.cuda.cluster_sync", _cluster_barrier),
    ("barrier.cluster", _cluster_barrier),
    ("fence.proxy.async", _proxy_fence),
    ("fence.", _nothing),
    ("prefetch.tensormap", _nothing),
    ("cp.async.bulk.commit_group", _nothing),
    ("cp.async.bulk.wait_group", _nothing),
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
    ("wgmma.fence", _nothing),  # an MMA completes at issue: nothing to order or wait for
    ("wgmma.commit_group", _nothing),
    ("wgmma.wait_group", _nothing),
    ("setmaxnreg.", _nothing),  # registers are not a resource here
    ("cvt.rn.", _cvt_packed),
    ("st.shared.", _st_shared),
    ("stmatrix.", _warp_collective(_stmatrix)),
    ("bar.sync", _named_barrier),
    ("bar.arrive", _named_barrier),
]
