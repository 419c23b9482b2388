"""Fragment algebra: row reductions, row scaling and the accumulator -> A-operand conversion over
wgmma register fragments, as ``@jittile.func`` helpers a kernel inlines (one scalar register per
variable, so ptxas sees plain float arithmetic and shuffles; no local memory).

Layout facts they rely on (``jittile.fragment``): in a ``(64, N)`` f32 accumulator, thread
``l`` of a warp holds rows ``g = l // 4`` and ``g + 8`` of its warp's 16; register ``i`` is on the
first row when ``i % 4 < 2``; the four threads of a quad (lanes ``4g .. 4g + 3``) share the rows,
so a row reduction is the thread's own registers, then ``shfl.sync.bfly`` over lane masks 1 and 2.
The accumulator registers ``8j .. 8j + 7`` (columns ``16j .. 16j + 15``) are, pairwise, the four
A-operand registers of k-step ``j`` of a 16-bit wgmma: ``a[m]`` packs ``acc[2m]`` (low half) and
``acc[2m + 1]``.
"""

from __future__ import annotations

from collections.abc import Callable

from .fragment import wgmma_a, wgmma_accumulator
from .frontend.fragments import FragmentVar
from .kernel import func
from .language import T

ACCUMULATOR = (
    "a float32 wgmma_accumulator fragment (T.alloc_local((64, N), 'float32', "
    "layout=wgmma_accumulator))"
)


def _described(value) -> str:
    if isinstance(value, FragmentVar):
        return f"{value.name!r}, a {value.layout!r} {value.dtype.name} fragment {value.shape}"
    return f"{type(value).__name__} {value!r}"


def _accumulator_problem(value) -> str | None:
    if (
        isinstance(value, FragmentVar)
        and value.layout == wgmma_accumulator
        and value.dtype.name == "float32"
    ):
        return None
    return f"must be {ACCUMULATOR}, got {_described(value)}"


def _on_accumulator(fn: Callable):
    """``@func`` whose ``acc`` parameter must be an f32 accumulator fragment."""
    helper = func(fn)

    def requires(values: dict):
        problem = _accumulator_problem(values.get("acc"))
        return None if problem is None else ("acc", problem)

    helper.requires = requires
    return helper


def _conversion(dtype: str):
    """``@func`` from an f32 accumulator ``acc`` into a ``dtype`` A fragment ``a`` of its shape."""

    def decorate(fn: Callable):
        helper = func(fn)

        def requires(values: dict):
            acc, a = values.get("acc"), values.get("a")
            if (problem := _accumulator_problem(acc)) is not None:
                return "acc", problem
            if not (isinstance(a, FragmentVar) and a.layout == wgmma_a and a.dtype.name == dtype):
                return "a", (
                    f"must be a {dtype} wgmma_a fragment (T.alloc_local((64, K), "
                    f"{dtype!r}, layout=wgmma_a)), got {_described(a)}"
                )
            if a.shape != acc.shape:
                return "a", (
                    f"must have the accumulator's shape {acc.shape} (columns 16j.."
                    f"16j+15 become k-step j), got {a.shape}"
                )
            return None

        helper.requires = requires
        return helper

    return decorate


@func
def quad_max(x):
    """The maximum of ``x`` over the four threads of the running thread's quad (the threads that
    share an accumulator row)."""
    x = T.fmax(x, T.cuda.shfl_xor(x, 1))
    return T.fmax(x, T.cuda.shfl_xor(x, 2))


@func
def quad_sum(x):
    """The sum of ``x`` over the four threads of the running thread's quad."""
    x = x + T.cuda.shfl_xor(x, 1)
    return x + T.cuda.shfl_xor(x, 2)


