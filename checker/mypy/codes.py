"""The catalogue's `az-*` codes as mypy `ErrorCode`s, and the bridge from a Diagnostic to mypy.

Registering a code with mypy (constructing the `ErrorCode`) is what makes
`# type: ignore[az-alias]` and `--disable-error-code az-requires` work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mypy.errorcodes import ErrorCode
from mypy.nodes import Context
from mypy.plugin import CheckerPluginInterface

from anodize.language.codes import CODES

if TYPE_CHECKING:  # (the plugin's import, on every mypy run, builds no diagnostics class)
    from anodize.language.diagnostics import Diagnostic

CATEGORY = "anodize"

ERROR_CODES: dict[str, ErrorCode] = {code: ErrorCode(code, summary, CATEGORY) for code, summary in CODES.items()}


def error_code(code: str) -> ErrorCode:
    """The mypy code for an `az-*` code (registered on first use if the catalogue grew)."""
    found = ERROR_CODES.get(code)
    if found is None:
        found = ERROR_CODES[code] = ErrorCode(code, CODES.get(code, code), CATEGORY)
    return found


def located(line: int, col: int, end_line: int | None = None, end_col: int | None = None) -> Context:
    """A mypy Context at a 1-based line and 0-based column (mypy's own conventions)."""
    ctx = Context(line, col)
    ctx.end_line = end_line if end_line is not None else line
    ctx.end_column = end_col if end_col is not None else col + 1
    return ctx


def report(api: CheckerPluginInterface, diag: Diagnostic, ctx: Context | None = None, *, final: bool = False) -> None:
    """Report `diag` through mypy at its own span (or at `ctx`), with its code and message.

    Errors become mypy errors; notes and warnings become mypy notes (a warning must not
    fail a mypy run).  A help line follows as a note on the same line.

    `final`: the engine's result, whose ignore comments the engine has applied already (on
    host lines they silence, inside a kernel they silence nothing: `with az.unsafe():` is the
    escape hatch there).  mypy's own `# type: ignore` on the line must not hide it a second
    time, so that mypy shows what `anodize check` prints; `--disable-error-code` still applies.
    """
    if ctx is None:
        s = diag.span
        ctx = located(s.line, s.col, s.end_line, s.end_col)
    code = error_code(diag.code)
    severity = "error" if diag.severity == "error" else "note"
    _report(api, diag.message, ctx, code, severity, final)
    if diag.help:
        _report(api, f"help: {diag.help}", ctx, code, "note", final)


def _report(api: CheckerPluginInterface, msg: str, ctx: Context, code: ErrorCode, severity: str, final: bool) -> None:
    errors = getattr(api.msg, "errors", None)
    if final and errors is not None:
        try:  # mypy applies ignore comments on the lines of `origin_span`: line 0 has none
            errors.report(
                ctx.line, ctx.column, msg, code=code, severity=severity, origin_span=[0],
                end_line=ctx.end_line, end_column=ctx.end_column,
            )
            return
        except TypeError:  # a mypy whose Errors.report differs: as any other error
            pass
    if severity == "error":
        api.fail(msg, ctx, code=code)
    else:
        api.msg.note(msg, ctx, code=code)
