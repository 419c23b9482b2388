"""numba-cuda intrinsics that jittile's lowered kernels call.

Each factory returns a fresh ``@intrinsic`` bound to compile-time facts (an asm call, a shared-memory
placement), so the lowered Python function can refer to it by a generated global name.
"""

from __future__ import annotations

import functools

from llvmlite import ir

from . import numpy_compat

numpy_compat.install()

from numba.cuda import cgutils, types  # noqa: E402
from numba.cuda.extending import intrinsic  # noqa: E402

from ..ir import START_ADDRESS_MASK  # noqa: E402
from ..ptx.asm import CONSTRAINT_BITS, AsmCall  # noqa: E402

ADDRSPACE_SHARED = 3
SMEM_SYMBOL = "__jittile_smem"
_INT_TYPES = {16: types.uint16, 32: types.uint32, 64: types.uint64}


def _as_int(context, builder, value, fromty, bits: int):
    """Convert an integer/boolean argument to an ``iN`` register value of the asm operand's width."""
    target = _INT_TYPES[bits]
    if isinstance(fromty, types.Boolean):
        return builder.zext(context.cast(builder, value, fromty, types.uint8), ir.IntType(bits))
    return context.cast(builder, value, fromty, target)


def _register_type(constraint: str, outputs: tuple[str, ...]):
    """The numba type of an asm operand: a tied input has its output's type."""
    if constraint.isdigit():
        constraint = outputs[int(constraint)]
    return types.float32 if constraint == "f" else _INT_TYPES[CONSTRAINT_BITS[constraint]]


def _accepts(ty, register_type) -> bool:
    numeric = (types.Integer, types.Boolean, types.IntegerLiteral, types.BooleanLiteral)
    if isinstance(register_type, types.Float):
        return isinstance(ty, numeric + (types.Float,))
    return isinstance(ty, numeric)


@functools.cache
def make_asm(call: AsmCall, groups: tuple | None = None):
    """An intrinsic issuing ``call``: inputs are converted to each operand's register type (an
    integer of the operand's width, or float32 for ``f``); it returns nothing, one value, or a
    tuple of them. ``groups`` (one entry per argument) lets one argument supply several
    consecutive operands: ``(start, count, length)`` takes elements ``start`` to
    ``start + count`` of a tuple of ``length`` (a packed register fragment), ``None`` one operand.
    One per distinct call and grouping, so that further specializations reuse numba's typing and
    lowering of it."""
    return _fixed_arity(_asm_typer(call, groups), len(groups or call.inputs))


def _asm_typer(call: AsmCall, groups: tuple | None):
    """The ``typer(typingctx, *argtys)`` of :func:`make_asm`."""
    out_types = [_register_type(c, call.outputs) for c in call.outputs]
    in_types = [_register_type(c, call.outputs) for c in call.inputs]
    groups = groups or (None,) * len(call.inputs)

    def flat(argtys):
        """The operand types the arguments supply, or None when they do not fit ``groups``."""
        out = []
        for ty, group in zip(argtys, groups):
            if group is None:
                out.append(ty)
            elif isinstance(ty, types.BaseTuple) and len(ty) == group[2]:
                out.extend(ty.types[group[0] : group[0] + group[1]])
            else:
                return None
        return out

    def typer(typingctx, *argtys):
        operands = flat(argtys)
        if (
            operands is None
            or len(operands) != len(in_types)
            or not all(_accepts(ty, want) for ty, want in zip(operands, in_types))
        ):
            return None
        if not out_types:
            resty = types.void
        elif len(out_types) == 1:
            resty = out_types[0]
        else:
            resty = types.Tuple(out_types)
        sig = resty(*argtys)

        def codegen(context, builder, signature, args):
            values = []
            for value, group in zip(args, groups):
                if group is None:
                    values.append(value)
                else:
                    values.extend(
                        builder.extract_value(value, group[0] + k) for k in range(group[1])
                    )
            llargs = [
                context.cast(builder, v, t, want)
                if isinstance(want, types.Float)
                else _as_int(context, builder, v, t, want.bitwidth)
                for v, t, want in zip(values, operands, in_types)
            ]
            lltypes = [context.get_value_type(t) for t in out_types]
            if not out_types:
                llret = ir.VoidType()
            elif len(out_types) == 1:
                llret = lltypes[0]
            else:
                llret = ir.LiteralStructType(lltypes)
            fnty = ir.FunctionType(llret, [a.type for a in llargs])
            asm = ir.InlineAsm(fnty, call.template, call.constraint_string, side_effect=True)
            result = builder.call(asm, llargs)
            if len(out_types) <= 1:
                return result if out_types else context.get_dummy_value()
            values = [builder.extract_value(result, i) for i in range(len(out_types))]
            return context.make_tuple(builder, resty, values)

        return sig, codegen

    return typer


