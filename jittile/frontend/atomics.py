"""Lowering ``T.cuda.atomic_*`` and ``T.cuda.threadfence`` to their inline-asm statements
(jittile/ptx/atomics.py): the tensor, its element type, the index and the compile-time
``sem=`` / ``scope=`` are checked here, each with an error at the offending argument."""

from __future__ import annotations

import ast

from ..dtypes import dtype as lookup_dtype
from ..errors import ContractError
from ..language import cuda as Lcuda
from ..language.markers import Intrinsic
from ..ptx import atomics as ptx_atomics
from .emit import GLOBAL_ADDRESS
from .static import RUNTIME
from .syntax import name as _name
from .syntax import src

_SIGNED = {"int32", "int64"}  # the asm returns unsigned bits: these convert back


class AtomicLowering:
    """Global atomics and memory fences (a part of :class:`KernelLowering`)."""

    def atomic_call(self, node: ast.Call, target: Intrinsic) -> ast.expr:
        op = Lcuda.ATOMICS[target]
        array, index, *values = node.args
        dtype = self._atomic_dtype(array, op, target.qualname)
        sem, scope = self._ordering(node, target.qualname, ptx_atomics.SEMANTICS, "relaxed")
        for i, value in enumerate(values):
            self._check_atomic_value(value, dtype, target.qualname, f"operand {i + 2}")
        address = self.call(GLOBAL_ADDRESS, _name(array.id), self._atomic_index(array, index))
        asm = ptx_atomics.atomic(op, dtype, sem, scope)
        call = self.call(self.asm_name(asm), address, *[self.expr(v) for v in values])
        return self.cast(lookup_dtype(dtype), call) if dtype in _SIGNED else call

    def fence_call(self, node: ast.Call) -> ast.expr:
        sem, scope = self._ordering(
            node, Lcuda.threadfence.qualname, ptx_atomics.FENCE_SEMANTICS, "acq_rel"
        )
        return self.call(self.asm_name(ptx_atomics.fence(sem, scope)))

    # --------------------------------------------------------------------------- the checks
    def refused(self, node: ast.AST, qualname: str, parameter: str, rule: str) -> ContractError:
        """The error at ``node`` of an atomic or fence call whose ``parameter`` breaks ``rule``."""
        return ContractError(rule, self.loc(node), opcode=qualname, parameter=parameter)

    def _atomic_dtype(self, array: ast.expr, op: str, qualname: str) -> str:
        """The element type of the tensor ``array`` names, which ``op`` must take."""
        kind = self.memory_kind(array)
        if kind != "tensor":
            what = f"{kind} {src(array)!r}" if kind else f"{src(array)!r}"
            raise self.refused(
                array,
                qualname,
                "array",
                f"must be a tensor parameter (global memory), got {what}; atomics on "
                f"shared buffers, local arrays and values are not supported",
            )
        dtype = self.arrays[array.id].dtype.name
        allowed = ptx_atomics.ATOMIC_TYPES[op]
        if dtype not in allowed:
            raise self.refused(
                array,
                qualname,
                "array",
                f"tensor {array.id!r} holds {dtype} elements, but atom.{op} takes "
                f"{', '.join(allowed)} elements; pass a tensor of one of those types",
            )
        return dtype

    def _atomic_index(self, array: ast.Name, index: ast.expr) -> ast.expr:
        """The lowered index tuple: one integer per axis of the tensor."""
        indices = index.elts if isinstance(index, ast.Tuple) else [index]
        ndim = self.arrays[array.id].ndim
        if len(indices) != ndim:
            raise self.error(
                index,
                f"tensor {array.id!r} has rank {ndim}, indexed with {len(indices)} "
                f"indices; give an atomic one index per axis (a tuple for several)",
            )
        self.check_static_indices(
            indices, self.arrays[array.id].static_shape, f"tensor {array.id!r}"
        )
        return ast.Tuple(elts=[self.expr(i) for i in indices], ctx=ast.Load())

    def _check_atomic_value(self, value: ast.expr, dtype: str, qualname: str, where: str):
        """A compile-time operand is a number an element of ``dtype`` can hold."""
        static = self.static(value)
        if static is RUNTIME:
            return
        if isinstance(static, bool) or not isinstance(static, (int, float)):
            raise self.refused(
                value,
                qualname,
                where,
                f"must be a number, got {src(value)!r} ({type(static).__name__})",
            )
        if isinstance(static, float) and dtype != "float32":
            raise self.refused(
                value,
                qualname,
                where,
                f"is the float {static!r}, but the tensor holds {dtype} elements; pass an "
                f"integer (or convert with T.{dtype}(...))",
            )

    def _ordering(self, node: ast.Call, qualname: str, semantics: tuple, default: str):
        """The compile-time ``sem=`` and ``scope=`` keywords, each one of its allowed names."""
        keywords = {k.arg: k.value for k in node.keywords}
        chosen = {"sem": default, "scope": "gpu"}
        for key, allowed in (("sem", semantics), ("scope", ptx_atomics.SCOPES)):
            if key not in keywords:
                continue
            value = self.static(keywords[key])
            if value not in allowed:
                raise self.refused(
                    keywords[key],
                    qualname,
                    key,
                    f"must be a compile-time string, one of {', '.join(map(repr, allowed))}; "
                    f"got {src(keywords[key])}",
                )
            chosen[key] = value
        return chosen["sem"], chosen["scope"]
