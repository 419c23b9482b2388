"""The machine the interpreter runs a launch on: clusters of CTAs of threads, each thread a
generator stepping the lowered kernel, scheduled until it blocks.

Threads block on what blocks them on the GPU: a CTA barrier (``cta_sync``), an mbarrier phase
(``T.cuda.mbarrier_wait`` and ``mbarrier.try_wait``, which here waits until the phase completes),
a cluster barrier, or a warp-collective ``.sync.aligned`` instruction, which runs once every live
lane of the warp has reached the same instruction and is an error when only part of the warp
does. When no thread can move, the launch has deadlocked: :class:`InterpreterError` lists every
waiting thread and what it waits on (an mbarrier's pending arrivals and transaction bytes).
Asynchronous copies complete when they are issued; reading their shared destination before the
barrier phase they complete on has completed is reported as a race.
"""

from __future__ import annotations

import itertools
import types
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from ..errors import InterpreterError, Location
from .memory import GlobalMemory, MemoryFault, SharedMemory


class Fault(Exception):
    """An instruction the GPU would trap or hang on; the scheduler adds the thread and line."""


def _faults() -> tuple:
    """Every exception the memory and instruction models raise for what the GPU faults on."""
    from .tma import TmaFault
    from .tmem import TmemFault

    return (Fault, MemoryFault, TmaFault, TmemFault)


@dataclass
class MBarrier:
    """An mbarrier object: expected arrivals per phase, arrivals and transaction bytes still
    pending in the current phase, and the number of completed phases."""

    count: int
    pending: int
    tx: int = 0
    phase: int = 0

    def completed(self, parity: int) -> bool:
        """Whether the phase of ``parity`` has completed (``try_wait.parity`` semantics)."""
        return (self.phase & 1) != (parity & 1)

    def describe(self) -> str:
        return (
            f"phase {self.phase}, {self.pending} of {self.count} arrivals and {self.tx} "
            f"transaction bytes pending"
        )


@dataclass
class Pending:
    """Shared bytes an asynchronous copy wrote, not to be read before the phase completes."""

    start: int
    end: int
    barrier: int
    phase: int
    where: str


@dataclass
class CTA:
    index: tuple
    linear: int
    cluster_rank: int
    smem: SharedMemory
    mbarriers: dict = field(default_factory=dict)
    pending: list = field(default_factory=list)
    tmem: object = None
    tmem_sites: dict = field(default_factory=dict)  # TMEM column -> where tcgen05.alloc got it
    threads: list = field(default_factory=list)
    warps: list = field(default_factory=list)  # the threads of each warp, by warp index
    sync_waiting: set = field(default_factory=set)
    named: dict = field(default_factory=dict)  # named barrier id -> [waiting threads, arrivals]
    syncs: int = 0  # synchronizations completed: barriers released, mbarrier phases
    running: object = None  # the thread executing now (the one a plain shared store is by)


@dataclass(eq=False)
class Thread:
    cta: CTA
    index: tuple
    linear: int
    gen: object = None
    waiting: tuple | None = None  # what blocks it
    send: object = None
    done: bool = False
    # (address, value, instruction) of its last atomic, if that atomic wrote nothing
    polled: tuple | None = None

    @property
    def warp(self) -> int:
        return self.linear // 32

    @property
    def lane(self) -> int:
        return self.linear % 32

    def instruction(self) -> int:
        """Where the thread is suspended, as the bytecode offset of its frame: the lanes of a
        warp at the same offset are at the same instruction (cheap, unlike a line number, which
        decodes the line table of the whole lowered kernel)."""
        frame = getattr(self.gen, "gi_frame", None)
        return -1 if frame is None else frame.f_lasti

    def line(self, where) -> Location | None:
        """Where the thread is in the kernel's source (``where`` maps a line of the lowered
        code to it)."""
        frame = getattr(self.gen, "gi_frame", None)
        return None if frame is None else where(frame.f_lineno)