@functools.cache
def make_word_asm(call: AsmCall):
    """An intrinsic issuing ``call`` (32-bit register operands, the first input the one value
    it moves: ``shfl.sync``) on a float or integer value, which keeps its kind: a float goes
    in and comes out as a float32 register (PTX ``.b32`` takes ``.f32`` registers as they are),
    an integer as 32 bits, int32 if it was signed, else uint32."""
    as_float = AsmCall(call.template, ("f",), ("f",) + call.inputs[1:], call.memory, call.comment)
    typers = {False: _asm_typer(call, None), True: _asm_typer(as_float, None)}

    def typer(typingctx, value, *rest):
        floating = isinstance(value, types.Float)
        found = typers[floating](typingctx, value, *rest)
        if found is None or floating:
            return found
        sig, codegen = found
        signed = isinstance(value, types.Integer) and value.signed
        resty = types.int32 if signed else types.uint32
        return resty(*sig.args), codegen  # the asm's i32 result is either, as it stands

    return _fixed_arity(typer, len(call.inputs))


def _fixed_arity(typer, arity: int):
    """``@intrinsic`` of ``typer(typingctx, *args)`` taking exactly ``arity`` arguments (numba
    needs the parameters spelled out)."""
    names = "".join(f", a{i}" for i in range(arity))
    namespace = {"typer": typer}
    exec(f"def asm_intrinsic(typingctx{names}):\n    return typer(typingctx{names})\n", namespace)
    return intrinsic(namespace["asm_intrinsic"])


@functools.cache
def make_fill(count: int):
    """An intrinsic returning a tuple of ``count`` copies of its argument: a packed register
    fragment's initial value."""

    @intrinsic
    def fill(typingctx, value):
        tupty = types.UniTuple(value, count)

        def codegen(context, builder, signature, args):
            return context.make_tuple(builder, tupty, [args[0]] * count)

        return tupty(value), codegen

    return fill


@functools.cache
def make_set(index: int):
    """An intrinsic returning a packed fragment with element ``index`` replaced (converted to the
    fragment's element type): ``frag[index] = value``."""

    @intrinsic
    def set_element(typingctx, fragment, value):
        if not isinstance(fragment, types.UniTuple) or not 0 <= index < len(fragment):
            return None

        def codegen(context, builder, signature, args):
            converted = context.cast(builder, args[1], signature.args[1], fragment.dtype)
            return builder.insert_value(args[0], converted, index)

        return fragment(fragment, value), codegen

    return set_element


@functools.cache
def make_splice(start: int, count: int):
    """An intrinsic returning a packed fragment whose elements ``start`` to ``start + count`` are
    replaced by those of a tuple of ``count`` values: the registers one instruction of an
    expanded tile call wrote."""

    @intrinsic
    def splice(typingctx, fragment, part):
        if (
            not isinstance(fragment, types.UniTuple)
            or not isinstance(part, types.BaseTuple)
            or len(part) != count
            or start + count > len(fragment)
        ):
            return None

        def codegen(context, builder, signature, args):
            whole = args[0]
            for k, ty in enumerate(part.types):
                value = context.cast(builder, builder.extract_value(args[1], k), ty, fragment.dtype)
                whole = builder.insert_value(whole, value, start + k)
            return whole

        return fragment(fragment, part), codegen

    return splice


def _smem_base(builder, total_bytes: int, align: int, dynamic: bool):
    """i8 addrspace(3)* to jittile's planned shared-memory block.

    Static: one module-level array with the planned alignment. Dynamic (> 48 KB): the extern array,
    whose run-time base is rounded up to ``align`` because the driver only guarantees 16 bytes there
    (the launch requests the slack).
    """
    module = builder.module
    gv = module.globals.get(SMEM_SYMBOL)
    if gv is None:
        arrty = ir.ArrayType(ir.IntType(8), 0 if dynamic else total_bytes)
        gv = cgutils.add_global_variable(module, arrty, SMEM_SYMBOL, ADDRSPACE_SHARED)
        gv.align = align
        if dynamic:
            gv.linkage = "external"
        else:
            gv.initializer = ir.Constant(arrty, ir.Undefined)
    i8s = ir.PointerType(ir.IntType(8), ADDRSPACE_SHARED)
    base = builder.bitcast(gv, i8s)
    if dynamic and align > 16:
        addr = builder.ptrtoint(base, ir.IntType(32))
        rounded = builder.and_(
            builder.add(addr, ir.Constant(ir.IntType(32), align - 1)),
            ir.Constant(ir.IntType(32), (~(align - 1)) & 0xFFFFFFFF),
        )
        delta = builder.sub(rounded, addr)
        base = builder.gep(base, [delta])
    return base


