"""`@typing.no_type_check` on a kernel or helper must not hide its anodize errors from mypy, as
`# type: ignore` cannot (`anodize check` reports them either way).

mypy skips a `no_type_check` function whole, its decorators included, so none of the plugin's
hooks runs there; in a module whose kernels are all marked so, the module's engine results
would never be reported.  Right after parsing such a module (`get_additional_deps`), one
module-level call of `anodize.runtime.device.device` (a reporting call, `kernels.on_anodize_call`),
under a private name, is added at the first marked decorator's line: checking it reports the
module's engine results, and nothing runs it."""

from __future__ import annotations

from mypy.nodes import CallExpr, Decorator, Expression, ExpressionStmt, ImportFrom, MemberExpr, MypyFile, NameExpr

__all__ = ["report_hidden_kernels"]

# the final name of a decorator that makes a function a kernel or a helper (`az.kernel`, `kernel`)
_ANODIZE_DECORATORS = frozenset({"kernel", "func", "tile_kernel", "launch_contract"})
_PROBE_MODULE = "anodize.runtime.device"
_PROBE_NAME = "__anodize_report__"
_PRI_HIGH = 5  # mypy.build.PRI_HIGH: a top-level `from X import y`


def _final_name(e: Expression) -> str | None:
    if isinstance(e, CallExpr):
        e = e.callee
    if isinstance(e, (NameExpr, MemberExpr)):
        return e.name
    return None


def report_hidden_kernels(tree: MypyFile) -> list[tuple[int, str, int]]:
    """Add the reporting call to a module with a `no_type_check` kernel or helper; the
    dependency it adds (for `get_additional_deps`), or none."""
    for d in tree.defs:
        if not isinstance(d, Decorator):
            continue
        names = {_final_name(e) for e in d.decorators}
        if "no_type_check" in names and names & _ANODIZE_DECORATORS:
            line = d.decorators[0].line
            imp = ImportFrom(_PROBE_MODULE, 0, [("device", _PROBE_NAME)])
            call = ExpressionStmt(CallExpr(NameExpr(_PROBE_NAME), [], [], []))
            for node in (imp, call, call.expr, call.expr.callee):  # type: ignore[attr-defined]
                node.set_line(line)
            imp.is_top_level = True
            tree.defs.extend((imp, call))
            tree.imports.append(imp)
            return [(_PRI_HIGH, _PROBE_MODULE, line)]
    return []
