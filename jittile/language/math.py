"""``T.exp2``, ``T.sqrt``, ``T.fma``...: float32 math on runtime values, one PTX instruction each
(two for ``T.exp`` and ``T.log``). Arguments convert to float32 (round to nearest even); results
are float32. docs/language.md tabulates each function's PTX and its error."""

from __future__ import annotations

from .markers import intrinsic


@intrinsic("T.exp2")
def exp2(x: float, /) -> float:
    """2 ** x, approximate (``ex2.approx.ftz.f32``: PTX has no exact form); subnormal inputs and
    results flush to zero, ``exp2(-inf)`` is 0."""


@intrinsic("T.exp2_fma")
def exp2_fma(x: float, /) -> float:
    """2 ** x without the MUFU unit: a range reduction and a degree-3 polynomial on the FMA
    and integer pipes, within a relative 8.6e-5 (2**-13.5) of 2 ** x for x in [-126, 128);
    x below -126 gives 0 (the subnormal results flushed), x >= 128 +inf. For kernels
    whose ``T.exp2`` calls outrun the SM's 16 ``ex2`` a clock (a softmax at small head
    dimensions): a share of them computed here balances the two units. The interpreter gives
    the GPU's result bit for bit."""


@intrinsic("T.exp")
def exp(x: float, /) -> float:
    """e ** x, approximate, as CUDA's ``__expf``: ``ex2.approx.ftz.f32`` of ``x * log2(e)``
    (``mul.rn.ftz.f32``); the error grows with ``|x|``."""


@intrinsic("T.log2")
def log2(x: float, /) -> float:
    """log2(x), approximate (``lg2.approx.ftz.f32``); 0 gives -inf, a negative x NaN."""


@intrinsic("T.log")
def log(x: float, /) -> float:
    """The natural logarithm, approximate, as CUDA's ``__logf``: ``lg2.approx.ftz.f32`` of x
    times ln(2) (``mul.rn.ftz.f32``)."""


@intrinsic("T.sqrt")
def sqrt(x: float, /, *, approx: bool = False) -> float:
    """The square root, correctly rounded (``sqrt.rn.f32``); ``approx=True`` gives the faster
    ``sqrt.approx.ftz.f32``."""


@intrinsic("T.rsqrt")
def rsqrt(x: float, /) -> float:
    """1 / sqrt(x), approximate (``rsqrt.approx.ftz.f32``: PTX has no exact form)."""


@intrinsic("T.rcp")
def rcp(x: float, /, *, approx: bool = False) -> float:
    """1 / x, correctly rounded (``rcp.rn.f32``); ``approx=True`` gives the faster
    ``rcp.approx.ftz.f32``."""


@intrinsic("T.fma")
def fma(a: float, b: float, c: float, /) -> float:
    """a * b + c with one rounding (``fma.rn.f32``), exact in the interpreter too."""


@intrinsic("T.fmax")
def fmax(a: float, b: float, /) -> float:
    """The larger of a and b (``max.f32``): a NaN operand gives the other one, two NaNs NaN."""


@intrinsic("T.fmin")
def fmin(a: float, b: float, /) -> float:
    """The smaller of a and b (``min.f32``): a NaN operand gives the other one, two NaNs NaN."""


@intrinsic("T.tanh")
def tanh(x: float, /) -> float:
    """The hyperbolic tangent, approximate (``tanh.approx.f32``, sm_75 and later)."""


FUNCTIONS = (exp2, exp2_fma, exp, log2, log, sqrt, rsqrt, rcp, fma, fmax, fmin, tanh)
