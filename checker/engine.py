"""The rule engine: one parse, one shared kernel model, one batched visit per module.

    diags = check_module(source, path)

parses the module once with Python's own parser (`anodize/language/syntax.py`), builds the
`ModuleModel` (checker/kernel_model.py: which functions are kernels, their
contracts, and an abstract interpretation of each body, with names resolved
through `anodize/language/names.py`) and runs every rule of `checker/rules/` in a single
batched walk (`anodize/language/walk.py`).  A module that never mentions `anodize` is only
syntax-checked.  `# anodize: ignore[az-code]` on a launch-site line silences that code there.
A `Project` resolves kernels imported from other modules, for the launch-site rules.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import gc
import os
import re
from anodize.language.records import dataclass
from collections.abc import Iterator
from pathlib import Path

from anodize.language import messages
from anodize.language.diagnostics import Diagnostic, Span
from anodize.language.front import cached_front, front_for_source
from .ignore_comments import anodize_ignored_codes, anodize_ignores, ignored_codes  # noqa: F401  (the engine's API)
from .kernel_model import ModuleModel
from .kernel_values import KernelSummary
from .rules import ALL_RULES, RuleContext
from anodize.language.syntax import NestingTooDeep, Source, read_source
from anodize.language.syntax import parse as _parse
from anodize.language.walk import sub_blocks, walk_batched

@dataclass
class Analysis:
    source: str
    path: str
    model: ModuleModel | None
    diagnostics: list[Diagnostic]


def parse(source: str, path: str) -> tuple[ast.Module | None, Diagnostic | None]:
    """The module's tree, or the located `az-syntax` diagnostic Python's parser gives."""
    try:
        return _parse(source), None
    except SyntaxError as e:
        col = max((e.offset or 1) - 1, 0)
        return None, messages.syntax_error(Span.point(path, e.lineno or 1, col), (e.msg or "syntax error").rstrip("."))
    except NestingTooDeep as e:  # deeper than the checker and the compiler read
        return None, messages.nesting_too_deep(Source(source, path).span(e.node), e.limit)
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes; absurd nesting
        return None, messages.syntax_error(Span.point(path, 1, 0), (str(e) or type(e).__name__).rstrip("."))


def analyze_source(source: str, path: str, project: Project | None = None) -> Analysis:
    """Parse, model and check one module."""
    if not gc.isenabled():
        return _analyze(source, path, project)
    # The parse and the model build tens of objects per line, nearly all freed by reference
    # counting; the cyclic collector's passes over the live heap meanwhile cost about 8%.
    gc.disable()
    try:
        return _analyze(source, path, project)
    finally:
        gc.enable()


def _analyze(source: str, path: str, project: Project | None) -> Analysis:
    front = cached_front(source, path)  # the compile path built it already: no second parse
    if front is None:
        tree, err = parse(source, path)
        if tree is None:
            return Analysis(source, path, None, [err] if err else [])
        if "anodize" not in source:
            return Analysis(source, path, None, [])  # no kernel can live here
        front = front_for_source(source, path, tree)
    elif "anodize" not in source:
        return Analysis(source, path, None, [])
    model = ModuleModel(front.tree, path, source, front)
    diags: list[Diagnostic] = []
    typed: list[Diagnostic] = []
    if model.imports_anodize or model.functions:
        walk_batched(front.tree, [rule(RuleContext(model, project, diags.append, typed.append)) for rule in ALL_RULES])
    if typed:  # one error per place: the rules' own wording wins where both found one
        diags = _without_follow_ons(diags, typed, model)
        ruled = [d for d in diags if d.severity == "error"]
        taken_codes = {(d.span.line, d.code) for d in ruled}
        covered = _Coverage([r.span for r in ruled])
        diags.extend(d for d in typed if (d.span.line, d.code) not in taken_codes and not covered.covers(d.span))
    return Analysis(source, path, model, _apply_ignores(_dedupe(diags), source, model))


def _without_follow_ons(diags: list[Diagnostic], typed: list[Diagnostic], model: ModuleModel) -> list[Diagnostic]:
    """One error per root cause: a shared array whose declaration the typer refused (its shape,
    its element type) has no races of its own to report; the declaration's error is the one."""
    failed: set[str] = set()
    lines = sorted({d.span.line for d in typed if d.severity == "error"})
    for node in _statements_at(model.tree, lines):  # (an assignment is a statement)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Call):
            at = bisect.bisect_left(lines, node.lineno)  # an error line in [lineno, end_lineno]
            if at < len(lines) and lines[at] <= (node.end_lineno or node.lineno):
                callee = model.callees.get(node.value)
                if callee is not None and callee.name.startswith("shared."):
                    failed.add(node.targets[0].id)
    if not failed:
        return diags
    src = model.front.source.splitlines()

    def about_failed(d: Diagnostic) -> bool:
        if d.code != "az-shared-race" or not 0 < d.span.line <= len(src):
            return False
        m = re.match(r"[A-Za-z_][A-Za-z0-9_]*", src[d.span.line - 1][d.span.col:])
        return m is not None and m.group(0) in failed

    return [d for d in diags if not about_failed(d)]