@functools.cache
def make_smem_view(offset: int, count: int, dtype, total_bytes: int, align: int, dynamic: bool):
    """An intrinsic returning a 1-D C-contiguous array of ``count`` ``dtype`` elements at byte
    ``offset`` of the planned shared block; layouts are applied by the lowered index arithmetic.
    One per distinct placement, reused across specializations like :func:`make_asm`."""
    aryty = types.Array(dtype, 1, "C")

    @intrinsic
    def smem_view(typingctx):
        def codegen(context, builder, signature, args):
            base = _smem_base(builder, total_bytes, align, dynamic)
            ptr = builder.gep(base, [ir.Constant(ir.IntType(32), offset)])
            generic = builder.addrspacecast(ptr, ir.PointerType(ir.IntType(8)), "generic")
            ary = context.make_array(aryty)(context, builder)
            itemsize = context.get_abi_sizeof(context.get_data_type(dtype))
            context.populate_array(
                ary,
                data=builder.bitcast(generic, ary.data.type),
                shape=[context.get_constant(types.intp, count)],
                strides=[context.get_constant(types.intp, itemsize)],
                itemsize=context.get_constant(types.intp, itemsize),
                meminfo=None,
            )
            return ary._getvalue()

        return aryty(), codegen

    return smem_view


@functools.cache
def make_smem_address(offset: int, total_bytes: int, align: int, dynamic: bool):
    """An intrinsic returning the 32-bit shared-window address ``offset`` bytes into the planned
    shared block: a constant address, typed once however often a kernel uses it."""

    @intrinsic
    def smem_address(typingctx):
        def codegen(context, builder, signature, args):
            base = _smem_base(builder, total_bytes, align, dynamic)
            ptr = builder.gep(base, [ir.Constant(ir.IntType(32), offset)])
            return builder.ptrtoint(ptr, ir.IntType(32))

        return types.uint32(), codegen

    return smem_address


@intrinsic
def shared_address(typingctx, array, index):
    """32-bit shared-window address of ``array[index]`` (an element of a shared buffer view)."""
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        aryty, _ = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = context.cast(builder, args[1], signature.args[1], types.intp)
        elem = builder.gep(ary.data, [idx])
        i8 = builder.bitcast(elem, ir.PointerType(ir.IntType(8)))
        shared = builder.addrspacecast(
            i8, ir.PointerType(ir.IntType(8), ADDRSPACE_SHARED), "shared"
        )
        return builder.ptrtoint(shared, ir.IntType(32))

    return types.uint32(array, index), codegen


@intrinsic
def descriptor_word(typingctx, start, fields):
    """A matrix descriptor's 64-bit word (``jittile.ir.DescriptorWord``): the constant
    ``fields`` with bits 4-17 of the shared address ``start`` in bits 0-13, computed in 32-bit
    PTX. In LLVM the same shift, mask and or come back as 64-bit operations on the address
    arithmetic numba widens (instcombine removes the truncation), a dozen SASS instructions
    per descriptor; as a pure asm on the address's low word they are three."""
    if not isinstance(start, types.Integer) or not isinstance(fields, types.IntegerLiteral):
        return None
    value = fields.literal_value
    template = (
        "{\n.reg .b32 %jt_lo, %jt_hi;\n"
        "shr.b32 %jt_lo, $1, 4;\n"
        f"and.b32 %jt_lo, %jt_lo, {START_ADDRESS_MASK};\n"
        f"or.b32 %jt_lo, %jt_lo, {value & 0xFFFFFFFF};\n"
        f"mov.b32 %jt_hi, {value >> 32};\n"
        "mov.b64 $0, {%jt_lo, %jt_hi};\n}"
    )

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        address = context.cast(builder, args[0], signature.args[0], types.uint32)
        asm = ir.InlineAsm(ir.FunctionType(i64, [i32]), template, "=l,r")
        return builder.call(asm, [address])

    return types.uint64(start, fields), codegen


@intrinsic
def global_address(typingctx, array, indices):
    """64-bit generic address of ``array[indices]`` (a global tensor element); the indices are
    integers, as in an element access."""
    if (
        not isinstance(array, types.Array)
        or not isinstance(indices, types.BaseTuple)
        or not all(isinstance(t, (types.Integer, types.Boolean)) for t in indices)
    ):
        return None

    def codegen(context, builder, signature, args):
        aryty, idxty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [
            context.cast(builder, builder.extract_value(args[1], i), t, types.intp)
            for i, t in enumerate(idxty)
        ]
        ptr = cgutils.get_item_pointer2(
            context,
            builder,
            data=ary.data,
            shape=cgutils.unpack_tuple(builder, ary.shape),
            strides=cgutils.unpack_tuple(builder, ary.strides),
            layout=aryty.layout,
            inds=idx,
        )
        return builder.ptrtoint(ptr, ir.IntType(64))

    return types.uint64(array, indices), codegen
