"""cp.async.bulk.tensor / cp.reduce.async.bulk.tensor: the TMA tile pattern.

Sections follow the specification: call parameters, data representation, operands and descriptor
fields, legality conditions, host setup, code generation. The pattern issues one native
instruction per group/repeat instance at explicit coordinates; it elects no thread and inserts no
waits, fences or expect_tx.
"""

from __future__ import annotations

import itertools
import math
import numbers
from dataclasses import dataclass

from ..dtypes import DTYPES, REDUCTIONS, DType
from ..dtypes import dtype as lookup_dtype
from ..errors import CompileError, ContractError
from ..ir import HostParam, HostTensorMap, PlanFields, PlanRecord, SharedAddress, Var, add, mul
from ..layout import byte_swizzle_mode
from ..ptx.asm import AsmCall
from ..targets import satisfies
from .base import (
    MBARRIER,
    SCOPE_GROUP_AXES,
    CallSite,
    GlobalRegion,
    Lowering,
    LoweringContext,
    OperandRole,
    Parameter,
    SharedRegion,
    TensorMapOperand,
    TilePattern,
    runtime_index_step,
    static_tuple,
)
from .bulk_copy import BULK_GROUP
from .rewrites import (
    SHARED_ORIGIN_ALIGN,
    alloc_text,
    buffer_mode,
    one_axis_multiple,
    split_boxes,
    wide_box,
)
from .swizzle import SWIZZLE_SPAN, swizzle_period
from .tma_opcodes import BulkTensorOpcode, parse_bulk_tensor

# ---------------------------------------------------------------------------- call parameters
PARAMETERS = (
    Parameter("box", "static", "box extents, one per opcode dimension, outer to inner (1..256)"),
    Parameter(
        "coords",
        "runtime",
        "global start coordinates of the first box, outer to inner "
        "(signed 32-bit; shown innermost first, PTX order, in plans)",
    ),
    Parameter(
        "coord_steps",
        "static",
        "one rank-length coordinate increment per group/repeat "
        "axis of the shared operand, outer to inner",
    ),
    Parameter(
        "format",
        "static",
        "descriptor data type: the shared dtype (default), 'tf32' over "
        "float32, 'float4_e2m1fn' over uint8 (sm_100a)",
    ),
    Parameter(
        "element_strides",
        "static",
        "traversal stride per dimension (1..8; innermost 1 without interleave)",
    ),
    Parameter(
        "swizzle",
        "static",
        "0 none, 1/2/3 = 32/64/128-byte swizzle; must match the shared buffer's layout",
    ),
    Parameter("interleave", "static", "0 none, 1 = 16 B, 2 = 32 B channel interleave (rank >= 3)"),
    Parameter("l2_promotion", "static", "0 none, 1/2/3 = 64/128/256-byte L2 promotion"),
    Parameter("oob_fill", "static", "0 zeros, 1 NaN (floating formats) for out-of-bounds elements"),
    Parameter("gather4", "runtime", "the four row coordinates of .tile::gather4/.tile::scatter4"),
    Parameter(
        "mbar",
        "runtime",
        "loads: the mbarrier (shared address, e.g. mbar.ptr_to([0])) "
        "whose transaction count each load completes",
    ),
    Parameter("cta_mask", "runtime", ".multicast::cluster: the 16-bit mask of destination CTAs"),
    Parameter("cache_policy", "runtime", ".L2::cache_hint: the 64-bit cache policy (createpolicy)"),
    Parameter(
        "pred",
        "runtime",
        "a runtime bool gating every instruction of the call (False: checked, nothing issued)",
    ),
)

# ----------------------------------------------------------------------- data representation
# Reduction operator x element type (the descriptor's format) of cp.reduce.async.bulk.tensor: the
# shared facts (:data:`jittile.dtypes.REDUCTIONS`, probed pair by pair on the H200:
# bench/probe_reduce_types.py, bench/results/probe_reduce_types.json) less what the tensor form
# refuses. The hardware raises an illegal-instruction error for 64-bit signed and/or/xor (.b64 is
# the unsigned descriptor type only); it computes float64 add, which the tensor table leaves out
# as the PTX ISA does not list it.
_TENSOR_TRAPS = {("and", "int64"), ("or", "int64"), ("xor", "int64")}
_TENSOR_REFUSED = _TENSOR_TRAPS | {("add", "float64")}
_REDUCIBLE = ("uint32", "int32", "uint64", "int64", "float16", "bfloat16", "float32", "float64")
REDUCTION_TYPES = {
    redop: {
        name
        for name in _REDUCIBLE
        if DTYPES[name].reduction_type(redop) in defined and (redop, name) not in _TENSOR_REFUSED
    }
    for redop, defined in REDUCTIONS.items()
}


def tensor_reduction_type(redop: str, data_type: str) -> str | None:
    """The PTX ``.type`` a tensor reduction ``redop`` computes on for a descriptor of format
    ``data_type``, or None where the H200 traps (what the interpreter executes, which is more
    than the contract accepts: float64 add computes)."""
    element = DTYPES[data_type].reduction_type(redop) if data_type in DTYPES else None
    if element not in REDUCTIONS[redop] or (redop, data_type) in _TENSOR_TRAPS:
        return None
    return element