def _statements_at(tree: ast.Module, lines: list[int]) -> Iterator[ast.stmt]:
    """Every statement (nested ones, those of nested functions and classes too) of the
    module's statements whose lines hold one of `lines` (sorted): a statement whose lines
    hold one lies in such a statement; the others are not walked."""
    for stmt in tree.body:
        at = bisect.bisect_left(lines, stmt.lineno)
        if at < len(lines) and lines[at] <= (stmt.end_lineno or stmt.lineno):
            todo = [stmt]
            while todo:
                s = todo.pop()
                yield s
                for block in sub_blocks(s):
                    todo.extend(block)


def _last(span: Span) -> tuple[int, int]:
    """The last position a span covers."""
    return (span.end_line, max(span.end_col, span.col + 1) - 1)


class _Coverage:
    """`covers(inner)`: does any of `outers` contain `inner`'s start (a rule's report of the same
    construct: from the outer's start to its `_last` position)?  The outers sorted
    by start with the running furthest end, so each question is a bisection, not a scan (a
    module of thousands of kernels has thousands of each: the scan was quadratic)."""

    def __init__(self, outers: list[Span]) -> None:
        ordered = sorted(outers, key=lambda s: (s.line, s.col))
        self._starts = [(s.line, s.col) for s in ordered]
        self._reach: list[tuple[int, int]] = []
        for s in ordered:
            self._reach.append(max(self._reach[-1], _last(s)) if self._reach else _last(s))

    def covers(self, inner: Span) -> bool:
        start = (inner.line, inner.col)
        n = bisect.bisect_right(self._starts, start)  # the outers that start at or before it
        return n > 0 and start <= self._reach[n - 1]


def check_module(source: str, path: str, project: Project | None = None) -> list[Diagnostic]:
    return analyze_source(source, path, project).diagnostics


