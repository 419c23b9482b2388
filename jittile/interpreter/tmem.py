"""Blackwell tensor memory (TMEM) and the tcgen05 instructions that touch it, as a NumPy model.

One CTA's TMEM is 128 lanes x 512 columns of 32-bit cells (PTX ISA 9.7.16.1). A TMEM address is
``(lane << 16) | column``. The model holds the cells and the allocation state and executes
``tcgen05.alloc/dealloc/relinquish_alloc_permit``, ``tcgen05.cp`` (shared memory -> TMEM, with
the source read by decoding the 64-bit shared-memory descriptor bit by bit) and ``tcgen05.ld/st``
(a warp's threads that pass the same address moved as one array).

The descriptor decoder and the address walk are written from the PTX ISA tables, not from
jittile's encoder (``jittile.patterns.descriptors``), because the interpreter exists to check that
encoder. Every rule a kernel can break raises :class:`TmemFault` (or, for a shared-memory read
outside the CTA's bytes, :class:`~jittile.interpreter.memory.MemoryFault`) naming the values, and
nothing is written when an instruction faults.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..patterns.tmem_copy_opcodes import Tcgen05CpOpcode
from .memory import MemoryFault, SharedMemory

LANES = 128
COLUMNS = 512
ALLOC_UNIT = 32  # columns; allocations are powers of two in [32, 512]
WARP_LANES = 32  # the lanes one warp of a warpgroup may access with tcgen05.ld/st
CORE_ROW_BYTES = 16  # a core matrix is 8 rows of 16 bytes
CORE_ROWS = 8


class TmemFault(Exception):
    """A tcgen05 instruction broke a tensor-memory rule (allocation, address range, descriptor)."""


def split_taddr(taddr: int) -> tuple[int, int]:
    """``(lane, column)`` of a 32-bit TMEM address: lane in bits 31-16, column in bits 15-0."""
    taddr = int(taddr)
    if not 0 <= taddr < 1 << 32:
        raise TmemFault(f"TMEM address {taddr:#x} is not a 32-bit value")
    return taddr >> 16, taddr & 0xFFFF


# ------------------------------------------------------------------- shared-memory descriptor
# PTX ISA 9.7.16.4.1, Table 40 (tcgen05 shared memory descriptor), bit fields:
#   0-13 start address, 16-29 leading dimension byte offset (or absolute address), 32-45 stride
#   dimension byte offset, each matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4; 46-48 fixed
#   0b001; 49-51 matrix base offset; 52 leading dimension stride mode (0 relative, 1 absolute);
#   53-60 fixed 0; 61-63 swizzling mode. Bits 14-15 and 30-31 are not fields of the table.
_SWIZZLE_NAMES = {0: "none", 1: "128B_atom32B", 2: "128B", 4: "64B", 6: "32B"}
# K-major row pitch inside an 8-row core-matrix group and the number of XOR bits (address bits
# [7, 7+n) into [4, 4+n): CuTe Swizzle<n, 4, 3>, the "Swizzling" column of 9.7.16.3.3).
_SWIZZLE_WALK = {0: (CORE_ROW_BYTES, 0), 2: (128, 3), 4: (64, 2), 6: (32, 1)}
_VERSION = 0b001
_RESERVED_MASK = (0b11 << 14) | (0b11 << 30)


def _field(value: int, low: int, width: int) -> int:
    """Bits ``low .. low+width-1`` of ``value``, as Table 40 numbers them."""
    return (value >> low) & ((1 << width) - 1)


def decode_smem_descriptor(desc: int) -> dict:
    """The fields of a tcgen05 (sm_100) shared-memory descriptor, byte quantities in bytes.

    Keys: ``start_address``, ``leading_byte_offset``, ``stride_byte_offset`` (each the 14-bit field
    shifted left by 4), ``version`` (bits 46-48, fixed 0b001), ``base_offset`` (bits 49-51),
    ``lbo_mode`` (bit 52), ``fixed_zero`` (bits 53-60, fixed 0), ``swizzle`` (bits 61-63, the raw
    code), ``swizzle_mode`` (its name: none, 128B_atom32B, 128B, 64B, 32B, or invalid for 3, 5, 7)
    and ``reserved`` (the value of bits 14-15 and 30-31, which no field owns). Decoding never
    judges; :meth:`TensorMemory.copy_from_shared` checks the fields it relies on.
    """
    desc = int(desc)
    if not 0 <= desc < 1 << 64:
        raise TmemFault(f"shared-memory descriptor {desc:#x} is not a 64-bit value")
    swizzle = _field(desc, 61, 3)
    return {
        "start_address": _field(desc, 0, 14) << 4,
        "leading_byte_offset": _field(desc, 16, 14) << 4,
        "stride_byte_offset": _field(desc, 32, 14) << 4,
        "version": _field(desc, 46, 3),
        "base_offset": _field(desc, 49, 3),
        "lbo_mode": _field(desc, 52, 1),
        "fixed_zero": _field(desc, 53, 8),
        "swizzle": swizzle,
        "swizzle_mode": _SWIZZLE_NAMES.get(swizzle, "invalid"),
        "reserved": desc & _RESERVED_MASK,
    }


def _check_copy_descriptor(desc: int, fields: dict) -> None:
    """Raise the first descriptor rule a tcgen05.cp source on sm_100 breaks."""
    where = f"shared-memory descriptor {desc:#018x}"
    if fields["version"] != _VERSION:
        raise TmemFault(
            f"{where}: bits 46-48 hold {fields['version']:#05b}; tcgen05 descriptors "
            f"carry the fixed constant 0b001 there"
        )
    if fields["fixed_zero"]:
        raise TmemFault(
            f"{where}: bits 53-60 hold {fields['fixed_zero']:#x}; they are the fixed constant 0"
        )
    if fields["reserved"]:
        raise TmemFault(
            f"{where}: bits 14-15/30-31 are set ({fields['reserved']:#x}); no field "
            f"owns them, so a 14-bit field overflowed"
        )
    if fields["swizzle_mode"] == "invalid":
        raise TmemFault(
            f"{where}: swizzle code {fields['swizzle']} in bits 61-63 is invalid "
            f"(3, 5 and 7 are reserved)"
        )
    if fields["swizzle"] == 1:
        raise TmemFault(
            f"{where}: swizzle code 1 (128B with 32B atomicity) has no K-major swizzle "
            f"atom (PTX ISA Table 53), and the copy reads its source K-major"
        )
    if fields["lbo_mode"]:
        raise TmemFault(
            f"{where}: bit 52 selects the absolute leading-dimension address mode, "
            f"which only sm_103a supports"
        )


def _chunk_addresses(fields: dict, rows: int, chunks: int) -> np.ndarray:
    """Physical shared addresses of the 16-byte chunks (rows, chunks) of a K-major source.

    PTX ISA 9.7.16.3 canonical K-major layouts, in bytes: without swizzling row ``r`` chunk ``c``
    is at ``start + (r // 8) * SBO + (r % 8) * 16 + c * LBO``; with a swizzle of row pitch ``P``
    (32/64/128 B) the linear address is ``start + (r // 8) * SBO + (r % 8) * P + c * 16`` (LBO is
    "assumed 1", i.e. unused) and the hardware XORs the chunk bits [4, 4+n) with the pattern row
    bits [7, 7+n). The pattern row counts from the repeating pattern's start, which the base
    offset (Table 41: ``(pattern start >> 7) & 7``) moves off the 256/512/1024-byte boundary.
    """
    r = np.arange(rows, dtype=np.int64)[:, None]
    c = np.arange(chunks, dtype=np.int64)[None, :]
    pitch, bits = _SWIZZLE_WALK[fields["swizzle"]]
    group = fields["start_address"] + (r // CORE_ROWS) * fields["stride_byte_offset"]
    if not bits:
        return group + (r % CORE_ROWS) * pitch + c * fields["leading_byte_offset"]
    linear = group + (r % CORE_ROWS) * pitch + c * CORE_ROW_BYTES
    phase = ((linear >> 7) - fields["base_offset"]) & ((1 << bits) - 1)
    return linear ^ (phase << 4)


def _decompress(chunks: np.ndarray, src_fmt: str) -> np.ndarray:
    """Expand (..., 16) uint8 source chunks to (..., 16) bytes of 8-bit holders (PTX 9.7.16.9.1).

    ``b4x16_p64``: sixteen 4-bit values (value ``2i`` in the low nibble of byte ``i``) then 8 bytes
    of padding; each lands in payload bits [5:2] of its byte (``00xxxx00``). ``b6x16_p32``: sixteen
    6-bit values packed little-endian (value ``i`` at bits ``6i..6i+5`` of the 12 bytes) then 4
    bytes of padding; each lands in payload bits [6:1] of its byte (``0xxxxxx0``).
    """
    lead = chunks.shape[:-1]
    if src_fmt == "b4x16_p64":
        packed = chunks[..., :8]
        nibbles = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(*lead, 16)
        return (nibbles << 2).astype(np.uint8)
    if src_fmt == "b6x16_p32":
        triples = chunks[..., :12].reshape(*lead, 4, 3)
        b0, b1, b2 = triples[..., 0], triples[..., 1], triples[..., 2]
        values = np.stack(
            [b0 & 0x3F, (b0 >> 6) | ((b1 & 0x0F) << 2), (b1 >> 4) | ((b2 & 0x03) << 4), b2 >> 2],
            axis=-1,
        ).reshape(*lead, 16)
        return (values << 1).astype(np.uint8)
    raise ValueError(f"unknown decompression source format {src_fmt!r}")


def _copy_lanes(op: Tcgen05CpOpcode) -> np.ndarray:
    """(rows, replicas) lane offsets from ``taddr``'s lane that each source row is written to.

    128x256b/128x128b: row r -> lane r. 4x256b: one row per 32-lane quarter (r -> 32r).
    64x128b.warpx2::02_13: rows 0-63 -> lanes 0-63, repeated at +64 (warps 0/2 and 1/3 get the
    same half). 64x128b.warpx2::01_23: rows 0-31 -> lanes 0-31, rows 32-63 -> lanes 64-95,
    repeated at +32 (warps 0/1 and 2/3). 32x128b.warpx4: rows -> lanes 0-31, repeated at +32, +64,
    +96 (all four warps).
    """
    rows = np.arange(op.rows)
    if op.shape == "4x256b":
        base = 32 * rows
    elif op.multicast == "warpx2::01_23":
        base = 64 * (rows // 32) + rows % 32
    else:
        base = rows
    replicas = {
        None: (0,),
        "warpx2::02_13": (0, 64),
        "warpx2::01_23": (0, 32),
        "warpx4": (0, 32, 64, 96),
    }[op.multicast]
    return base[:, None] + np.asarray(replicas)[None, :]


# ------------------------------------------------------------------------- tcgen05.ld / st
# shape -> (lanes one warp accesses, registers per .num, largest .num): PTX ISA Table 47.
_LDST_SHAPES = {
    "32x32b": (32, 1, 128),
    "16x64b": (16, 1, 128),
    "16x128b": (16, 2, 64),
    "16x256b": (16, 4, 32),
}


def _fragment(shape: str, num: int, threads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lane offsets, 32-bit word indices), each (threads, registers): where registers r0, r1,
    ... of each lane in ``threads`` live.

    Word ``k`` is column ``k`` from ``taddr`` (with ``.pack::16b``: the low halves of columns 2k
    and 2k+1). The per-shape maps are the PTX ISA fragment figures 183-186 (as CUTLASS's
    SM100_TMEM_LOAD_* traits spell them): 32x32b: lane t, word j. 16x64b: lane 8*(t%2) + t//4,
    word 2j + (t//2)%2. 16x128b: r(2i+h) at lane t//4 + 8h, word 4i + t%4. 16x256b: r(4i+2h+e) at
    lane t//4 + 8h, word 8i + 2*(t%4) + e.
    """
    j = np.arange(_LDST_SHAPES[shape][1] * num)[None, :]
    t = np.asarray(threads, dtype=np.int64)[:, None]
    if shape == "32x32b":
        rows, words = t + 0 * j, j + 0 * t
    elif shape == "16x64b":
        rows, words = 8 * (t % 2) + t // 4 + 0 * j, 2 * j + (t // 2) % 2
    elif shape == "16x128b":
        rows, words = t // 4 + 8 * (j % 2), 4 * (j // 2) + t % 4
    else:
        rows, words = t // 4 + 8 * ((j // 2) % 2), 8 * (j // 4) + 2 * (t % 4) + j % 2
    return rows, words


class TensorMemory:
    """One CTA's tensor memory: ``cells`` (128 lanes x 512 columns, uint32) and its allocations.

    ``tcgen05.cp`` with ``.cta_group::2`` writes the TMEM of both peer CTAs; the caller applies
    :meth:`copy_from_shared` to each CTA's TensorMemory with that CTA's shared memory.
    """

    def __init__(self) -> None:
        self.cells = np.zeros((LANES, COLUMNS), dtype=np.uint32)
        self._allocations: dict[int, int] = {}  # first column -> ncols
        self._allocated = np.zeros(COLUMNS, dtype=bool)
        self._relinquished = False
        self._last_ncols: int | None = None
        self.cta_group: int | None = None  # of the first tcgen05 instruction seen

    @property
    def allocations(self) -> dict[int, int]:
        """Live allocations, first column -> number of columns."""
        return dict(self._allocations)

    def _describe(self) -> str:
        """The live allocations, for fault messages."""
        if not self._allocations:
            return "no columns are allocated"
        spans = ", ".join(
            f"{start}..{start + n - 1}" for start, n in sorted(self._allocations.items())
        )
        return f"allocated columns: {spans}"

    def _use_cta_group(self, cta_group: int, what: str) -> None:
        """All tcgen05 instructions of a kernel name one .cta_group (PTX ISA 9.7.16.7.1)."""
        if cta_group not in (1, 2):
            raise ValueError(f"{what}: cta_group is 1 or 2, got {cta_group!r}")
        if self.cta_group is None:
            self.cta_group = cta_group
        elif cta_group != self.cta_group:
            raise TmemFault(
                f"{what} uses .cta_group::{cta_group}, but an earlier tcgen05 "
                f"instruction used .cta_group::{self.cta_group}; all tcgen05 "
                f"instructions of a kernel must specify the same value"
            )

    # -------------------------------------------------------------------------- allocation
    def alloc(self, ncols: int, cta_group: int = 1) -> int:
        """``tcgen05.alloc``: the TMEM address it writes to shared memory (lane 0, first column).

        Columns come as the lowest free range aligned to ``ncols``; since the sizes of successive
        allocations may not increase (checked), that is also the lowest free range.
        """
        self._use_cta_group(cta_group, "tcgen05.alloc")
        ncols = int(ncols)
        if ncols < ALLOC_UNIT or ncols > COLUMNS or ncols & (ncols - 1):
            raise TmemFault(
                f"tcgen05.alloc of {ncols} columns: nCols must be a power of two in "
                f"[{ALLOC_UNIT}, {COLUMNS}]"
            )
        if self._relinquished:
            raise TmemFault(
                f"tcgen05.alloc of {ncols} columns after "
                f"tcgen05.relinquish_alloc_permit: the CTA gave up the right to "
                f"allocate"
            )
        if self._last_ncols is not None and ncols > self._last_ncols:
            raise TmemFault(
                f"tcgen05.alloc of {ncols} columns after an allocation of "
                f"{self._last_ncols}: the number of columns may not increase between "
                f"two allocations of a CTA"
            )
        for start in range(0, COLUMNS, ncols):
            if not self._allocated[start : start + ncols].any():
                self._allocated[start : start + ncols] = True
                self._allocations[start] = ncols
                self._last_ncols = ncols
                return start
        raise TmemFault(
            f"tcgen05.alloc of {ncols} columns: no free range of {ncols} columns "
            f"({self._describe()} of {COLUMNS}); the hardware would block until "
            f"another warp deallocates"
        )

    def dealloc(self, taddr: int, ncols: int, cta_group: int = 1) -> None:
        """``tcgen05.dealloc``: ``taddr``/``ncols`` must name one live allocation exactly."""
        self._use_cta_group(cta_group, "tcgen05.dealloc")
        lane, column = split_taddr(taddr)
        ncols = int(ncols)
        if lane != 0 or self._allocations.get(column) != ncols:
            raise TmemFault(
                f"tcgen05.dealloc of {ncols} columns at TMEM address {int(taddr):#x} "
                f"(lane {lane}, column {column}) does not match an allocation; "
                f"{self._describe()}"
            )
        del self._allocations[column]
        self._allocated[column : column + ncols] = False

    def relinquish(self, cta_group: int = 1) -> None:
        """``tcgen05.relinquish_alloc_permit``: every later ``alloc`` of this CTA faults."""
        self._use_cta_group(cta_group, "tcgen05.relinquish_alloc_permit")
        self._relinquished = True

    def check_exit(self) -> None:
        """At kernel exit all allocated TMEM must have been deallocated."""
        if self._allocations:
            raise TmemFault(
                f"the kernel exits with TMEM still allocated ({self._describe()}); "
                f"every tcgen05.alloc needs a tcgen05.dealloc"
            )

    def _check_cells(self, lanes: np.ndarray, columns: np.ndarray, what: str) -> None:
        """Every (lane, column) must be a TMEM cell inside an allocation."""
        low_lane, high_lane = int(lanes.min()), int(lanes.max())
        if low_lane < 0 or high_lane >= LANES:
            raise TmemFault(
                f"{what} touches lanes {low_lane}..{high_lane}; TMEM has lanes 0..{LANES - 1}"
            )
        low_col, high_col = int(columns.min()), int(columns.max())
        if high_col >= COLUMNS:
            raise TmemFault(
                f"{what} touches columns {low_col}..{high_col}; TMEM has columns 0..{COLUMNS - 1}"
            )
        outside = np.unique(columns[~self._allocated[columns]])
        if outside.size:
            raise TmemFault(
                f"{what} touches columns {low_col}..{high_col}, but column "
                f"{int(outside[0])} is not allocated ({self._describe()})"
            )

    # ------------------------------------------------------------------------------ tcgen05.cp
    def copy_from_shared(
        self, op: Tcgen05CpOpcode, taddr: int, desc: int, smem: SharedMemory
    ) -> None:
        """One ``tcgen05.cp``: read ``op.rows`` K-major rows of ``op.bits`` through ``desc``
        from ``smem`` (decompressing if asked) and write them to TMEM at ``taddr``."""
        what = f"{op.native_text} [{int(taddr):#x}]"
        self._use_cta_group(op.cta_group, what)
        fields = decode_smem_descriptor(desc)
        _check_copy_descriptor(int(desc), fields)
        chunks = op.bits // (8 * CORE_ROW_BYTES)
        addresses = _chunk_addresses(fields, op.rows, chunks)
        for flat in (int(addresses.argmin()), int(addresses.argmax())):
            row, chunk = divmod(flat, chunks)
            try:
                smem.check(int(addresses[row, chunk]), CORE_ROW_BYTES)
            except MemoryFault as exc:
                raise MemoryFault(
                    f"{what}: source row {row}, 16-byte chunk {chunk} (descriptor "
                    f"{int(desc):#018x}): {exc}"
                ) from None
        data = smem.data[addresses[..., None] + np.arange(CORE_ROW_BYTES)]  # (rows, chunks, 16)
        if op.decompress:
            data = _decompress(data, op.decompress)
        words = np.ascontiguousarray(data).reshape(op.rows, -1).view("<u4")
        lane, column = split_taddr(taddr)
        lanes = lane + _copy_lanes(op)
        columns = column + np.arange(words.shape[1])
        self._check_cells(lanes, columns, what)
        self.cells[lanes[:, :, None], columns[None, None, :]] = words[:, None, :]

    # ------------------------------------------------------------------------- tcgen05.ld/st
    def _ldst_cells(
        self,
        what: str,
        shape: str,
        num: int,
        packed: bool,
        taddr: int,
        warp: int,
        lanes: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(TMEM lanes, columns) of the registers of the threads at warp lanes ``lanes``: lanes
        is (threads, registers), columns (threads, registers, 1 or 2)."""
        if shape not in _LDST_SHAPES:
            raise ValueError(f"{what}: shape is one of {', '.join(_LDST_SHAPES)}, got {shape!r}")
        shape_lanes, _, max_num = _LDST_SHAPES[shape]
        if num < 1 or num > max_num or num & (num - 1):
            raise ValueError(f"{what}: .num is .x1 to .x{max_num} in powers of two, got {num!r}")
        bad = [int(lane) for lane in lanes if not 0 <= lane < 32]
        if bad:
            raise ValueError(f"{what}: thread lane is 0..31, got {bad[0]!r}")
        quarter = warp % 4
        first, column = split_taddr(taddr)
        if first // WARP_LANES not in (0, quarter):
            raise TmemFault(
                f"{what} at lane {first} from warp {warp}: warp {quarter} of its "
                f"warpgroup may access lanes {WARP_LANES * quarter}.."
                f"{WARP_LANES * quarter + WARP_LANES - 1} only"
            )
        offset = first % WARP_LANES
        if offset + shape_lanes > WARP_LANES:
            raise TmemFault(
                f"{what}: {shape_lanes} lanes from lane offset {offset} cross the "
                f"32-lane quarter of warp {quarter} of the warpgroup"
            )
        rows, words = _fragment(shape, num, lanes)
        cells = WARP_LANES * quarter + offset + rows
        halves = np.arange(2 if packed else 1)
        columns = column + (2 * words[..., None] + halves if packed else words[..., None])
        self._check_cells(cells, columns, what)
        return cells, columns

    def load(
        self, shape: str, num: int, pack16: bool, taddr: int, warp: int, lane: int
    ) -> list[int]:
        """The registers thread ``lane`` of warp ``warp % 4`` of its warpgroup gets from one
        ``tcgen05.ld.<shape>.x<num>{.pack::16b}``; the warp's lanes are its own quarter."""
        return self.load_warp(shape, num, pack16, taddr, warp, [lane])[0]

    def load_warp(
        self, shape: str, num: int, pack16: bool, taddr: int, warp: int, lanes: Sequence[int]
    ) -> list[list[int]]:
        """:meth:`load` for the threads at ``lanes`` of one warp, which all pass ``taddr``:
        one gather for all of them."""
        what = f"tcgen05.ld.{shape}.x{num}{'.pack::16b' if pack16 else ''} [{int(taddr):#x}]"
        rows, columns = self._ldst_cells(what, shape, num, pack16, taddr, warp, np.asarray(lanes))
        cells = self.cells[rows[..., None], columns]
        if pack16:
            cells = (cells[..., 0] & 0xFFFF) | ((cells[..., 1] & 0xFFFF) << 16)
        return cells.reshape(len(lanes), -1).tolist()

    def store(
        self,
        shape: str,
        num: int,
        unpack16: bool,
        taddr: int,
        warp: int,
        lane: int,
        values: Sequence[int],
    ) -> None:
        """Thread ``lane``'s share of one ``tcgen05.st.<shape>.x<num>{.unpack::16b}``: the
        inverse of :meth:`load`; unpacked 16-bit halves land zero-extended in their cells."""
        self.store_warp(shape, num, unpack16, taddr, warp, [lane], [values])

    def store_warp(
        self,
        shape: str,
        num: int,
        unpack16: bool,
        taddr: int,
        warp: int,
        lanes: Sequence[int],
        values: Sequence[Sequence[int]],
    ) -> None:
        """:meth:`store` for the threads at ``lanes`` of one warp, which all pass ``taddr``
        (``values[i]`` are the registers of ``lanes[i]``): one scatter for all of them."""
        what = f"tcgen05.st.{shape}.x{num}{'.unpack::16b' if unpack16 else ''} [{int(taddr):#x}]"
        rows, columns = self._ldst_cells(what, shape, num, unpack16, taddr, warp, np.asarray(lanes))
        for registers in values:
            if len(registers) != rows.shape[1]:
                raise ValueError(
                    f"{what}: thread stores {rows.shape[1]} registers, got {len(registers)}"
                )
        regs = np.asarray(
            [[int(v) & 0xFFFFFFFF for v in registers] for registers in values], dtype=np.uint32
        )
        if unpack16:
            regs = np.stack([regs & 0xFFFF, regs >> 16], axis=-1)
        self.cells[rows[..., None], columns] = regs.reshape(columns.shape)


def tensor_memory(cta) -> TensorMemory:
    """``cta``'s tensor memory, made on its first use."""
    if cta.tmem is None:
        cta.tmem = TensorMemory()
    return cta.tmem