@_on_accumulator
def thread_row_max(acc):
    """``(max of row acc.row(0), max of row acc.row(2))`` over this thread's registers of an f32
    accumulator fragment (not reduced across the quad)."""
    top = T.fmax(acc[0], acc[1])
    bottom = T.fmax(acc[2], acc[3])
    for i in T.unroll(1, acc.size // 4):
        top = T.fmax(top, T.fmax(acc[4 * i], acc[4 * i + 1]))
        bottom = T.fmax(bottom, T.fmax(acc[4 * i + 2], acc[4 * i + 3]))
    return top, bottom


@_on_accumulator
def thread_row_sum(acc):
    """``(sum of row acc.row(0), sum of row acc.row(2))`` over this thread's registers of an f32
    accumulator fragment (not reduced across the quad: FlashAttention sums once, at the end)."""
    top = acc[0] + acc[1]
    bottom = acc[2] + acc[3]
    for i in T.unroll(1, acc.size // 4):
        top = top + (acc[4 * i] + acc[4 * i + 1])
        bottom = bottom + (acc[4 * i + 2] + acc[4 * i + 3])
    return top, bottom


@_on_accumulator
def row_max(acc):
    """``(max of row acc.row(0), max of row acc.row(2))`` of an f32 accumulator fragment: the
    whole row of the ``(64, N)`` tile, equal in the four threads of a quad."""
    top, bottom = thread_row_max(acc)
    top = quad_max(top)
    bottom = quad_max(bottom)
    return top, bottom


@_on_accumulator
def row_sum(acc):
    """``(sum of row acc.row(0), sum of row acc.row(2))`` of an f32 accumulator fragment: the
    whole row of the ``(64, N)`` tile, equal in the four threads of a quad."""
    top, bottom = thread_row_sum(acc)
    top = quad_sum(top)
    bottom = quad_sum(bottom)
    return top, bottom


@_on_accumulator
def scale_rows(acc, top, bottom):
    """Multiply every element of row ``acc.row(0)`` by ``top`` and of row ``acc.row(2)`` by
    ``bottom``, in place (an f32 accumulator fragment)."""
    for i in T.unroll(acc.size // 4):
        acc[4 * i] = acc[4 * i] * top
        acc[4 * i + 1] = acc[4 * i + 1] * top
        acc[4 * i + 2] = acc[4 * i + 2] * bottom
        acc[4 * i + 3] = acc[4 * i + 3] * bottom


@_on_accumulator
def exp2_rows(acc, scale, top, bottom, fma_every=0):
    """``acc = exp2(acc * scale - row_value * scale)`` in place, ``row_value`` being ``top`` for
    row ``acc.row(0)`` and ``bottom`` for ``acc.row(2)``: one ``fma`` and one ``ex2.approx`` per
    element, the softmax numerator with the scale folded into log2(e). With ``fma_every`` k (a
    compile-time int), the last of every k groups of four registers takes ``T.exp2_fma``
    instead, on the FMA pipes: the MUFU unit does a share ``1 - 1/k`` of the exponentials."""
    top_shift = -top * scale
    bottom_shift = -bottom * scale
    for i in T.unroll(acc.size // 4):
        if i % max(fma_every, 1) == fma_every - 1:  # never with fma_every 0
            acc[4 * i] = T.exp2_fma(T.fma(acc[4 * i], scale, top_shift))
            acc[4 * i + 1] = T.exp2_fma(T.fma(acc[4 * i + 1], scale, top_shift))
            acc[4 * i + 2] = T.exp2_fma(T.fma(acc[4 * i + 2], scale, bottom_shift))
            acc[4 * i + 3] = T.exp2_fma(T.fma(acc[4 * i + 3], scale, bottom_shift))
        else:
            acc[4 * i] = T.exp2(T.fma(acc[4 * i], scale, top_shift))
            acc[4 * i + 1] = T.exp2(T.fma(acc[4 * i + 1], scale, top_shift))
            acc[4 * i + 2] = T.exp2(T.fma(acc[4 * i + 2], scale, bottom_shift))
            acc[4 * i + 3] = T.exp2(T.fma(acc[4 * i + 3], scale, bottom_shift))


@_conversion("bfloat16")
def to_bf16_a(acc, a):
    """Round an f32 accumulator fragment ``(64, N)`` into a bfloat16 ``wgmma_a`` fragment
    ``(64, N)`` (nearest even, ``cvt.rn.bf16x2.f32``): the A operand of the next wgmma, in
    registers."""
    for m in T.unroll(a.size):
        a[m] = T.ptx.cvt.rn.bf16x2.f32(acc[2 * m + 1], acc[2 * m])


@_conversion("float16")
def to_f16_a(acc, a):
    """Round an f32 accumulator fragment ``(64, N)`` into a float16 ``wgmma_a`` fragment
    ``(64, N)`` (nearest even, ``cvt.rn.f16x2.f32``)."""
    for m in T.unroll(a.size):
        a[m] = T.ptx.cvt.rn.f16x2.f32(acc[2 * m + 1], acc[2 * m])
