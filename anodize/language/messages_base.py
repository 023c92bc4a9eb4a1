"""The message catalogue's primitives: a catalogue text filled with its values (`text`,
`help_text`, `phrase`), `make`, the one constructor of a `Diagnostic` (its code checked
against the catalogue's codes), and the shape of every `az-unsupported` (`_unsupported`).
The builders are in messages.py and the modules it re-exports (messages_rules.py,
messages_races.py)."""

from __future__ import annotations

from anodize.language.catalogue import HELPS, MESSAGES, PHRASES
from anodize.language.diagnostics import Diagnostic, Label, Span


def phrase(key: str, values: dict[str, object]) -> str:
    """The phrase `key` of the catalogue, filled with `values`."""
    return PHRASES[key].format(**values)


def text(key: str, values: dict[str, object]) -> str:
    """The message `key` of the catalogue, filled with `values`."""
    return MESSAGES[key].format(**values)


def help_text(key: str | None, values: dict[str, object]) -> str | None:
    return None if key is None else HELPS[key].format(**values)

from anodize.language.codes import CODES  # (re-exported: the catalogue's codes)


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


def _unsupported(span: Span, construct: str, *, help: str | None = None) -> Diagnostic:
    return make(
        "az-unsupported",
        f"{construct} is not supported in a kernel",
        span,
        label="not in the kernel subset",
        notes=("kernels run a Python subset; see docs/language.md for what is supported",),
        help=help,
    )
