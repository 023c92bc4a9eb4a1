"""The message catalogue: every diagnostic code, its summary, and one builder per message.

The CLI, the mypy plugin, codegen and the runtime all build diagnostics through
these functions, so one code always has one wording.  Add a message here, never
as a string literal at the call site.
"""

from __future__ import annotations

from .diagnostics import Diagnostic, Label, Span

# code -> one-line summary (shown by `anodize check --explain` and registered with mypy)
CODES: dict[str, str] = {
    "az-syntax": "the file does not parse as Python",
    "az-unsupported": "a construct outside the kernel subset",
    "az-type": "a type error inside a kernel",
    "az-signature": "a kernel or helper signature the language does not allow",
    "az-shared-write": "a write to a shared, read-only slice",
    "az-disjoint-index": "a disjoint slice indexed by anything but this thread's witness",
    "az-index-forge": "a forged or smuggled index witness",
    "az-index-domain": "a witness of the wrong index space for the kernel's domain",
    "az-atomic": "a plain read or write of an atomic slice",
    "az-global-write": "a kernel writing state outside its arguments",
    "az-unsafe": "an unsafe-tier operation outside `with az.unsafe():`",
    "az-barrier-divergence": "a barrier reachable under thread-dependent control flow",
    "az-contract": "a malformed launch contract",
    "az-no-contract": "a safe launch of a kernel that has no launch contract",
    "az-alias": "one buffer passed as an output and as another argument",
    "az-launch-rank": "a launch configuration of the wrong rank or block for the contract",
    "az-requires": "a launch that visibly violates a contract's `requires`",
}


def make(
    code: str,
    message: str,
    span: Span,
    *,
    label: str = "",
    secondary: tuple[Label, ...] = (),
    notes: tuple[str, ...] = (),
    help: str | None = None,
    severity: str = "error",
) -> Diagnostic:
    if code not in CODES:
        raise KeyError(f"diagnostic code {code!r} is not in the catalogue")
    return Diagnostic(code, message, span, label, secondary, notes, help, severity)


# ---- builders shared by several front ends -------------------------------------------


def syntax_error(span: Span, msg: str) -> Diagnostic:
    return make("az-syntax", f"invalid syntax: {msg}", span, label="here")


def unsupported(span: Span, construct: str, *, help: str | None = None) -> Diagnostic:
    return make(
        "az-unsupported",
        f"{construct} is not supported in a kernel",
        span,
        label="not in the kernel subset",
        notes=("kernels run a Python subset; see docs/language.md for what is supported",),
        help=help,
    )


def type_error(span: Span, msg: str, *, label: str = "", help: str | None = None) -> Diagnostic:
    return make("az-type", msg, span, label=label, help=help)


def signature(span: Span, msg: str, *, help: str | None = None) -> Diagnostic:
    return make("az-signature", msg, span, label="in this signature", help=help)
