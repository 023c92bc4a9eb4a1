"""Diagnostics: one data model, three renderers (full, concise, json).

Every front end (the `anodize check` CLI, the mypy plugin, codegen's
`az-unsupported` errors and the runtime's `CheckError`) builds `Diagnostic`
objects through `anodize.language.messages` and renders them here.
"""

from __future__ import annotations

import json
import linecache
from collections.abc import Iterable, Sequence
from dataclasses import field
from anodize.language.records import dataclass


@dataclass(frozen=True, order=True)
class Span:
    """A source range; lines are 1-based, columns 0-based and in characters.  One that
    `syntax.Source.span` made of a node reads its fields from the node on first use."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __init__(self, path: str, line: int, col: int, end_line: int, end_col: int) -> None:
        # (the generated frozen `__init__` makes one `object.__setattr__` call a field: the
        # typer makes a span per node, and reads few of them)
        d = self.__dict__
        d["path"] = path
        d["line"] = line
        d["col"] = col
        d["end_line"] = end_line
        d["end_col"] = end_col

    def __getattr__(self, name: str) -> object:
        # a span `Source.span` made of a node: its fields read from the node on first use
        # (only a missing attribute comes here; the fields are then in the instance's dict)
        d = self.__dict__
        at = d.get("_az_at")
        if at is not None:
            d.update(at[0].span_now(at[1]).__dict__)
            d.pop("_az_at", None)
        try:
            return d[name]
        except KeyError:
            raise AttributeError(f"'Span' object has no attribute {name!r}") from None

    def __reduce__(self) -> tuple[object, ...]:
        return (Span, (self.path, self.line, self.col, self.end_line, self.end_col))

    @classmethod
    def point(cls, path: str, line: int, col: int, width: int = 1) -> Span:
        return cls(path, line, col, line, col + max(width, 1))


@dataclass(frozen=True)
class Label:
    span: Span
    text: str


@dataclass(frozen=True)
class Diagnostic:
    code: str  # "az-shared-write"
    message: str  # lowercase, no final period, code in backticks
    span: Span
    label: str = ""  # text under the primary caret
    secondary: tuple[Label, ...] = ()
    notes: tuple[str, ...] = ()
    help: str | None = None
    severity: str = "error"  # "error" | "warning" | "note"

    @property
    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.span.path, self.span.line, self.span.col, self.code)

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "path": self.span.path,
            "line": self.span.line,
            "column": self.span.col + 1,
            "end_line": self.span.end_line,
            "end_column": self.span.end_col + 1,
            "label": self.label,
            "secondary": [
                {
                    "path": lab.span.path,
                    "line": lab.span.line,
                    "column": lab.span.col + 1,
                    "end_line": lab.span.end_line,
                    "end_column": lab.span.end_col + 1,
                    "label": lab.text,
                }
                for lab in self.secondary
            ],
            "notes": list(self.notes),
            "help": self.help,
        }


class CheckError(Exception):
    """Raised when a kernel fails the static checks; its text is the full rendering."""

    def __init__(self, diagnostics: Sequence[Diagnostic], sources: dict[str, str] | None = None):
        self.diagnostics = list(diagnostics)
        # rendered on first use: the typer raises one for every kernel that fails, and
        # `anodize check` reads only its diagnostics (a module of thousands of kernels
        # rendered each failing kernel's full text and never showed it)
        self._sources = sources
        self._text: str | None = None
        super().__init__()

    def __str__(self) -> str:
        if self._text is None:
            self._text = render_full(self.diagnostics, self._sources)
        return self._text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"

    @property  # type: ignore[override]
    def args(self) -> tuple[str]:
        """The exception's arguments: its text (as the rendering at construction had it)."""
        return (str(self),)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.diagnostics,))


_LINES: dict[str, tuple[object, list[str]]] = {}  # path -> (what they were split from, the lines)


def _source_lines(path: str, sources: dict[str, str] | None) -> list[str]:
    """`path`'s lines, split once per text (a module of thousands of kernels renders an error
    for each that raises one: splitting it for each was quadratic)."""
    text: object = sources[path] if sources and path in sources else linecache.getlines(path)
    hit = _LINES.get(path)
    if hit is None or hit[0] is not text:
        if len(_LINES) >= 16:
            _LINES.clear()
        lines = text.splitlines() if isinstance(text, str) else [ln.rstrip("\n") for ln in text]  # type: ignore[attr-defined]
        hit = _LINES[path] = (text, lines)
    return hit[1]


def _frame(spans: list[tuple[Span, str, str]], lines: list[str], gutter: int) -> list[str]:
    """Code frame lines for spans (all in one file): (span, marker char, label)."""
    out: list[str] = []
    pad = " " * gutter
    shown: list[int] = sorted({s.line for s, _, _ in spans})
    prev = None
    for ln in shown:
        if prev is not None and ln > prev + 1:
            out.append(f"{pad}...")
        text = lines[ln - 1] if 0 < ln <= len(lines) else ""
        out.append(f"{str(ln).rjust(gutter - 1)} | {text}")
        for span, mark, label in sorted((x for x in spans if x[0].line == ln), key=lambda x: x[0].col):
            end = span.end_col if span.end_line == span.line else max(len(text), span.col + 1)
            width = max(end - span.col, 1)
            caret = " " * span.col + mark * width
            out.append(f"{pad}| {caret}{(' ' + label) if label else ''}")
        prev = ln
    return out


def render_one(d: Diagnostic, sources: dict[str, str] | None = None) -> str:
    """rustc-style: header, location arrow, code frame with carets, notes and help."""
    spans = [(d.span, "^", d.label)] + [(lab.span, "-", lab.text) for lab in d.secondary]
    max_line = max(s.line for s, _, _ in spans)
    gutter = len(str(max_line)) + 1
    pad = " " * gutter
    out = [f"{d.severity}[{d.code}]: {d.message}"]
    out.append(f"{' ' * (gutter - 1)}--> {d.span.path}:{d.span.line}:{d.span.col + 1}")
    out.append(f"{pad}|")
    by_path: dict[str, list[tuple[Span, str, str]]] = {}
    for item in spans:
        by_path.setdefault(item[0].path, []).append(item)
    for i, (path, group) in enumerate(by_path.items()):
        if i > 0:
            first = min(s for s, _, _ in group)
            out.append(f"{' ' * (gutter - 1)}::: {path}:{first.line}:{first.col + 1}")
            out.append(f"{pad}|")
        out.extend(_frame(group, _source_lines(path, sources), gutter))
    out.append(f"{pad}|")
    for note in d.notes:
        out.append(f"{pad}= note: {note}")
    if d.help:
        out.append(f"{pad}= help: {d.help}")
    return "\n".join(out)


def render_full(diags: Iterable[Diagnostic], sources: dict[str, str] | None = None, *, summary: bool = True) -> str:
    items = sorted(diags, key=lambda d: d.sort_key)
    body = "\n\n".join(render_one(d, sources) for d in items)
    errors = sum(1 for d in items if d.severity == "error")
    if errors and summary:
        body += f"\n\nerror: could not compile: {errors} error{'s' if errors != 1 else ''} found"
    return body


def render_concise(diags: Iterable[Diagnostic]) -> str:
    return "\n".join(
        f"{d.span.path}:{d.span.line}:{d.span.col + 1}: {d.code} {d.message}"
        for d in sorted(diags, key=lambda d: d.sort_key)
    )


def render_json(diags: Iterable[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in sorted(diags, key=lambda d: d.sort_key)], indent=2)
