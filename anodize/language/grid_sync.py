"""Where `az.grid.sync()` may stand: every thread of the grid must reach it, the same number of
times.  The checker's divergence rule (az-barrier-divergence) sees control flow that depends on
the thread; a grid-wide barrier also deadlocks under control flow that is uniform in a block
but differs between blocks (a block collective's result, a block id, an atomic's value).  The
rule here is positional and conservative:

* the call is a statement of the kernel's own body (never a helper's), nested only in `with`
  blocks and in `for` loops over a `range` whose bounds are grid-uniform (literals, module
  constants, integer scalar parameters, `len(p)`/`p.shape[k]` of a parameter, and arithmetic
  on them);
* no `return` comes before it, and no `return`, `break` or `continue` is inside a loop around it.

Anything else is az-barrier-divergence at the call, with the statement that may make a block
skip it.  A grid whose threads all reach every `az.grid.sync()` the same number of times
cannot deadlock on one (with a cooperative launch, every block is resident)."""

from __future__ import annotations

import ast
from collections.abc import Callable

__all__ = ["grid_sync_placement"]

_EXITS = (ast.Return, ast.Break, ast.Continue)


def grid_sync_placement(fdef: ast.FunctionDef, is_sync: Callable[[ast.Call], bool], is_range: Callable[[ast.expr], bool],
                        uniform: Callable[[ast.expr], bool]) -> list[tuple[ast.Call, ast.AST, str]]:
    """Each `az.grid.sync()` call of `fdef` that not every thread may reach, with the node that
    may make a block skip it and why: "return", "leave" or "control" (messages.grid_sync_divergence)."""
    out: list[tuple[ast.Call, ast.AST, str]] = []

    def syncs(node: ast.AST) -> list[ast.Call]:
        return [c for c in ast.walk(node) if isinstance(c, ast.Call) and is_sync(c)]

    def body(stmts: list[ast.stmt], blocked: tuple[ast.AST, str] | None) -> tuple[ast.AST, str] | None:
        for s in stmts:
            found = syncs(s)
            if found and blocked is not None:
                out.extend((c, *blocked) for c in found)
            elif found and isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and is_sync(s.value):
                pass  # a statement of its own, reached by every thread
            elif found and isinstance(s, ast.With):
                body(s.body, None)
            elif found and isinstance(s, ast.For) and _uniform_range(s.iter, is_range, uniform) and not s.orelse:
                leave = next((e for e in ast.walk(s) if isinstance(e, _EXITS)), None)
                if leave is not None:
                    out.extend((c, leave, "leave") for c in found)
                else:
                    body(s.body, None)
            elif found:
                out.extend((c, _head(s), "control") for c in found)
            if blocked is None:
                ret = next((e for e in ast.walk(s) if isinstance(e, ast.Return)), None)
                if ret is not None:
                    blocked = (ret, "return")
        return blocked

    body(fdef.body, None)
    return out


def _head(s: ast.stmt) -> ast.AST:
    """The part of a compound statement that decides where control goes."""
    if isinstance(s, (ast.If, ast.While)):
        return s.test
    if isinstance(s, ast.For):
        return s.iter
    return s


def _uniform_range(it: ast.expr, is_range: Callable[[ast.expr], bool], uniform: Callable[[ast.expr], bool]) -> bool:
    return isinstance(it, ast.Call) and is_range(it.func) and not it.keywords and all(uniform(a) for a in it.args)


def uniform_expr(e: ast.expr, is_name_uniform: Callable[[ast.Name], bool], is_param: Callable[[str], bool]) -> bool:
    """Whether `e` has one value on every thread of the grid: literals, names `is_name_uniform`
    accepts (module constants, integer scalar parameters), `len(p)` and `p.shape[k]` of a
    parameter `p`, and arithmetic on them."""
    if isinstance(e, ast.Constant):
        return isinstance(e.value, int)
    if isinstance(e, ast.Name):
        return is_name_uniform(e)
    if isinstance(e, ast.BinOp):
        return uniform_expr(e.left, is_name_uniform, is_param) and uniform_expr(e.right, is_name_uniform, is_param)
    if isinstance(e, ast.UnaryOp):
        return uniform_expr(e.operand, is_name_uniform, is_param)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "len" and len(e.args) == 1:
        a = e.args[0]
        return isinstance(a, ast.Name) and is_param(a.id)
    if isinstance(e, ast.Subscript) and isinstance(e.value, ast.Attribute) and e.value.attr == "shape":
        return isinstance(e.value.value, ast.Name) and is_param(e.value.value.id) and isinstance(e.slice, ast.Constant)
    return False