def _dedupe(diags: list[Diagnostic]) -> list[Diagnostic]:
    """One diagnostic per line, code and message (the leftmost), as mypy shows them: mypy
    drops an error whose line and message repeat, so the editor and `anodize check` agree."""
    seen: set[tuple[str, str, int, str]] = set()
    out = []
    for d in sorted(diags, key=lambda d: d.sort_key):
        key = (d.code, d.span.path, d.span.line, d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def _apply_ignores(diags: list[Diagnostic], source: str, model: ModuleModel | None = None) -> list[Diagnostic]:
    """Ignore comments silence launch-site (host) diagnostics only: inside a kernel or helper
    `with az.unsafe():` is the escape hatch, so an ignore comment there silences nothing and
    is itself reported (`anodize check` and compile then never disagree).  On a host line,
    `# anodize: ignore` without codes, an unknown code, and a code that silences nothing
    there are reported too (`az-ignore`, like ruff's unused `noqa`)."""
    if "ignore" not in source:
        return diags
    lines = source.splitlines()
    device = _device_lines(model) if model is not None else []
    path = model.path if model is not None else (diags[0].span.path if diags else "")
    out = []
    used: set[tuple[int, str]] = set()
    for d in diags:
        ln = d.span.line
        if d.code in ignored_codes(lines[ln - 1] if 0 < ln <= len(lines) else "") and not any(a <= ln <= b for a, b in device):
            used.add((ln, d.code))
            continue
        out.append(d)
    for ln, start, end, codes in anodize_ignores(source):
        span = Span(path, ln, start, ln, end)
        if any(a <= ln <= b for a, b in device):
            out.append(messages.ignore_in_kernel(span))
        elif not codes:
            out.append(messages.ignore_bare(span))
        else:
            for code in codes:
                if code not in messages.CODES:
                    close = difflib.get_close_matches(code, list(messages.CODES), n=1)
                    out.append(messages.ignore_unknown_code(span, code, close[0] if close else None))
                elif (ln, code) not in used and code not in PLUGIN_ONLY:
                    out.append(messages.ignore_unused(span, code))
    return sorted(out, key=lambda d: d.sort_key)


# codes only the mypy plugin reports (from types the engine does not see): an ignore of
# one is never called unused, so `anodize check` and mypy agree on the same file
PLUGIN_ONLY = frozenset({"az-requires"})

def _device_lines(model: ModuleModel) -> list[tuple[int, int]]:
    """(first, last) line of every kernel and helper body."""
    out = []
    for fn in dict.fromkeys([*model.by_node.values(), *model.functions.values()]):
        if fn.is_device and fn.node.body:
            out.append((fn.node.body[0].lineno, fn.node.end_lineno or fn.node.lineno))
    return out


class Project:
    """Resolves kernels imported from other modules (for `az-no-contract`, `az-alias`, ...).

    A module `a.b` imported by `pkg/x.py` is looked up as `a/b.py` or `a/b/__init__.py`
    next to the importer and in its parent directories; a relative import from the
    importer's package.  Each module is modelled once per (path, mtime, size)."""

    def __init__(self) -> None:
        # by path: ((mtime in ns, size), the module's kernels); dmypy's worker keeps one Project
        self._models: dict[str, tuple[tuple[int, int], dict[str, KernelSummary]]] = {}

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
            st = os.stat(path)
        except OSError:
            return {}
        mtime = (st.st_mtime_ns, st.st_size)
        hit = self._models.get(path)
        if hit is not None and hit[0] == mtime:
            return hit[1]
        self._models[path] = (mtime, {})  # guards against import cycles
        try:
            source = read_source(path)
        except (OSError, SyntaxError, UnicodeDecodeError):
            return {}
        table: dict[str, KernelSummary] = {}
        if "anodize" in source:
            tree, _ = parse(source, path)
            if tree is not None:
                model = ModuleModel(tree, path, source)
                table = {f.name: model.summary(f) for f in model.kernels()}
        self._models[path] = (mtime, table)
        return table

    def _find(self, importer: str, module: str) -> str | None:
        # (os.path on strings: pathlib objects cost more than the few `stat` calls here, and
        # the mypy plugin looks up every imported name of every module it checks)
        here = os.path.dirname(os.path.realpath(importer))
        if module.startswith("."):
            dots = len(module) - len(module.lstrip("."))
            base = here
            for _ in range(dots - 1):
                base = os.path.dirname(base)
            return _module_file(base, module.lstrip("."))
        base = here
        for _ in range(7):  # the importer's directory and six of its parents
            found = _module_file(base, module)
            if found:
                return found
            parent = os.path.dirname(base)
            if parent == base:
                break
            base = parent
        return None


def _module_file(base: str, module: str) -> str | None:
    rel = os.path.join(*module.split(".")) if module else ""
    cands = (os.path.join(base, rel + ".py"), os.path.join(base, rel, "__init__.py")) if module else (os.path.join(base, "__init__.py"),)
    for cand in cands:
        if os.path.isfile(cand):
            shown = os.path.relpath(cand)
            return cand if shown.startswith("..") else shown
    return None
