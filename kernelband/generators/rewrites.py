"""Patterns of a kernel body the rewrites share: simple assignments, multiples of a
BLOCK, ``tl.arange`` offsets, and whether the kernel writes what it reads. The rewrite
families themselves live under ``code/`` (``coderewrites.py`` lists the code rewrites)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from ..access import analyze_kernel
from .edits import int_value
from .space import SpaceFinder


class Rewrites(SpaceFinder):
    @staticmethod
    def simple_assign(stmt: cst.CSTNode) -> tuple[Optional[str], Optional[cst.BaseExpression]]:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            return None, None
        a = stmt.body[0]
        if isinstance(a, cst.Assign) and len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name):
            return a.targets[0].target.value, a.value
        return None, None

    def multiple_of_block(self, e: cst.BaseExpression) -> Optional[str]:
        """``x * B`` or ``B * x`` with B a constexpr parameter -> B."""
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Multiply):
            for side in (e.left, e.right):
                if isinstance(side, cst.Name) and side.value in self.constexprs:
                    return side.value
        return None

    def arange_block(self, e: cst.BaseExpression) -> Optional[str]:
        if self.is_lang_call(e, "arange"):
            args = e.args
            if len(args) == 2 and int_value(args[0].value) == 0 and isinstance(args[1].value, cst.Name):
                return args[1].value.value
        return None

    def arange_lang(self, e: cst.BinaryOperation) -> str:
        """How ``e``'s ``tl.arange`` spells triton.language (``tl`` if neither side is one)."""
        for side in (e.left, e.right):
            # arange_block matches only a call of an attribute: the isinstance checks just narrow
            if self.arange_block(side) and isinstance(side, cst.Call) and isinstance(side.func, cst.Attribute):
                return self.code(side.func.value)
        return "tl"

    def offsets_block(self, e: cst.BaseExpression, products: dict[str, str]) -> Optional[str]:
        if not (isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Add)):
            return None
        for ar, other in ((e.left, e.right), (e.right, e.left)):
            b = self.arange_block(ar)
            if not b or b not in self.constexprs:
                continue
            if self.multiple_of_block(other) == b:
                return b
            if isinstance(other, cst.Name) and products.get(other.value) == b:
                return b
        return None

    def in_place_or_atomic(self) -> bool:
        """Atomics, or a pointer parameter the kernel (or a helper it calls) both loads
        from and stores to: the pointer-access analysis of kernelband/access.py."""
        return analyze_kernel(self.source, self.kernel).in_place()
