"""Lowering ``T.exp2``... and ``T.cuda.shfl_*`` calls to their inline-asm statements
(jittile/ptx/math.py): the compile-time keywords (``approx=``, ``width=``) pick the statement
or its operand here."""

from __future__ import annotations

import ast

from ..language import math as Lmath
from ..language.cuda import FULL_MASK, SHUFFLES
from ..language.markers import Intrinsic
from ..ptx import math as ptx_math
from .syntax import src


def is_math(target: Intrinsic) -> bool:
    return target in Lmath.FUNCTIONS or target in SHUFFLES


class MathLowering:
    """Math functions and warp shuffles (a part of :class:`KernelLowering`)."""

    def math_call(self, node: ast.Call, target: Intrinsic) -> ast.expr:
        keywords = {k.arg: k.value for k in node.keywords}
        if target in SHUFFLES:
            return self._shuffle(node, SHUFFLES[target], keywords)
        approx = False
        if "approx" in keywords:
            approx = self.static(keywords["approx"])
            if not isinstance(approx, bool):
                raise self.error(
                    keywords["approx"],
                    f"{target.qualname}(approx=...) must be a "
                    f"compile-time True or False, got "
                    f"{src(keywords['approx'])!r}",
                )
        call = ptx_math.MATH[target.__name__, approx]
        return self.call(self.asm_name(call), *[self.expr(a) for a in node.args])

    def _shuffle(self, node: ast.Call, mode: str, keywords: dict) -> ast.expr:
        width = 32
        if "width" in keywords:
            width = self.static(keywords["width"])
            if (
                not isinstance(width, int)
                or isinstance(width, bool)
                or width not in (1, 2, 4, 8, 16, 32)
            ):
                raise self.error(
                    keywords["width"],
                    f"T.cuda.shfl_{_NAMES[mode]} width="
                    f"{src(keywords['width'])} must be a "
                    f"compile-time power of two from 1 to 32 "
                    f"(the lanes of a segment)",
                )
        mask = self.expr(keywords["mask"]) if "mask" in keywords else ast.Constant(value=FULL_MASK)
        value, lane = (self.expr(a) for a in node.args)
        clamp = ast.Constant(value=ptx_math.clamp_operand(mode, width))
        return self.call(self.asm_name(ptx_math.shuffle(mode)), value, lane, clamp, mask)


_NAMES = {mode: function.__name__.removeprefix("shfl_") for function, mode in SHUFFLES.items()}