FLOAT_FORMATS = {"float16", "bfloat16", "float32", "float64", "tf32"}
TMA_STORAGE = {
    "uint8",
    "int8",
    "uint16",
    "int16",
    "uint32",
    "int32",
    "uint64",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "float8_e4m3fn",
    "float8_e5m2",
}


@dataclass(frozen=True)
class Representation:
    """How a box is stored: shared atom (suffix) shape in storage elements and payload bytes."""

    atom: tuple[int, ...]
    payload_bytes: int
    inner_box_bytes: int


def representation(
    op: BulkTensorOpcode,
    site: CallSite,
    dtype: DType,
    fmt: str,
    box: tuple,
    element_strides: tuple,
    interleave: int,
) -> Representation:
    """The shared image of one instruction (the seed's "Data representation" section)."""
    if op.mode in ("tile::gather4", "tile::scatter4"):
        if fmt == "float4_e2m1fn":  # the packed image: four rows of box[1] bytes, half payload
            return Representation((4, box[1]), 4 * box[1] // 2, box[1])
        return Representation((4, box[1]), 4 * box[1] * dtype.bytes, box[1] * dtype.bytes)
    image = tuple(math.ceil(b / s) for b, s in zip(box, element_strides))
    if fmt == "float4_e2m1fn":
        # Each sixteen nibbles fill the low half of a 16-byte shared block: one storage byte per
        # value in shared memory, half a byte of payload.
        return Representation(image, math.prod(image) // 2, image[-1])
    if interleave:
        slice_elems = 16 * interleave // dtype.bytes
        channel_one = (image[0], 1) + image[2:]  # one C slice per issue
        return Representation(
            channel_one + (slice_elems,), math.prod(channel_one) * 16 * interleave, 16 * interleave
        )
    return Representation(image, math.prod(image) * dtype.bytes, image[-1] * dtype.bytes)


# ------------------------------------------------------------------------------ the pattern
_SHARED = OperandRole("shared", ("shared",), "the shared image: (*group, *repeat, *box image)")
_GLOBAL = OperandRole(
    "global",
    ("global", "tensormap"),
    "a global tensor (or a slice of every axis), or a caller's jittile.TensorMap",
)


@dataclass(frozen=True)
class TmaFields(PlanFields):
    """A TMA instruction's plan fields: its box (outer to inner, as written) and swizzle mode."""

    box: tuple[int, ...]
    swizzle: int


class TmaPattern(TilePattern):
    family = "cp.async.bulk.tensor"
    prefixes = ("cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor")
    grammar = (
        "cp.async.bulk.tensor.dim.dst.src{.load_mode}.completion_mechanism{.multicast}"
        "{.cta_group}{.level::cache_hint}",
        "cp.async.bulk.tensor.dim.global.shared::cta{.load_mode}.bulk_group{.level::cache_hint}",
        "cp.reduce.async.bulk.tensor.dim.global.shared::cta.redOp{.load_mode}.bulk_group"
        "{.level::cache_hint}",
    )
    operand_forms = {
        "load": (_SHARED, _GLOBAL),
        "store": (_GLOBAL, _SHARED),
        "reduce": (_GLOBAL, _SHARED),
    }
    parameters = PARAMETERS
    completions = {"load": MBARRIER, "store": BULK_GROUP, "reduce": BULK_GROUP}
    fields_type = TmaFields
    interpreter = "jittile.interpreter.families.tma"
    example = (
        'shared = T.alloc_shared((2, 8, 16), "uint32", layout="default", align=128)\n'
        "T.cuda.tile.apply(\n"
        '    T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],\n'
        "    shared, A, box=(8, 16), coords=(0, 0), coord_steps=((8, 0),), mbar=mbar.ptr_to([0]))"
    )
    async_reads = {"store": ("shared",), "reduce": ("shared",)}

    def claims(self, opcode: str) -> bool:
        return any(opcode == p or opcode.startswith(p + ".") for p in self.prefixes)

    def parse(self, opcode: str, location=None) -> BulkTensorOpcode:
        return parse_bulk_tensor(opcode, location)

    def form(self, opcode: str) -> str:
        return parse_bulk_tensor(opcode).kind

    def lower(self, site: CallSite, ctx: LoweringContext) -> Lowering:
        op = self._opcode(site)
        shared, glob = self._operands(site, op)
        self.check_parameter_names(site, " (qualifiers go in the opcode)")
        d = self._descriptor(site, op, shared, glob)
        return self._generate(site, ctx, op, shared, glob, d)

    # ------------------------------------------------------------------------------ opcode
    def _opcode(self, site: CallSite) -> BulkTensorOpcode:
        try:
            op = parse_bulk_tensor(site.opcode, site.location)
            op.check_target(site.target, site.location)
        except ContractError as exc:
            raise ContractError(
                exc.rule, site.location, opcode=site.opcode, parameter=exc.parameter
            ) from None
        # Multicast is legal from sm_90 but the tile contract admits it only where the ISA advises
        # it (sm_90a, the sm_100a family). A 32-bit ctaMask is its own family (sm_107a/f), which
        # check_target above already enforced.
        if (
            op.multicast
            and op.multicast_bits != 32
            and not any(satisfies(site.target, t) for t in op.advised_targets)
        ):
            raise site.error(
                f"requires target sm_90a or sm_100a (multicast::cluster), but the "
                f"kernel is compiled for {site.target.name}",
                "target",
            )
        return op

    # ---------------------------------------------------------------------------- operands
    def _operands(self, site: CallSite, op: BulkTensorOpcode):
        if len(site.operands) != 2:
            order = "shared, global" if op.kind == "load" else "global, shared"
            raise site.error(f"takes two operands ({order}), got {len(site.operands)}", "operands")
        shared, glob = site.operands if op.kind == "load" else site.operands[::-1]
        sidx, gidx = (0, 1) if op.kind == "load" else (1, 0)
        if not isinstance(shared, SharedRegion):
            raise site.error(
                f"operand {sidx} must be a shared buffer or region for a {op.kind}, "
                f"got {type(shared).__name__}",
                f"operand {sidx}",
            )
        if not isinstance(glob, (GlobalRegion, TensorMapOperand)):
            raise site.error(
                f"operand {gidx} must be a global tensor region or a jittile.TensorMap "
                f"for a {op.kind}, got {type(glob).__name__}",
                f"operand {gidx}",
            )
        if isinstance(glob, GlobalRegion) and not glob.is_sliced:
            raise site.error(
                f"operand {gidx}: a TMA global region keeps every axis as a slice "
                f"with compile-time bounds (A[0:64, :]); integer or runtime indices "
                f"belong in coords=",
                f"operand {gidx}",
            )
        return shared, glob

    # --------------------------------------------------------- descriptor fields & legality
    def _descriptor(self, site: CallSite, op: BulkTensorOpcode, shared: SharedRegion, glob) -> dict:
        p = site.params
        rank = op.rank
        if "box" not in p:
            raise site.error("is required: one extent per opcode dimension, outer to inner", "box")
        box = static_tuple(
            site,
            "box",
            p["box"],
            rank,
            lambda b: 1 <= b <= 256,
            "each box extent must be in 1..256",
        )
        element_strides = static_tuple(
            site,
            "element_strides",
            p.get("element_strides", (1,) * rank),
            rank,
            lambda s: 1 <= s <= 8,
            "each element stride must be in 1..8",
        )
        swizzle = self._enum(site, "swizzle", p.get("swizzle", 0), 4)
        interleave = self._enum(site, "interleave", p.get("interleave", 0), 3)
        l2_promotion = self._enum(site, "l2_promotion", p.get("l2_promotion", 0), 4)
        oob_fill = self._enum(site, "oob_fill", p.get("oob_fill", 0), 2)
        dtype = shared.dtype
        fmt = p.get("format", dtype.name)
        if not isinstance(fmt, str):
            raise site.error(f"must be a static dtype string, got {fmt!r}", "format")
        try:
            fmt = lookup_dtype(fmt).name
        except Exception:
            raise site.error(f"unknown descriptor format {fmt!r}", "format") from None

        _check_format(site, op, dtype, fmt, box, swizzle, interleave, oob_fill, glob)
        _check_interleave(site, op, dtype, box, element_strides, swizzle, interleave)
        rep = representation(op, site, dtype, fmt, box, element_strides, interleave)
        if not interleave:
            _check_inner_box(site, shared, dtype, fmt, box, swizzle, rep)
        return dict(
            box=box,
            element_strides=element_strides,
            swizzle=swizzle,
            interleave=interleave,
            l2_promotion=l2_promotion,
            oob_fill=oob_fill,
            format=fmt,
            rep=rep,
        )

    @staticmethod
    def _enum(site: CallSite, name: str, value, count: int) -> int:
        if isinstance(value, Var) or not isinstance(value, int) or isinstance(value, bool):
            raise site.error(
                f"must be a static integer in 0..{count - 1}, got "
                f"{getattr(value, 'text', value)!r}",
                name,
            )
        if not 0 <= value < count:
            raise site.error(f"must be in 0..{count - 1}, got {value}", name)
        return value

    # ------------------------------------------------------------ shared image legality
    def _instances(
        self, site: CallSite, shared: SharedRegion, rep: Representation, ctx: LoweringContext
    ):
        """Split the shared region into (group, repeat, atom) and check the image."""
        atom = rep.atom
        shape = shared.shape
        n_group = SCOPE_GROUP_AXES.get(site.scope)
        if n_group is None:
            raise site.error(
                f"must be one of {', '.join(SCOPE_GROUP_AXES)}, got {site.scope!r}", "scope"
            )
        if len(shape) < len(atom) + n_group or tuple(shape[len(shape) - len(atom) :]) != atom:
            raise site.error(
                f"shared image {shape} must end in the box image {atom} "
                f"(ceil(box / element_strides)), after {n_group} group axes: "
                f"each box fills one compact image, and leading axes repeat it",
                "box",
                hint=_image_fix(site, shared, atom),
            )
        try:
            groups = ctx.group_indices(site.scope)
        except CompileError as exc:  # e.g. scope="cluster" in a kernel launched without clusters
            raise site.error(exc.message, "scope") from None
        lead = shape[: len(shape) - len(atom)]
        for axis, (extent, _) in enumerate(groups):
            if lead[axis] != extent:
                raise site.error(
                    f"group axis {axis} of the shared operand has extent "
                    f"{lead[axis]}, but scope {site.scope!r} has {extent} "
                    f"indices",
                    "scope",
                )
        return lead[:n_group], lead[n_group:], groups

    def _check_image(self, site: CallSite, shared: SharedRegion, lead_rank: int, atom, swizzle):
        """The atom must be compact row-major in the unswizzled address space, each origin
        128-byte aligned, and a swizzled buffer aligned to its period with a matching layout."""
        buf = shared.buffer
        try:
            layout_mode = byte_swizzle_mode(buf.layout, buf.dtype)
        except (TypeError, ValueError) as exc:
            raise site.error(
                f"the shared buffer {buf.name!r} has no TMA swizzle layout: {exc}", "swizzle"
            ) from None
        if layout_mode != swizzle:
            raise site.error(
                f"swizzle={swizzle} does not match the shared buffer {buf.name!r}, "
                f"whose layout has swizzle mode {layout_mode}",
                "swizzle",
                hint=_swizzle_fix(buf, layout_mode, swizzle),
            )
        need = swizzle_period(swizzle) if swizzle else SHARED_ORIGIN_ALIGN
        if buf.align < need:
            what = (
                f"swizzle={swizzle} needs the whole {need}-byte period"
                if swizzle
                else "every TMA shared origin must be 128-byte aligned"
            )
            raise ContractError(
                f"shared buffer {buf.name!r} is aligned to {buf.align} bytes; {what} (the tile "
                f"call at {site.location} uses it)",
                buf.location,
                opcode=site.opcode,
                parameter="align",
                hint=f"allocate it with align={need}: "
                f"{alloc_text(buf, buf.shape, buffer_mode(buf))}",
            )
        inner = getattr(buf.layout, "tile_layout", buf.layout)
        elem = buf.dtype.bytes
        rank = len(shared.shape)

        def linear(coords) -> int:
            return inner.memory_offset(shared.buffer_coords(tuple(coords)), buf.shape) * elem

        zero = [0] * rank
        origin = linear(zero)
        # The offset is additive over axes, so checking every value along each atom axis from
        # the origin checks the whole atom.
        expected = elem
        for axis in reversed(range(lead_rank, rank)):
            for value in range(shared.shape[axis]):
                coords = list(zero)
                coords[axis] = value
                got = linear(coords) - origin
                if got != value * expected:
                    raise site.error(
                        f"the shared image is not the compact box image the "
                        f"descriptor writes: element {tuple(coords)} is at byte "
                        f"{got} from the origin, expected {value * expected}",
                        "operands",
                    )
            expected *= shared.shape[axis]
        return linear, need

    # ----------------------------------------------------------------------- code generation
    def _generate(
        self,
        site: CallSite,
        ctx: LoweringContext,
        op: BulkTensorOpcode,
        shared: SharedRegion,
        glob,
        d: dict,
    ) -> Lowering:
        rank, rep = op.rank, d["rep"]
        gathered = op.mode in ("tile::gather4", "tile::scatter4")
        group_shape, repeat_shape, groups = self._instances(site, shared, rep, ctx)
        lead_rank = len(group_shape) + len(repeat_shape)
        linear, need = self._check_image(site, shared, lead_rank, rep.atom, d["swizzle"])
        steps_of = _axis_steps(site, shared, linear, lead_rank)
        # Runtime buffer indices (a pipeline stage) move the origin by index * step at run time.
        stage_offset = add(
            *(
                mul(value, runtime_index_step(site, shared, axis, need))
                for value, axis in shared.runtime_indices
            )
        )
        steps = _coord_steps(
            site, site.params.get("coord_steps", ()), rank, lead_rank, group_shape, repeat_shape
        )
        if gathered and any(step[0] for step in steps):
            raise site.error(
                f"gather4/scatter4 take their rows from gather4=, so a row step "
                f"would be dropped; got {steps}",
                "coord_steps",
            )
        operands = self._runtime_operands(site, op, rank, gathered)
        if isinstance(glob, GlobalRegion):
            _check_global(site, glob, rank, d)
        pred = self.predicate(site)
        if pred is False:  # checked like any other call, but nothing is issued
            return Lowering(plan=[])
        tensormap = self._host_setup(ctx, glob, d)
        asm = _asm(op, rank, gathered)
        group_offset = add(*(mul(index, steps_of[axis]) for axis, (_, index) in enumerate(groups)))
        plan = []
        for instance in itertools.product(*(range(n) for n in repeat_shape)):
            full = [0] * len(group_shape) + list(instance)
            coords = []
            for i in range(rank):
                delta = sum(full[a] * steps[a][i] for a in range(lead_rank))
                group_terms = [mul(index, steps[axis][i]) for axis, (_, index) in enumerate(groups)]
                coord = add(operands["coords"][i], delta, *group_terms)
                if isinstance(coord, int) and not -(2**31) <= coord < 2**31:
                    raise site.error(
                        f"coordinate {i} of instance {tuple(instance)} is {coord}, "
                        f"outside the signed 32-bit range of a TMA coordinate",
                        "coords",
                    )
                coords.append(coord)
            position = [0] * len(shared.shape)
            position[len(group_shape) : lead_rank] = instance
            offset = linear(position)
            ptx_coords = list(reversed(coords))
            if gathered:  # {column, row0, row1, row2, row3}
                ptx_coords = [coords[1], *operands["gather4"]]
            smem = SharedAddress(shared.buffer.name, add(offset, group_offset, stage_offset))
            plan.append(
                PlanRecord(
                    opcode=op.native_text,
                    instance=tuple(instance),
                    coords=tuple(ptx_coords),
                    shared_offset=shared.buffer.offset + offset,
                    bytes=rep.payload_bytes,
                    operands=_operands_for(op, smem, tensormap, ptx_coords, operands),
                    asm=asm,
                    completion=self.completions[op.kind].name,
                    barrier=operands.get("mbar"),
                    fields=TmaFields(d["box"], d["swizzle"]),
                )
            )
        return Lowering(plan=plan, predicate=pred)

    def _runtime_operands(
        self, site: CallSite, op: BulkTensorOpcode, rank: int, gathered: bool
    ) -> dict:
        """The call's runtime operands (ints where static): coords, gather4 rows, mbar, cta_mask
        and cache_policy, each present only where the form has it."""
        if not gathered and "gather4" in site.params:
            raise site.error("is only used by .tile::gather4 / .tile::scatter4 opcodes", "gather4")
        out = {"coords": _runtime_tuple(site, "coords", rank, required=True)}
        if gathered:
            out["gather4"] = _runtime_tuple(site, "gather4", 4, required=True)
        optional = {
            "mbar": _runtime(
                site,
                "mbar",
                op.kind == "load",
                "loads complete on an mbarrier",
                "stores and reductions complete through bulk groups",
                32,
            ),
            "cta_mask": _runtime(
                site,
                "cta_mask",
                op.multicast,
                "multicast needs the CTA mask",
                "only .multicast::cluster opcodes take a CTA mask",
                op.multicast_bits or 16,
            ),
            "cache_policy": _runtime(
                site,
                "cache_policy",
                op.cache_hint,
                ".L2::cache_hint needs the cache-policy operand",
                "only .L2::cache_hint opcodes take a cache policy",
                64,
            ),
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out

    # --------------------------------------------------------------------------- host setup
    @staticmethod
    def _host_setup(ctx: LoweringContext, glob, d: dict) -> HostParam:
        """One TensorMap per global region and descriptor fields, encoded at launch; a caller's
        TensorMap argument is passed through."""
        if isinstance(glob, TensorMapOperand):
            return HostParam(glob.param, glob.param)
        box = d["box"]
        if d["interleave"]:
            # The descriptor of (N, C_slices, *spatial, Ci) has the axes (N, C_slices, *spatial),
            # Ci implicit (runtime.tensormap._interleaved): one issue selects one C slice "even if
            # a larger C box field is supplied", so the C box is one.
            box = (box[0], 1, *box[2:])
        spec = HostTensorMap(
            param="",
            tensor=glob.param,
            region_starts=glob.starts,
            region_extents=glob.extents,
            data_type=d["format"],
            box=box,
            element_strides=d["element_strides"],
            interleave=d["interleave"],
            swizzle=d["swizzle"],
            l2_promotion=d["l2_promotion"],
            oob_fill=d["oob_fill"],
        )
        return ctx.host_setup(spec, _region_text(glob))


def _check_format(
    site: CallSite,
    op: BulkTensorOpcode,
    dtype: DType,
    fmt: str,
    box: tuple,
    swizzle: int,
    interleave: int,
    oob_fill: int,
    glob,
) -> None:
    """Data representation: the format reads the storage type without reinterpreting it."""
    if fmt == "tf32":
        if dtype.name != "float32":
            raise site.error(
                f"tf32 reads float32 storage, but the shared operand is {dtype.name}", "format"
            )
    elif fmt == "float4_e2m1fn":
        if op.kind != "load":
            raise site.error("float4_e2m1fn (16U4_ALIGN16B) is a load-only format", "format")
        if site.target.major < 10:
            # The sub-byte descriptor types are Blackwell's: the H200's driver refuses to
            # encode them (bench/results/gpu_tests_run19_failed.log).
            raise site.error(
                f"float4_e2m1fn (16U4_ALIGN16B) descriptors need sm_100a or "
                f"newer; the kernel is compiled for {site.target.name}",
                "format",
            )
        if dtype.name != "uint8":
            raise site.error(
                f"packed FP4 is stored as uint8 (two values a byte), got {dtype.name}", "format"
            )
        if box[-1] != 128:
            raise site.error(f"packed FP4 needs an inner box of 128, got {box[-1]}", "box")
        if swizzle not in (0, 3):
            raise site.error(f"packed FP4 images use swizzle 0 or 3, got {swizzle}", "swizzle")
        if interleave:
            raise site.error("packed FP4 does not combine with interleave", "interleave")
    elif fmt != dtype.name:
        raise site.error(
            f"format {fmt!r} differs from the operand dtype {dtype.name!r}; "
            f"jittile does not reinterpret storage (only tf32 over float32 and "
            f"float4_e2m1fn over uint8 are alternative formats)",
            "format",
        )
    if dtype.name not in TMA_STORAGE:
        raise site.error(f"TMA cannot move {dtype.name} elements", "format")
    if isinstance(glob, GlobalRegion) and glob.dtype != dtype:
        raise site.error(
            f"global operand is {glob.dtype.name} but shared operand is "
            f"{dtype.name}; both sides must have one element type",
            "operands",
        )
    if oob_fill == 1 and fmt not in FLOAT_FORMATS:
        raise site.error(f"NaN fill needs a floating-point format, got {fmt}", "oob_fill")
    if op.kind == "reduce":
        # The element type of a tensor reduction is the descriptor's format.
        allowed = REDUCTION_TYPES[op.redop]
        if fmt not in allowed:
            raise site.error(
                f".{op.redop} reductions support {', '.join(sorted(allowed))}; got {fmt}", "opcode"
            )


def _check_interleave(
    site: CallSite,
    op: BulkTensorOpcode,
    dtype: DType,
    box: tuple,
    element_strides: tuple,
    swizzle: int,
    interleave: int,
) -> None:
    """Interleave, element-stride and gather4/scatter4 box rules."""
    rank = op.rank
    gathered = op.mode in ("tile::gather4", "tile::scatter4")
    if interleave:
        if gathered:
            raise site.error("gather4/scatter4 do not use interleave", "interleave")
        if rank < 3:
            raise site.error(f"interleave needs a rank-3..5 opcode, got .{rank}d", "interleave")
        if interleave == 2 and swizzle != 1:
            raise site.error(
                f"interleave=2 (32B) requires swizzle=1 (32B), got swizzle={swizzle}", "swizzle"
            )
        if interleave == 1 and swizzle and site.target.major >= 10:
            raise site.error(
                f"16B interleave with swizzle {swizzle} can trap on "
                f"{site.target.name} (B200); use swizzle=0",
                "swizzle",
            )
        if element_strides[1] != 1 or element_strides[-1] != 1:
            raise site.error(
                f"with interleave the channel (axis 1) and innermost spatial "
                f"element strides must be 1, got {element_strides}",
                "element_strides",
            )
        if (box[-1] * dtype.bits) % 128:
            # The encoder's boxDim[0] rule holds with interleave too, boxDim[0] being the
            # innermost spatial extent: the H200's driver refuses e.g. two float32 or one
            # uint64 there (bench/results/probe_tma_interleave_box.log).
            raise site.error(
                f"with interleave the innermost spatial box extent is "
                f"{box[-1] * dtype.bits / 8:g} bytes ({box[-1]} x "
                f"{dtype.bytes} B); it must be a multiple of 16 bytes",
                "box",
            )
    elif element_strides[-1] != 1:
        # "Without interleave, the innermost step is one": the hardware ignores it and moves
        # whole box rows (on the H200 a stride-2 inner box wrote box[-1] elements per row,
        # overrunning the ceil(box / stride) image).
        raise site.error(
            f"without interleave the innermost element stride must be 1, got "
            f"{element_strides[-1]} in {element_strides}",
            "element_strides",
        )
    if gathered:
        if box[0] != 1:
            raise site.error(f"gather4/scatter4 use box=(1, width), got {box}", "box")
        if any(s != 1 for s in element_strides):
            raise site.error("gather4/scatter4 take unit element strides", "element_strides")


def _swizzle_fix(buf, layout_mode: int, swizzle: int) -> str:
    """How to make a TMA ``swizzle=`` and its shared buffer agree: either side may change."""
    if swizzle:
        layout = (
            f"layout=swizzle({swizzle}, {buf.shape}, {buf.dtype.name!r}), "
            f"align={swizzle_period(swizzle)}"
        )
    else:
        layout = 'layout="default"'
    return (
        f"pass swizzle={layout_mode} (the buffer's layout), or allocate {buf.name!r} with {layout}"
    )


def _check_inner_box(
    site: CallSite,
    shared: SharedRegion,
    dtype: DType,
    fmt: str,
    box: tuple,
    swizzle: int,
    rep: Representation,
) -> None:
    """Without interleave: the inner box is a multiple of 16 bytes and, swizzled, exactly the span."""
    # The encoder's rule: boxDim[0] x element size is a multiple of 16 bytes (the inner
    # element stride is one here, so this is also the image row's payload).
    fmt_bits = 4 if fmt == "float4_e2m1fn" else dtype.bits
    if (box[-1] * fmt_bits) % 128:
        raise site.error(
            f"the inner box is {box[-1] * fmt_bits / 8:g} bytes ({box[-1]} x "
            f"{fmt_bits // 8 or 0.5} B); it must be a multiple of 16 bytes",
            "box",
        )
    row = rep.inner_box_bytes  # one shared image row: box bytes, or 2x for packed FP4
    span = SWIZZLE_SPAN[swizzle]
    if swizzle and row > span:
        fix = (
            wide_box(shared.buffer, shared.shape, box, dtype.bytes, swizzle, _given_steps(site))
            if fmt_bits == dtype.bits
            else None
        )
        raise site.error(
            f"the inner box is {row} bytes, wider than the {span}-byte "
            f"span of swizzle={swizzle}: a swizzled box row is at most one span",
            "box",
            hint=fix and f"load the tile as span-wide boxes: {fix}",
        )
    if swizzle and row != span:
        # The hardware writes swizzled box rows at the span pitch (H200: a 64-byte inner
        # box under swizzle=3 lands every 128 bytes), which the compact image cannot hold.
        narrower = {32: 1, 64: 2, 128: 3}.get(row)
        hint = f"use swizzle={narrower}" if narrower else "use swizzle=0"
        raise site.error(
            f"the inner box is {row} bytes but swizzle={swizzle} lays each "
            f"box row out at its {span}-byte span, leaving gaps in the "
            f"compact shared image; {hint} or a {span}-byte inner box",
            "box",
        )


def _given_steps(site: CallSite) -> tuple:
    """The call's ``coord_steps=`` as written (static), else none."""
    steps = site.params.get("coord_steps", ())
    return tuple(steps) if isinstance(steps, tuple) else ()


def _image_fix(site: CallSite, shared: SharedRegion, atom: tuple) -> str:
    """The allocation (and ``coord_steps``) whose image the box fills: a shared region that is
    the box image widened along one axis becomes that many boxes on a new leading axis."""
    buf, shape = shared.buffer, shared.shape
    lead, tail = shape[: max(len(shape) - len(atom), 0)], shape[max(len(shape) - len(atom), 0) :]
    wider = one_axis_multiple(tuple(tail), atom)
    unit = tuple(site.params.get("element_strides", (1,) * len(atom)))
    if wider is None or shared.shape != buf.shape or any(s != 1 for s in unit):
        return (
            f"allocate {buf.name!r} with a shape ending in {atom}, one image per box "
            f"(leading axes for repeats, with coord_steps=)"
        )
    axis, k = wider
    return split_boxes(buf, tuple(lead), atom, axis, k, buffer_mode(buf), _given_steps(site))


def _region_text(glob: GlobalRegion) -> str:
    """``A`` or ``A[0:64, 16:]``: the global operand as the user wrote it."""
    if glob.is_whole:
        return glob.param
    parts = [
        f"{start or ''}:{'' if extent is None else start + extent}"
        for start, extent in zip(glob.starts, glob.extents)
    ]
    return f"{glob.param}[{', '.join(parts)}]"


def _axis_steps(site: CallSite, shared: SharedRegion, linear, lead_rank: int) -> list[int]:
    """Per group/repeat axis, the bytes between consecutive instances (0 on an extent-1 axis);
    every origin must be 128-byte aligned."""
    zero = [0] * len(shared.shape)
    origin = linear(zero)
    if origin % SHARED_ORIGIN_ALIGN:
        raise site.error(
            f"the shared origin is at byte {origin} of {shared.buffer.name!r}; "
            f"it must be 128-byte aligned (unswizzled address)",
            "operands",
        )
    steps = []
    for axis in range(lead_rank):
        unit = list(zero)
        unit[axis] = 1
        step = 0 if shared.shape[axis] == 1 else linear(unit) - origin
        if step % SHARED_ORIGIN_ALIGN:
            raise site.error(
                f"repeat/group axis {axis} steps the shared origin by {step} "
                f"bytes; every origin must be 128-byte aligned",
                "operands",
            )
        steps.append(step)
    return steps


def _coord_steps(
    site: CallSite, steps, rank: int, lead_rank: int, group_shape, repeat_shape
) -> tuple:
    """One rank-length static increment per group/repeat axis."""
    if isinstance(steps, list):
        steps = tuple(steps)
    if isinstance(steps, tuple) and not steps:  # (a NumPy scalar compares elementwise)
        vectors = ()
    elif isinstance(steps, tuple) and all(isinstance(s, (tuple, list)) for s in steps):
        vectors = steps
    elif isinstance(steps, tuple) and steps and any(isinstance(s, (tuple, list)) for s in steps):
        raise site.error(
            f"must be a tuple of rank-{rank} integer tuples, one per "
            f"group/repeat axis, got {steps!r}",
            "coord_steps",
        )
    else:  # a single flat vector (or a runtime value, which static_tuple rejects)
        vectors = (steps,)
    out = tuple(static_tuple(site, "coord_steps", s, rank) for s in vectors)
    if len(out) != lead_rank:
        raise site.error(
            f"needs one rank-{rank} increment per group/repeat axis "
            f"({lead_rank}: group {group_shape}, repeat {repeat_shape}), got "
            f"{len(out)}",
            "coord_steps",
        )
    return out


def _check_global(site: CallSite, glob: GlobalRegion, rank: int, d: dict) -> None:
    """Global rank (plus the channel-slice axis with interleave) and, where static, the
    slice extent."""
    interleave = d["interleave"]
    if glob.ndim != rank + (1 if interleave else 0):
        extra = " plus the explicit channel-slice axis" if interleave else ""
        raise site.error(
            f"global tensor {glob.param!r} has rank {glob.ndim}; the opcode rank is {rank}{extra}",
            "operands",
        )
    if interleave:
        slice_elems = d["rep"].atom[-1]
        extent = glob.extents[-1]
        if extent is None and glob.static_shape[-1] is not None:
            extent = glob.static_shape[-1] - glob.starts[-1]
        if extent is not None and extent != slice_elems:
            raise site.error(
                f"with interleave={interleave} the innermost global axis (Ci) "
                f"holds one {16 * interleave}-byte slice, {slice_elems} elements; "
                f"{glob.param!r} has {extent}",
                "operands",
            )


def _operands_for(op: BulkTensorOpcode, smem, tensormap, coords, operands: dict) -> tuple:
    """The instruction's inputs in asm order, as (role, value) pairs."""
    coord_pairs = [(f"coord{i}", c) for i, c in enumerate(coords)]
    if op.kind == "load":
        out = [
            ("shared", smem),
            ("tensormap", tensormap),
            *coord_pairs,
            ("barrier", operands["mbar"]),
        ]
    else:
        out = [("tensormap", tensormap), *coord_pairs, ("shared", smem)]
    if op.multicast:
        out.append(("cta_mask", operands["cta_mask"]))
    if op.cache_hint:
        out.append(("cache_policy", operands["cache_policy"]))
    return tuple(out)


def _asm(op: BulkTensorOpcode, rank: int, gathered: bool) -> AsmCall:
    n = 5 if gathered else rank
    inputs: list[str] = []

    def regs(count: int) -> str:
        start = len(inputs)
        inputs.extend(["r"] * count)
        return ", ".join(f"${i}" for i in range(start, start + count))

    if op.kind == "load":
        dst = regs(1)
        inputs.append("l")
        tmap = f"${len(inputs) - 1}"
        coords = regs(n)
        mbar = regs(1)
        text = f"{op.native_text} [{dst}], [{tmap}, {{{coords}}}], [{mbar}]"
    else:
        inputs.append("l")
        tmap = f"${len(inputs) - 1}"
        coords = regs(n)
        src = regs(1)
        text = f"{op.native_text} [{tmap}, {{{coords}}}], [{src}]"
    if op.multicast:
        inputs.append("h" if (op.multicast_bits or 16) == 16 else "r")
        text += f", ${len(inputs) - 1}"
    if op.cache_hint:
        inputs.append("l")
        text += f", ${len(inputs) - 1}"
    return AsmCall(text + ";", (), tuple(inputs), comment=op.native_text)


# ------------------------------------------------------------------------ runtime values
def _runtime_tuple(site: CallSite, name: str, length: int, required: bool):
    value = site.params.get(name)
    if value is None:
        if required:
            raise site.error(f"is required ({length} runtime integers)", name)
        return None
    if isinstance(value, list):
        value = tuple(value)
    if (isinstance(value, Var) or _is_integer(value)) and length == 1:
        value = (value,)
    if not isinstance(value, tuple) or len(value) != length:
        raise site.error(f"needs {length} entries, got {getattr(value, 'text', value)!r}", name)
    out = []
    for v in value:
        if isinstance(v, Var):
            out.append(v)
        elif _is_integer(v):
            if not -(2**31) <= int(v) < 2**31:
                raise site.error(f"entries are signed 32-bit coordinates, got {int(v)}", name)
            out.append(int(v))
        else:
            raise site.error(f"entries must be integers, got {getattr(v, 'text', v)!r}", name)
    return tuple(out)


def _runtime(
    site: CallSite, name: str, required: bool, why_required: str, why_forbidden: str, bits: int
):
    """A runtime operand (a Var), or a static integer that fits its ``bits``-bit operand."""
    value = site.params.get(name)
    if value is None:
        if required:
            raise site.error(f"is required: {why_required}", name)
        return None
    if not required:
        raise site.error(f"is not allowed here: {why_forbidden}", name)
    if isinstance(value, Var):
        return value
    if _is_integer(value) and name != "mbar":  # a barrier is a planned shared address
        if not 0 <= int(value) < 2**bits:
            raise site.error(f"is a {bits}-bit operand, got {int(value)}", name)
        return int(value)
    what = (
        "a runtime shared-memory pointer such as mbar.ptr_to([0])"
        if name == "mbar"
        else f"a runtime {bits}-bit integer operand"
    )
    raise site.error(f"must be {what}, got {value!r}", name)


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, Var))


PATTERN = TmaPattern()
