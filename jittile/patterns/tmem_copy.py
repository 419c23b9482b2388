"""tcgen05.cp: the shared-memory -> tensor-memory copy pattern.

Sections follow the specification: call parameters, data representation, operand specification
(TMEM shape and replicas, shared descriptor address walk), legality conditions, code generation.
The pattern issues one native ``tcgen05.cp`` per group/repeat instance; it elects no thread and
inserts no fence, commit or wait (allocation, proxy fencing, election, commit, wait and deallocation
are caller code).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ..errors import CompileError, ContractError
from ..ir import DescriptorWord, PlanFields, PlanRecord, SharedAddress, add, mul
from ..ptx.asm import AsmCall
from .base import (
    SCOPE_GROUP_AXES,
    CallSite,
    Completion,
    Lowering,
    LoweringContext,
    OperandRole,
    Parameter,
    SharedRegion,
    TilePattern,
    TmemRegion,
    operand_kind,
)
from .descriptors import DescriptorError, DescriptorWalk, SmemDescriptor, derive_walk
from .rewrites import descriptor_layout
from .tmem_copy_opcodes import Tcgen05CpOpcode, parse_tcgen05_cp

# ---------------------------------------------------------------------------- call parameters
# ``scope`` is taken by the frontend (site.scope); ``pred`` is the only other parameter. Shape, CTA
# group, multicast and decompression are opcode qualifiers; LDO/SDO/swizzle come from the layout.
PARAMETERS = (
    Parameter(
        "scope",
        "static",
        "thread (default), warp, warpgroup, cta or cluster: one group "
        "axis per execution index, bound to the running thread",
    ),
    Parameter(
        "pred",
        "runtime",
        "a runtime bool gating every instruction of the call (False: checked, nothing issued)",
    ),
)

# ----------------------------------------------------------------------- data representation
# Both regions are scalar 32-bit storage words (decompression keeps the same b32 footprint).
STORAGE = ("uint32", "int32", "float32")

# ---------------------------------------------------------------------- operand specification
TMEM_LANES = 128
TMEM_COLUMNS = 512
COLUMN_ALIGN = 4  # 128 bits of b32 columns


def atom_lane(op: Tcgen05CpOpcode, row: int) -> int:
    """TMEM lane, relative to the origin, that logical atom row ``row`` of ``op`` lands in."""
    if op.shape == "4x256b":
        return 32 * row
    if op.multicast == "warpx2::01_23":
        return 64 * (row // 32) + row % 32
    return row  # 128x256b, 128x128b, 64x128b.warpx2::02_13, 32x128b.warpx4


def atom_replicas(op: Tcgen05CpOpcode) -> tuple[int, ...]:
    """Lane offsets of the destination replicas the opcode writes (the zero one first)."""
    return {
        None: (0,),
        "warpx2::02_13": (0, 64),
        "warpx2::01_23": (0, 32),
        "warpx4": (0, 32, 64, 96),
    }[op.multicast]


@dataclass(frozen=True)
class Instance:
    """One native instruction: its group/repeat index and both static origins."""

    group: tuple[int, ...]
    repeat: tuple[int, ...]
    lane: int
    column: int
    walk: DescriptorWalk


# ------------------------------------------------------------------------------ the pattern
# tcgen05.cp completes through tcgen05.commit, which arrives once on a barrier the caller waits on.
TCGEN05_COMMIT = Completion(
    "tcgen05_commit",
    "completes through `tcgen05.commit...mbarrier::arrive::one` on a barrier "
    "the caller waits on (one arrival, no transaction bytes)",
)


@dataclass(frozen=True)
class TmemCopyFields(PlanFields):
    """A tcgen05.cp's plan fields: its source walk's LDO, SDO and swizzle, the descriptor's
    constant bits (hex), the atom's replicas, its CTA group and decompression, and per group
    axis the (lane, column, shared byte) step of one index."""

    ldo: int
    sdo: int
    swizzle: int
    descriptor: str
    replicas: tuple[int, ...]
    cta_group: int
    decompress: str | None = None
    group_steps: tuple = ()


class TmemCopyPattern(TilePattern):
    family = "tcgen05.cp"
    prefixes = ("tcgen05.cp",)
    grammar = ("tcgen05.cp.cta_group.shape{.multicast}{.dst_fmt.src_fmt} [taddr], s-desc",)
    operand_forms = {
        "copy": (
            OperandRole(
                "dst_tmem",
                ("tmem",),
                "a T.cuda.decl_tmem tensor or region: (*group, *repeat, rows, b32 words)",
            ),
            OperandRole(
                "src_shared",
                ("shared",),
                "a shared buffer or region of the same "
                "(*group, *repeat) axes; its descriptor comes "
                "from the layout",
            ),
        )
    }
    parameters = PARAMETERS
    completions = {"copy": TCGEN05_COMMIT}
    fields_type = TmemCopyFields
    interpreter = "jittile.interpreter.families.tmem_copy"
    example = (
        'shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)\n'
        'mem = T.cuda.decl_tmem(address[0], ty_args=[T.Tensor((128, 4), "uint32", scope="tmem",\n'
        "                       layout=TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)]))])\n"
        'T.cuda.tile.apply(T.ptx["tcgen05.cp.cta_group::1.128x128b"], mem, shared)'
    )
    async_reads = {"copy": ("src_shared",)}

    def parse(self, opcode: str, location=None) -> Tcgen05CpOpcode:
        return parse_tcgen05_cp(opcode, location)

    def claims(self, opcode: str) -> bool:
        return any(opcode == p or opcode.startswith(p + ".") for p in self.prefixes)

    def lower(self, site: CallSite, ctx: LoweringContext) -> Lowering:
        op = self._opcode(site)
        self.check_parameter_names(
            site,
            " (shape, CTA group, multicast and decompression are "
            "opcode qualifiers; LDO/SDO/swizzle come from the "
            "shared layout)",
        )
        tmem, shared = self._operands(site, op)
        group_shape, repeat_shape, groups = self._lead(site, op, tmem, shared, ctx)
        instances = self._instances(site, op, tmem, shared, group_shape, repeat_shape)
        return self._generate(site, ctx, op, tmem, shared, instances, group_shape, groups)

    # ------------------------------------------------------------------------------ opcode
    def _opcode(self, site: CallSite) -> Tcgen05CpOpcode:
        try:
            op = parse_tcgen05_cp(site.opcode, site.location)
        except ContractError as exc:
            raise ContractError(
                exc.rule, site.location, opcode=site.opcode, parameter=exc.parameter
            ) from None
        try:
            op.check_target(site.target, site.location)
        except ContractError as exc:
            raise ContractError(
                exc.rule, site.location, opcode=site.opcode, parameter=exc.parameter
            ) from None
        return op

    # ------------------------------------------------------------- data representation
    def _operands(self, site: CallSite, op: Tcgen05CpOpcode) -> tuple[TmemRegion, SharedRegion]:
        if len(site.operands) != 2:
            raise site.error(
                f"takes two operands (dst_tmem, src_shared), got {len(site.operands)}", "operands"
            )
        tmem, shared = site.operands
        if not isinstance(tmem, TmemRegion):
            raise site.error(
                f"operand 0 (dst_tmem) must be a T.cuda.decl_tmem tensor or region, "
                f"got {operand_kind(tmem)}",
                "operand 0",
            )
        if not isinstance(shared, SharedRegion):
            raise site.error(
                f"operand 1 (src_shared) must be a shared buffer or region, got "
                f"{operand_kind(shared)}",
                "operand 1",
            )
        if shared.runtime_indices:
            value, axis = shared.runtime_indices[0]
            raise site.error(
                f"operand 1 (src_shared) is indexed on axis {axis} by the runtime "
                f"value {value.text!r}; tcgen05.cp derives its shared descriptors "
                f"statically, so its shared indices must be compile-time values "
                f"(T.unroll makes a loop index one)",
                "operand 1",
            )
        for index, (what, dtype) in enumerate(
            (("dst_tmem", tmem.dtype), ("src_shared", shared.dtype))
        ):
            if dtype.name not in STORAGE:
                raise site.error(
                    f"operand {index} ({what}) has {dtype.name} elements; tcgen05.cp "
                    f"regions are scalar 32-bit storage words "
                    f"({', '.join(STORAGE)})",
                    f"operand {index}",
                )
        return tmem, shared

    # ---------------------------------------------------------- operand shapes and repeats
    def _lead(
        self,
        site: CallSite,
        op: Tcgen05CpOpcode,
        tmem: TmemRegion,
        shared: SharedRegion,
        ctx: LoweringContext,
    ):
        """Split both operands into (group axes, repeat axes, atom) and check they agree."""
        atom = (op.rows, op.words)
        n_group = SCOPE_GROUP_AXES.get(site.scope)
        if n_group is None:
            raise site.error(
                f"must be one of {', '.join(SCOPE_GROUP_AXES)}, got {site.scope!r}", "scope"
            )
        shapes = (tuple(tmem.region_shape), tuple(shared.shape))
        for index, (what, shape) in enumerate(zip(("dst_tmem", "src_shared"), shapes)):
            if len(shape) < 2 + n_group or shape[-2:] != atom:
                groups = f" after {n_group} group axis of scope {site.scope!r}" if n_group else ""
                raise site.error(
                    f"operand {index} ({what}) has shape {shape}; it must end in the "
                    f"(rows, b32 words) atom {atom} of '.{_form(op)}'{groups} (earlier "
                    f"axes are explicit repeats)",
                    f"operand {index}",
                )
        if shapes[0][:-2] != shapes[1][:-2]:
            raise site.error(
                f"dst_tmem {shapes[0]} and src_shared {shapes[1]} disagree on their "
                f"group/repeat axes {shapes[0][:-2]} vs {shapes[1][:-2]}; each repeat "
                f"copies one atom from shared into TMEM",
                "operands",
            )
        lead = shapes[0][:-2]
        try:
            groups = ctx.group_indices(site.scope)
        except CompileError as exc:  # e.g. scope="cluster" in a kernel launched without clusters
            raise site.error(exc.message, "scope") from None
        for axis, (extent, _) in enumerate(groups):
            if lead[axis] != extent:
                raise site.error(
                    f"group axis {axis} of the operands has extent {lead[axis]}, but "
                    f"scope {site.scope!r} has {extent} indices",
                    "scope",
                )
        return lead[:n_group], lead[n_group:], groups

    # ---------------------------------------------------------------- legality conditions
    def _instances(
        self,
        site: CallSite,
        op: Tcgen05CpOpcode,
        tmem: TmemRegion,
        shared: SharedRegion,
        group_shape: tuple,
        repeat_shape: tuple,
    ) -> list[Instance]:
        tmem_axes = self._tmem_axes(site, tmem)
        replicas = _replicas(site, op, tmem)
        out = []
        first: Instance | None = None
        for group in itertools.product(*(range(n) for n in group_shape)):
            for repeat in itertools.product(*(range(n) for n in repeat_shape)):
                lead = group + repeat
                lane, column = self._tmem_atom(site, op, tmem, tmem_axes, lead, replicas)
                walk = self._shared_atom(site, op, shared, lead)
                inst = Instance(group, repeat, lane, column, walk)
                if first is None:
                    first = inst
                elif (walk.ldo, walk.sdo, walk.swizzle) != (
                    first.walk.ldo,
                    first.walk.sdo,
                    first.walk.swizzle,
                ):
                    raise site.error(
                        f"every repeat must use one descriptor organisation: instance {lead} of "
                        f"{shared.buffer.name!r} derives LDO {walk.ldo}, SDO {walk.sdo}, swizzle "
                        f"{walk.swizzle}, but instance {first.group + first.repeat} derives LDO "
                        f"{first.walk.ldo}, SDO {first.walk.sdo}, swizzle {first.walk.swizzle}",
                        "operand 1",
                    )
                out.append(inst)
        return out

    @staticmethod
    def _tmem_axes(site: CallSite, tmem: TmemRegion) -> tuple[int, ...]:
        """Which TMEM tensor axes the region's axes are (integer-indexed axes are dropped)."""
        return tuple(tmem.axes)

    def _tmem_atom(
        self,
        site: CallSite,
        op: Tcgen05CpOpcode,
        tmem: TmemRegion,
        axes: tuple,
        lead: tuple,
        replicas: list,
    ) -> tuple[int, int]:
        """(lane, column) origin of one instance's atom after checking its whole mapping."""

        def where(row: int, word: int) -> tuple[int, int]:
            coords = list(tmem.origin)
            for axis, value in zip(axes, lead + (row, word)):
                coords[axis] += value
            try:
                offsets = tmem.layout.axis_offsets(tuple(coords), tuple(tmem.shape))
            except ValueError as exc:
                raise site.error(
                    f"TMEM layout {tmem.layout!r} does not describe the tensor "
                    f"{tuple(tmem.shape)}: {exc}",
                    "operand 0",
                ) from None
            if offsets.get("mem"):
                raise site.error(
                    f"TMEM layout {tmem.layout!r} has memory-axis strides; TMEM "
                    f"layouts use k @ TLane / k @ TCol",
                    "operand 0",
                )
            return offsets["lane"], offsets["col"]

        lane0, col0 = where(0, 0)
        for row in range(op.rows):
            for word in range(op.words):
                lane, col = where(row, word)
                want = (lane0 + atom_lane(op, row), col0 + word)
                if (lane, col) != want:
                    raise site.error(
                        f"TMEM mapping of instance {lead} does not match '.{_form(op)}': atom "
                        f"(row {row}, word {word}) is at (lane {lane}, column {col}) but the "
                        f"opcode writes it to (lane {want[0]}, column {want[1]}) (rows go to "
                        f"{_lane_rule(op)}; words are consecutive b32 columns)",
                        "operand 0",
                    )
        if col0 % COLUMN_ALIGN:
            raise site.error(
                f"TMEM column origin {col0} of instance {lead} is not 128-bit "
                f"aligned (a multiple of {COLUMN_ALIGN} b32 columns)",
                "operand 0",
            )
        lanes = [lane0 + atom_lane(op, r) + dl for r in range(op.rows) for dl, _ in replicas]
        cols = [col0 + w + dc for w in range(op.words) for _, dc in replicas]
        if min(lanes) < 0 or max(lanes) >= TMEM_LANES or min(cols) < 0 or max(cols) >= TMEM_COLUMNS:
            raise site.error(
                f"instance {lead} writes lanes {min(lanes)}..{max(lanes)} and columns "
                f"{min(cols)}..{max(cols)} (replicas included); the footprint must "
                f"stay inside {TMEM_LANES} lanes x {TMEM_COLUMNS} columns",
                "operand 0",
            )
        return lane0, col0

    @staticmethod
    def _shared_atom(
        site: CallSite, op: Tcgen05CpOpcode, shared: SharedRegion, lead: tuple
    ) -> DescriptorWalk:
        """The descriptor walk that reads one instance's atom of the shared region."""
        buf = shared.buffer
        try:
            return _walk_of(shared, op, lead)
        except DescriptorError as exc:
            message = (
                f"shared operand {buf.name!r} (instance {lead}): {exc.rule} (got {exc.value!r})"
            )
            fix = descriptor_layout(buf, lambda b: _walks(replace(shared, buffer=b), op, lead))
            if fix is None:
                raise site.error(message, exc.parameter) from None
            # The change is the allocation's: report it there, with the call's position.
            change = "alignment" if fix[1].layout is buf.layout else "layout"
            raise ContractError(
                f"{message} (the tile call at {site.location} reads it)",
                buf.location,
                opcode=site.opcode,
                parameter=exc.parameter,
                hint=f"allocate it with the {change} a descriptor walk reads: {fix[0]}",
            ) from None

    # ----------------------------------------------------------------------- code generation
    def _generate(
        self,
        site: CallSite,
        ctx: LoweringContext,
        op: Tcgen05CpOpcode,
        tmem: TmemRegion,
        shared: SharedRegion,
        instances: list[Instance],
        group_shape: tuple,
        groups: list,
    ) -> Lowering:
        pred = self.predicate(site)
        if pred is False:
            return Lowering(plan=[])
        first = instances[0].walk
        constant = SmemDescriptor(0, first.ldo, first.sdo, first.swizzle).encode()
        # Group axes are runtime indices: each must step both origins by one constant.
        lane_step, col_step, smem_step = _group_steps(site, instances, group_shape)
        taddr_steps = [
            mul(index, (lane_step[axis] << 16) + col_step[axis])
            for axis, (_, index) in enumerate(groups)
        ]
        smem_steps = [mul(index, smem_step[axis]) for axis, (_, index) in enumerate(groups)]
        replicas = atom_replicas(op)
        asm = AsmCall(f"{op.native_text} [$0], $1;", (), ("r", "l"), comment=op.native_text)
        plan = []
        for inst in instances:
            if any(inst.group):
                continue  # group instances are the runtime terms of instance (0, ..., repeat)
            taddr = add(tmem.base, *taddr_steps, (inst.lane << 16) | inst.column)
            smem = SharedAddress(shared.buffer.name, add(inst.walk.origin, *smem_steps))
            # The start-address field (bits 0-13) is the 16-byte unit of the shared address.
            sdesc = DescriptorWord(smem, constant)
            plan.append(
                PlanRecord(
                    opcode=op.native_text,
                    instance=inst.repeat,
                    coords=(inst.lane, inst.column),
                    shared_offset=shared.buffer.offset + inst.walk.origin,
                    bytes=op.rows * op.bits // 8,
                    operands=(("taddr", taddr), ("descriptor", sdesc)),
                    asm=asm,
                    completion=self.completions["copy"].name,
                    fields=TmemCopyFields(
                        inst.walk.ldo,
                        inst.walk.sdo,
                        inst.walk.swizzle,
                        hex(constant),
                        replicas,
                        op.cta_group,
                        op.decompress,
                        tuple(zip(lane_step, col_step, smem_step)) if groups else (),
                    ),
                )
            )
        return Lowering(plan=plan, predicate=pred)