class Machine:
    """One launch: global memory, the grid's clusters, and the instruction executor."""

    def __init__(
        self,
        grid: tuple,
        block: tuple,
        cluster: tuple | None,
        shared_bytes: int,
        memory: GlobalMemory,
        code,
        make_globals,
        args: list,
        execute,
        positions: dict | None = None,
    ):
        self.grid, self.block = grid, block
        self.cluster = cluster or (1, 1, 1)
        self.shared_bytes = shared_bytes
        self.memory = memory
        self.code = code
        self.make_globals = make_globals
        self.args = args
        self.execute = execute  # execute(machine, thread, name, args) -> value | Block
        self.positions = positions or {}  # line of the lowered code -> its origin in the source
        self.handlers: dict = {}  # instruction global -> its resolved semantics (instructions.py)

    def where(self, lineno: int) -> Location:
        """The kernel's source position of line ``lineno`` of the lowered code."""
        origin = self.positions.get(lineno)
        return origin.location if origin is not None else Location(self.code.co_filename, lineno, 0)

    # ---------------------------------------------------------------------------------- run
    def run(self) -> None:
        for cluster in self._clusters():
            self._run_cluster(cluster)

    def _clusters(self):
        cx, cy, cz = self.cluster
        gx, gy, gz = self.grid
        for z0, y0, x0 in itertools.product(range(0, gz, cz), range(0, gy, cy), range(0, gx, cx)):
            ctas = []
            for dz, dy, dx in itertools.product(range(cz), range(cy), range(cx)):
                index = (x0 + dx, y0 + dy, z0 + dz)
                linear = index[0] + index[1] * gx + index[2] * gx * gy
                rank = dx + dy * cx + dz * cx * cy
                ctas.append(CTA(index, linear, rank, SharedMemory(self.shared_bytes, index)))
            yield ctas

    def _run_cluster(self, ctas: list) -> None:
        self.ctas = ctas
        self.poll_rounds = 0
        self.cluster_waiting: set = set()
        self.inflight: list = []
        bx, by, bz = self.block
        threads = []
        for cta in ctas:
            for tz, ty, tx in itertools.product(range(bz), range(by), range(bx)):
                linear = tx + ty * bx + tz * bx * by
                thread = Thread(cta, (tx, ty, tz), linear)
                thread.gen = self._start(thread)
                cta.threads.append(thread)
                threads.append(thread)
            cta.warps = [cta.threads[w : w + 32] for w in range(0, len(cta.threads), 32)]
        self.threads = threads
        while True:
            moved = False
            for thread in threads:
                if not thread.done and (thread.waiting is None or self._released(thread)):
                    self._step(thread)
                    moved = True
            if all(t.done for t in threads) and not self.inflight:
                self._check_exit(ctas)
                return
            if not moved and not self._land() and not self._release_collectives():
                if not self._resume_pollers():
                    raise self._deadlock()

    POLL_ROUNDS = 1000  # times the pollers resume with no element changing before a deadlock

    def _resume_pollers(self) -> bool:
        """No thread can move: resume the threads polling an element with the value they read,
        unless that has happened POLL_ROUNDS times since an element last changed; False if
        there is none to resume."""
        pollers = [t for t in self.threads if t.waiting is not None and t.waiting[0] == "spin"]
        if not pollers or self.poll_rounds >= self.POLL_ROUNDS:
            return False
        self.poll_rounds += 1
        for t in pollers:
            t.send, t.waiting = t.waiting[5], None
        return True

    def _land(self) -> bool:
        """Complete the asynchronous copies in flight; False if there were none."""
        landed, self.inflight = self.inflight, []
        for complete in landed:
            try:
                complete()
            except _faults() as exc:
                raise InterpreterError(f"an asynchronous copy faulted: {exc}") from None
        return bool(landed)

    def _start(self, thread: Thread):
        function = types.FunctionType(self.code, self.make_globals(self, thread))
        return function(*self.args)  # a generator: the thread's program (program.py)

    def _step(self, thread: Thread) -> None:
        """Run ``thread`` until it blocks or ends."""
        value, thread.send, thread.waiting = thread.send, None, None
        thread.cta.running = thread
        while True:
            try:
                request = thread.gen.send(value)
            except StopIteration:
                thread.done = True
                self._release_barriers(thread.cta)
                return
            except (*_faults(), IndexError, ZeroDivisionError, OverflowError) as exc:
                raise self.error(thread, str(exc), self._raising_line(exc)) from None
            if request is None:
                value = None
                continue
            name, args = request
            try:
                result = self.execute(self, thread, name, args)
            except _faults() as exc:
                raise self.error(thread, str(exc)) from None
            if isinstance(result, Block) and result.reason[0] == "named":
                if self._named_barrier(thread, *result.reason[1:]):
                    return
                value = None
                continue
            if isinstance(result, Block):
                thread.waiting = result.reason
                if result.reason[0] == "sync":
                    thread.cta.sync_waiting.add(thread)
                    self._release_barriers(thread.cta)
                elif result.reason[0] == "cluster":
                    self.cluster_waiting.add(thread)
                    self._release_cluster()
                return
            value = result

    # ------------------------------------------------------------------------------ waiting
    def _released(self, thread: Thread) -> bool:
        kind = thread.waiting[0]
        if kind == "spin":  # polling an element: released once another thread changed it
            _, address, size, value, again, _ = thread.waiting
            bits = np.uint32 if size == 4 else np.uint64
            if int(self.memory.read(address, size).view(bits)[0]) == value:
                return False
            self.poll_rounds = 0  # it changed: progress
            result = again()
            if isinstance(result, Block):
                thread.waiting = result.reason
                return False
            thread.send = result
            return True
        if kind == "mbarrier":
            _, cta, address, parity, result = thread.waiting
            barrier = cta.mbarriers.get(address)
            if barrier is not None and barrier.completed(parity):
                thread.send = result
                return True
        return False

    @staticmethod
    def _named_barrier(thread: Thread, barrier: int, count: int, waits: bool) -> bool:
        """``bar.sync`` / ``bar.arrive`` on named barrier ``barrier`` of ``count`` threads:
        whether ``thread`` now waits (the count's last arrival releases everyone)."""
        waiting, arrived = thread.cta.named.get(barrier, ([], 0))
        if waits:
            waiting = waiting + [thread]
        arrived += 1
        if arrived < count:
            thread.cta.named[barrier] = (waiting, arrived)
            if waits:
                thread.waiting = ("named", barrier, count)
            return waits
        thread.cta.named.pop(barrier, None)
        thread.cta.syncs += 1
        for t in waiting:
            t.waiting = None
        return False

    def _release_barriers(self, cta: CTA) -> None:
        if cta.sync_waiting and len(cta.sync_waiting) == sum(not t.done for t in cta.threads):
            for t in cta.sync_waiting:
                t.waiting = None
            cta.sync_waiting = set()
            cta.syncs += 1
        self._release_cluster()

    def _release_cluster(self) -> None:
        if self.cluster_waiting and len(self.cluster_waiting) == sum(
            not t.done for t in self.threads
        ):
            for t in self.cluster_waiting:
                t.waiting = None
            self.cluster_waiting = set()
            for cta in self.ctas:
                cta.syncs += 1

    def _release_collectives(self) -> bool:
        """Run the warp-collective instructions all their lanes have reached (called when no
        thread can move); a collective some of its lanes will never reach is an error. False if
        none ran."""
        released = False
        for cta in self.ctas:
            for warp, lanes in enumerate(cta.warps):
                waiting = [t for t in lanes if t.waiting and t.waiting[0] == "warp"]
                if not waiting:
                    continue
                key, _, values = waiting[0].waiting[1:4]
                mask = key[2] if len(key) > 2 else None
                required = [t for t in lanes if mask is None or mask >> t.lane & 1]
                missing = [t for t in required if t not in waiting or t.waiting[1] != key]
                if missing:
                    raise self._partial_warp(warp, key, waiting, missing)
                results = waiting[0].waiting[2]([t.waiting[3] for t in required], required)
                for t, result in zip(required, results):
                    t.waiting, t.send = None, result
                released = True
        return released

    def _partial_warp(self, warp: int, key: tuple, waiting: list, missing: list):
        def where(t: Thread) -> str:
            if t.done:
                return "exited"
            if t.waiting and t.waiting[0] == "warp":
                return f"at {t.waiting[1][0]} on line {t.line(self.where).lineno}"
            return f"at line {t.line(self.where).lineno}"

        reached = _threads([t.lane for t in waiting if t.waiting[1] == key])
        others = "; ".join(f"lane {t.lane} {where(t)}" for t in missing[:8])
        line = waiting[0].line(self.where).lineno
        return self.error(
            waiting[0],
            f"warp-collective {key[0]} (line {line}) was reached by "
            f"{reached.replace('thread', 'lane')} of warp {warp} only: "
            f"{others}; every lane must execute it together",
        )

    # ------------------------------------------------------------------------------- errors
    def _check_exit(self, ctas: list) -> None:
        """A CTA that exits holding tensor memory leaks it (the PTX ISA: all TMEM a kernel
        allocated must be deallocated before it exits): an error at the leaked allocation's
        line, naming each live allocation with the line that made it."""
        from .tmem import TmemFault

        for cta in ctas:
            if cta.tmem is None:
                continue
            try:
                cta.tmem.check_exit()
            except TmemFault as exc:
                live = sorted(cta.tmem.allocations.items())
                sites = [cta.tmem_sites.get(start) for start, _ in live]
                made = "; ".join(
                    f"columns {start}..{start + n - 1} allocated at {site}"
                    for (start, n), site in zip(live, sites)
                )
                raise InterpreterError(f"CTA {cta.index}: {exc} ({made})", sites[0]) from None

    def _raising_line(self, exc: BaseException) -> Location | None:
        tb = exc.__traceback__
        line = None
        while tb is not None:
            if tb.tb_frame.f_code is self.code:
                line = self.where(tb.tb_lineno)
            tb = tb.tb_next
        return line

    def error(self, thread: Thread, message: str, location: Location | None = None):
        location = location or thread.line(self.where)
        return InterpreterError(
            f"CTA {thread.cta.index} thread {thread.index} (warp "
            f"{thread.warp}, lane {thread.lane}): {message}",
            location,
        )

    def _deadlock(self) -> InterpreterError:
        groups: dict[tuple, list] = {}
        for t in self.threads:
            if not t.done and t.waiting is not None:
                key = (t.cta.index, str(t.line(self.where)), self._describe_wait(t))
                groups.setdefault(key, []).append(t.linear)
        lines = [
            f"  CTA {cta} {_threads(linear)} at {line}: {what}"
            for (cta, line, what), linear in groups.items()
        ]
        partial = [t for t in self.threads if t.waiting and t.waiting[0] == "warp"]
        head = "deadlock: no thread can make progress" + (
            " (a warp-collective instruction was reached by part of a warp)" if partial else ""
        )
        shown = lines[:16] + ([f"  ... and {len(lines) - 16} more"] if len(lines) > 16 else [])
        first = next(t for t in self.threads if t.waiting)
        return InterpreterError(head + ":\n" + "\n".join(shown), first.line(self.where))

    def _describe_wait(self, t: Thread) -> str:
        kind = t.waiting[0]
        if kind == "mbarrier":
            _, cta, address, parity, _ = t.waiting
            barrier = cta.mbarriers.get(address)
            state = barrier.describe() if barrier else "never initialised"
            return f"waits on the mbarrier at shared {address:#x} for parity {parity} ({state})"
        if kind == "sync":
            return "waits at T.cuda.cta_sync() for threads that never arrive"
        if kind == "cluster":
            return "waits at a cluster barrier for threads that never arrive"
        if kind == "spin":
            _, address, _, value, _, _ = t.waiting
            return (
                f"polls global memory at {address:#x} with an atomic that reads {value} again "
                f"and again, which no other thread changes (the interpreter runs one cluster at "
                f"a time: a value a later cluster would write never arrives)"
            )
        if kind == "named":
            _, barrier, count = t.waiting
            arrived = t.cta.named.get(barrier, ([], 0))[1]
            return (
                f"waits at named barrier {barrier} for {count} threads, of which {arrived} arrived"
            )
        return f"waits at warp-collective {t.waiting[1][0]} for the rest of its warp"

    # ----------------------------------------------------------------------- the cluster
    def cta_of_rank(self, rank: int) -> CTA:
        for cta in self.ctas:
            if cta.cluster_rank == rank:
                return cta
        raise Fault(f"cluster has no CTA of rank {rank}")

    @staticmethod
    def specials(thread: Thread, grid: tuple, block: tuple) -> SimpleNamespace:
        xyz = lambda v: SimpleNamespace(x=v[0], y=v[1], z=v[2])  # noqa: E731
        return SimpleNamespace(
            threadIdx=xyz(thread.index),
            blockIdx=xyz(thread.cta.index),
            blockDim=xyz(block),
            gridDim=xyz(grid),
            laneid=thread.lane,
        )


def _threads(linear: list) -> str:
    """``threads 0-31`` / ``thread 5`` / ``threads 0-3, 8``: linear thread indices as ranges."""
    runs, start = [], linear[0]
    for previous, current in zip(linear, linear[1:] + [None]):
        if current != previous + 1:
            runs.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = current
    return ("threads " if len(linear) > 1 else "thread ") + ", ".join(runs)


@dataclass(frozen=True)
class Block:
    """An instruction's answer that blocks its thread: ``reason`` says until what."""

    reason: tuple
