"""The typed model of one function body, keyed by its source: what the typer gave each
expression and each local.

The typer (`typer.py`) types a kernel once per specialisation, and each `@az.func` helper
once per tuple of argument types it is called with.  Every such typing of a body leaves an
`FnTypes`: the `def`, the typed IR expression (`ir.Expr`, with its exact type: width and
signedness) of each `ast.expr` it typed, and the type of each local and scalar parameter.
`front.typed(fdef, spec).views` holds those of a kernel typing (the kernel's own body and
every helper body typed for it); `front.helper_types(fdef)` types a helper on its own, from
its annotations.  The checker's analyses read types here (never from the syntax): an
expression missing from `exprs` is one the typer did not reach (a statement that failed to
type), of unknown type.
"""

from __future__ import annotations

import ast
from anodize.language.records import dataclass
from typing import Any

from anodize.language.types import ScalarTy, Ty

__all__ = ["FnTypes"]


@dataclass(frozen=True, eq=False)
class FnTypes:
    fdef: ast.FunctionDef
    exprs: dict[ast.AST, Any]  # ast node -> the typed IR expression (`ir.Expr`) the typer made of it
    vars: dict[str, Ty]  # local or scalar/witness parameter -> its type (a local's first binding's)
    spec: tuple[tuple[str, Any], ...] = ()  # the kernel specialisation it was typed under
    # `az.Constant` parameters typed without a value (as a parameter of their type): at a
    # specialisation each is a weak literal instead, so what depends on one may type otherwise
    unknown: frozenset[str] = frozenset()

    def ty(self, node: ast.AST) -> Ty | None:
        e = self.exprs.get(node)
        return None if e is None else e.ty  # type: ignore[no-any-return]

    def scalar(self, node: ast.AST) -> ScalarTy | None:
        t = self.ty(node)
        return t if isinstance(t, ScalarTy) else None

    def weak(self, node: ast.AST) -> bool:
        """An untyped literal (or a fold of literals): it adopts the other operand's type."""
        return bool(getattr(self.exprs.get(node), "weak", False))