def _replicas(site: CallSite, op: Tcgen05CpOpcode, tmem: TmemRegion) -> list[tuple[int, int]]:
    """The (lane, column) replica offsets of the TMEM layout, which must be the opcode's."""
    layout = tmem.layout
    if layout is None or not hasattr(layout, "axis_offsets"):
        raise site.error(
            f"TMEM tensor {tmem.name!r} needs an explicit TileLayout with "
            f"TLane/TCol strides (layout=TileLayout(S[...] : (... @ TLane, ... "
            f"@ TCol)))",
            "operand 0",
        )
    offsets = (
        layout.replica_offsets()
        if hasattr(layout, "replica_offsets")
        else [{"mem": 0, "lane": 0, "col": 0}]
    )
    got = [(o["lane"], o["col"]) for o in offsets]
    if any(o["mem"] for o in offsets):
        raise site.error(
            f"TMEM layout {layout!r} has a replica on the memory axis; TMEM "
            f"replicas are k @ TLane strides",
            "operand 0",
        )
    want = [(lane, 0) for lane in atom_replicas(op)]
    if sorted(got) != sorted(want):
        spelled = (
            "no R[...] replicas" if len(want) == 1 else f"R[{len(want)} : {want[1][0]} @ TLane]"
        )
        raise site.error(
            f"'.{_form(op)}' writes "
            f"replicas at lane offsets {[w[0] for w in want]} (column offset 0), "
            f"but the TMEM layout {layout!r} states replicas at (lane, column) "
            f"offsets {sorted(got)}; the destination layout must state exactly "
            f"the opcode's replicas ({spelled}); the pattern does not infer "
            f"multicast",
            "operand 0",
        )
    return got


