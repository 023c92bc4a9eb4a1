"""The rule engine: one libcst parse, one shared kernel model, one batched visit per module.

    diags = check_module(source, path)

parses the module once, resolves `ScopeProvider` and `QualifiedNameProvider`
through one `MetadataWrapper` (`checker/walk.py`'s `Wrapper`, whose traversals do
not rebuild the tree; `PositionProvider` runs only over the top-level statements
that hold a reported node, `checker/positions.py`), builds the `ModuleModel`
(checker/kernel_model.py) and runs every rule of `checker/rules/` in a single
`visit_batched` pass.  A module that never mentions `anodize` is only
syntax-checked (by Python's parser).  `# anodize: ignore[az-code]`
on a line silences that code there.  A `Project` resolves kernels imported from
other modules, for the launch-site rules.
"""

from __future__ import annotations

import gc
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from . import messages
from .diagnostics import Diagnostic, Span
from .kernel_model import KernelSummary, ModuleModel
from .rules import ALL_RULES, RuleContext
from .walk import Wrapper

# `# anodize: ignore[az-x]`, and mypy's `# type: ignore[az-x]` (the codes are shared)
_IGNORE = re.compile(r"#\s*(?:anodize|type):\s*ignore\[([^\]]*)\]")


@dataclass
class Analysis:
    source: str
    path: str
    model: ModuleModel | None
    diagnostics: list[Diagnostic]


def parse(source: str, path: str) -> tuple[MetadataWrapper | None, Diagnostic | None]:
    try:
        module = cst.parse_module(source)
    except (cst.ParserSyntaxError, RecursionError, ValueError) as e:
        # Python's own parser locates and words syntax errors best; fall back to libcst's
        return None, _python_syntax_error(source, path) or messages.syntax_error(
            Span.point(path, max(getattr(e, "raw_line", 1), 1), max(getattr(e, "raw_column", 0), 0)),
            str(getattr(e, "message", e)).strip().splitlines()[0].rstrip(".") or "syntax error",
        )
    return Wrapper(module, unsafe_skip_copy=True), None  # a MetadataWrapper (checker/walk.py)


def _python_syntax_error(source: str, path: str) -> Diagnostic | None:
    try:
        compile(source, path, "exec", flags=0x400, dont_inherit=True)  # ast.PyCF_ONLY_AST
    except SyntaxError as e:
        col = max((e.offset or 1) - 1, 0)
        return messages.syntax_error(Span.point(path, e.lineno or 1, col), (e.msg or "syntax error").rstrip("."))
    except ValueError as e:  # null bytes
        return messages.syntax_error(Span.point(path, 1, 0), str(e).rstrip("."))
    return None


@contextmanager
def _gc_paused() -> Iterator[None]:
    """libcst builds tens of objects per source line, nearly all freed by reference
    counting; the cyclic collector's passes over the live heap while they pile up cost
    about a quarter of a module's check.  Pause it for one module (restored after)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def analyze_source(source: str, path: str, project: Project | None = None) -> Analysis:
    """Parse, model and check one module."""
    if "anodize" not in source:
        # no kernel can live here; only make sure the file parses (cheaply)
        err = _python_syntax_error(source, path)
        return Analysis(source, path, None, [err] if err else [])
    with _gc_paused():
        return _analyze(source, path, project)


def _analyze(source: str, path: str, project: Project | None) -> Analysis:
    wrapper, err = parse(source, path)
    if wrapper is None:
        return Analysis(source, path, None, [err] if err else [])
    model = ModuleModel(wrapper, path, source)
    diags: list[Diagnostic] = []
    if model.imports_anodize or model.functions:
        ctx = RuleContext(model, project, diags.append)
        if isinstance(wrapper, Wrapper):
            wrapper.on_statement = model.positions.enter  # a reported node is looked up there first
        wrapper.visit_batched([rule(ctx) for rule in ALL_RULES])
        model.positions.current = None
    return Analysis(source, path, model, _apply_ignores(_dedupe(diags), source))


def check_module(source: str, path: str, project: Project | None = None) -> list[Diagnostic]:
    return analyze_source(source, path, project).diagnostics


def _dedupe(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple[str, Span, str]] = set()
    out = []
    for d in diags:
        key = (d.code, d.span, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return sorted(out, key=lambda d: d.sort_key)


def _apply_ignores(diags: list[Diagnostic], source: str) -> list[Diagnostic]:
    if "ignore[" not in source:
        return diags
    lines = source.splitlines()
    out = []
    for d in diags:
        ln = d.span.line
        text = lines[ln - 1] if 0 < ln <= len(lines) else ""
        codes = {c.strip() for m in _IGNORE.finditer(text) for c in m.group(1).split(",")}
        if d.code in codes:
            continue
        out.append(d)
    return out


class Project:
    """Resolves kernels imported from other modules (for `az-no-contract`, `az-alias`, ...).

    A module `a.b` imported by `pkg/x.py` is looked up as `a/b.py` or `a/b/__init__.py`
    next to the importer and in its parent directories; a relative import from the
    importer's package.  Each module is modelled once per (path, mtime)."""

    def __init__(self) -> None:
        self._models: dict[str, tuple[float, dict[str, KernelSummary]]] = {}

    def lookup(self, importer: str, qualname: str) -> KernelSummary | None:
        module, _, name = qualname.rpartition(".")
        if not module:
            return None
        path = self._find(importer, module)
        if path is None or os.path.abspath(path) == os.path.abspath(importer):
            return None
        return self.kernels(path).get(name)

    def kernels(self, path: str) -> dict[str, KernelSummary]:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            return {}
        hit = self._models.get(path)
        if hit is not None and hit[0] == mtime:
            return hit[1]
        self._models[path] = (mtime, {})  # guards against import cycles
        try:
            source = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return {}
        table: dict[str, KernelSummary] = {}
        if "anodize" in source:
            with _gc_paused():
                wrapper, _ = parse(source, path)
                if wrapper is not None:
                    model = ModuleModel(wrapper, path, source)
                    table = {f.name: model.summary(f) for f in model.kernels()}
        self._models[path] = (mtime, table)
        return table

    def _find(self, importer: str, module: str) -> str | None:
        here = Path(importer).resolve().parent
        if module.startswith("."):
            dots = len(module) - len(module.lstrip("."))
            base = here
            for _ in range(dots - 1):
                base = base.parent
            return _module_file(base, module.lstrip("."))
        for base in [here, *list(here.parents)[:6]]:
            found = _module_file(base, module)
            if found:
                return found
        return None


def _module_file(base: Path, module: str) -> str | None:
    rel = Path(*module.split(".")) if module else Path()
    for cand in (base / rel.with_suffix(".py") if module else None, base / rel / "__init__.py"):
        if cand is not None and cand.is_file():
            shown = os.path.relpath(cand)
            return str(cand) if shown.startswith("..") else shown
    return None