def _group_steps(site: CallSite, instances: list[Instance], group_shape: tuple):
    """Per group axis: the constant lane, column and shared-byte step between indices."""
    lane_step, col_step, smem_step = [], [], []
    by_index = {inst.group + inst.repeat: inst for inst in instances}
    for axis, extent in enumerate(group_shape):
        steps = None
        for inst in instances:
            if inst.group[axis] != 0:
                continue
            for k in range(1, extent):
                key = list(inst.group + inst.repeat)
                key[axis] = k
                other = by_index[tuple(key)]
                delta = (
                    other.lane - inst.lane,
                    other.column - inst.column,
                    other.walk.origin - inst.walk.origin,
                )
                if steps is None and k == 1:
                    steps = delta
                if delta != tuple(k * s for s in steps):
                    raise site.error(
                        f"group axis {axis} must step the TMEM and shared "
                        f"origins by constant amounts; index {k} is at a "
                        f"(lane, column, shared byte) delta of {delta}",
                        "scope",
                    )
        steps = steps or (0, 0, 0)
        if steps[0] < 0 or steps[1] < 0:
            raise site.error(
                f"group axis {axis} steps TMEM by a negative (lane, column) {steps[:2]}",
                "scope",
            )
        lane_step.append(steps[0])
        col_step.append(steps[1])
        smem_step.append(steps[2])
    return lane_step, col_step, smem_step


def _form(op: Tcgen05CpOpcode) -> str:
    return f"{op.shape}.{op.multicast}" if op.multicast else op.shape


def _lane_rule(op: Tcgen05CpOpcode) -> str:
    if op.shape == "4x256b":
        return "lanes 0, 32, 64, 96 from the origin"
    if op.multicast == "warpx2::01_23":
        return "lane 64*(r//32) + r%32 from the origin"
    return "consecutive lanes from the origin"


PATTERN = TmemCopyPattern()


def _walk_of(shared: SharedRegion, op: Tcgen05CpOpcode, lead: tuple) -> DescriptorWalk:
    """The descriptor walk of one instance's atom; ``DescriptorError`` when there is none."""
    buf = shared.buffer

    def address_of(row: int, word: int) -> int:
        return shared.byte_address(lead + (row, word))

    return derive_walk(
        address_of,
        op.rows,
        op.words,
        base_align=buf.align,
        backing_bytes=buf.nbytes - address_of(0, 0),
    )


def _walks(shared: SharedRegion, op: Tcgen05CpOpcode, lead: tuple) -> bool:
    try:
        _walk_of(shared, op, lead)
    except DescriptorError:
        return False
    return True
