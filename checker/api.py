"""The checker's entry points: `check_source`, `check_paths` and `enforce_kernel`.

    check_source(source, path)        -> list[Diagnostic]   (one module)
    check_paths(paths, config)        -> list[Diagnostic]   (files and directories)
    enforce_kernel(kernel)            -> None, or raises CheckError (the compile path)
"""

from __future__ import annotations

import ast
import difflib
import fnmatch
import os
import re
import tomllib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import field
from anodize.language.records import dataclass
from pathlib import Path
from typing import Any

from anodize.language import messages
from anodize.language.diagnostics import CheckError, Diagnostic, Span
from anodize.language.front import ModuleFront, kernel_of
from anodize.language.syntax import read_source
from .engine import Analysis, Project, analyze_source
from .kernel_slice import slice_analysis

__all__ = ["CheckConfig", "check_source", "check_paths", "collect_files", "enforce_kernel", "kernel_errors", "analysis_of", "CheckError"]


@dataclass
class CheckConfig:
    """`[tool.anodize]` settings: `include` (checked when no path is given), `exclude` globs."""

    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    root: Path = field(default_factory=Path.cwd)  # the directory of the pyproject.toml
    source: Path | None = None  # the pyproject.toml the settings came from

    KEYS = ("include", "exclude")  # the keys `[tool.anodize]` may hold

    @classmethod
    def from_pyproject(cls, path: Path) -> CheckConfig:
        """The settings of `path`'s `[tool.anodize]` (defaults when it has none); ValueError,
        located, for a file that does not parse, an unknown key or a value of the wrong type."""
        try:
            text = path.read_text(encoding="utf-8")
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as e:
            raise ValueError(f"cannot read {path}: {e}") from None
        section = data.get("tool", {}).get("anodize", {})
        if not isinstance(section, dict):
            raise ValueError(f"{path}: `tool.anodize` must be a table (`[tool.anodize]`)")
        for key in section:
            if key not in cls.KEYS:
                close = difflib.get_close_matches(key, cls.KEYS, n=1)
                hint = f"; did you mean `{close[0]}`?" if close else ""
                known = ", ".join(f"`{k}`" for k in cls.KEYS)
                raise ValueError(
                    f"{path}:{_key_line(text, key)}: unknown key `{key}` in `[tool.anodize]`{hint} (known keys: {known})"
                )
        lists = {k: section.get(k, []) for k in cls.KEYS}
        for key, value in lists.items():
            if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
                raise ValueError(
                    f"{path}:{_key_line(text, key)}: `[tool.anodize]` `{key}` must be a list of strings, got {value!r}"
                )
        return cls(list(lists["include"]), list(lists["exclude"]), path.parent, path)

    def excluded(self, path: Path) -> bool:
        return self.excluded_by(path) is not None

    def excluded_by(self, path: Path) -> str | None:
        """The `exclude` pattern that matches `path`, or None."""
        try:
            rel = path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            rel = path.as_posix()
        for pat in self.exclude:
            p = pat.rstrip("/")
            if fnmatch.fnmatch(rel, p) or rel == p or rel.startswith(p + "/") or fnmatch.fnmatch(path.name, p):
                return pat
        return None


def _key_line(text: str, key: str) -> int:
    """The line of `key = ...` inside `[tool.anodize]` (1 when it cannot be found)."""
    in_section = False
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if s.startswith("["):
            in_section = re.fullmatch(r"\[\s*tool\s*\.\s*anodize\s*\]", s.split("#")[0].strip()) is not None
            if s.split("#")[0].strip().replace(" ", "").startswith(f"[tool.anodize.{key}]"):
                return n
        elif in_section and re.match(rf"""\s*("{re.escape(key)}"|'{re.escape(key)}'|{re.escape(key)})\s*=""", line):
            return n
    for n, line in enumerate(text.splitlines(), start=1):  # `tool.anodize.key = ...` forms
        if re.match(rf"\s*tool\s*\.\s*anodize\s*\.\s*{re.escape(key)}\s*=", line) or re.match(
            rf"\s*anodize\s*\.\s*{re.escape(key)}\s*=", line
        ):
            return n
    return 1


def check_source(source: str, path: str, project: Project | None = None) -> list[Diagnostic]:
    """Check one module's source; a file that does not parse gives one `az-syntax` diagnostic."""
    return analyze_source(source, path, project if project is not None else Project()).diagnostics


_SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", ".pytest_cache", "build", "dist"}


def collect_files(
    paths: Iterable[str | Path], config: CheckConfig | None = None, skipped: list[tuple[Path, str]] | None = None
) -> list[Path]:
    """The .py/.pyi files under `paths`, minus the config's excludes, sorted.  `skipped`, when
    given, receives `(path, pattern)` for each path named in `paths` that an exclude matches."""
    config = config or CheckConfig()
    if skipped is not None:
        for p in map(Path, paths):
            pat = config.excluded_by(p) if p.exists() else None
            if pat is not None:
                skipped.append((p, pat))
    out: set[Path] = set()
    for p in map(Path, paths):
        if p.is_dir():
            for dirpath, dirnames, filenames in os.walk(p):
                dirnames[:] = sorted(
                    d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info")
                    and not config.excluded(Path(dirpath) / d)
                )
                for f in filenames:
                    if f.endswith((".py", ".pyi")):
                        out.add(Path(dirpath) / f)
        elif p.exists():
            out.add(p)
        else:
            raise FileNotFoundError(str(p))
    return sorted(f for f in out if not config.excluded(f))


def check_paths(paths: Sequence[str | Path], config: CheckConfig | None = None) -> list[Diagnostic]:
    """Check every Python file under `paths` (raises FileNotFoundError for a missing path)."""
    project = Project()
    diags: list[Diagnostic] = []
    for f in collect_files(paths, config):
        diags.extend(check_file(f, project).diagnostics)
    return diags


def check_file(path: Path, project: Project | None = None) -> Analysis:
    """One file's analysis; a file that cannot be read (a dangling link, no permission, a FIFO)
    or decoded is one located diagnostic, never an exception: `anodize check DIR` goes on."""
    where = Span.point(str(path), 1, 0)
    try:
        source = read_source(path)
    except UnicodeDecodeError as e:
        return Analysis("", str(path), None, [messages.not_decodable(where, e.encoding, e.reason)])
    except SyntaxError as e:  # an unknown encoding on the coding line
        return Analysis("", str(path), None, [messages.syntax_error(Span.point(str(path), e.lineno or 1, 0), e.msg or "")])
    except OSError as e:
        return Analysis("", str(path), None, [messages.unreadable_file(where, e.strerror or str(e))])
    return analyze_source(source, str(path), project if project is not None else Project())


# ---- the compile path --------------------------------------------------------------------------

_CACHE: OrderedDict[str, tuple[str, Analysis]] = OrderedDict()
_CACHE_KEEP = 64  # modules (as the front end's own cache): a process that compiles generated modules stays bounded


def analysis_of(front: ModuleFront) -> Analysis:
    """The checker's analysis of one module front (once per path and source)."""
    hit = _CACHE.get(front.path)
    if hit is not None and hit[0] == front.digest and (hit[1].model is None or hit[1].model.front is front):
        _CACHE.move_to_end(front.path)
        return hit[1]
    result = analyze_source(front.source, front.path, Project())
    _CACHE[front.path] = (front.digest, result)
    _CACHE.move_to_end(front.path)
    while len(_CACHE) > _CACHE_KEEP:
        _CACHE.popitem(last=False)
    return result


def kernel_errors(analysis: Analysis, fdef: ast.FunctionDef) -> list[Diagnostic]:
    """The errors `anodize check` reports inside a kernel, its contract and every helper it
    calls: exactly what blocks compiling it."""
    model = analysis.model
    info = model.by_node.get(fdef) if model is not None else None
    if info is None:
        return [d for d in analysis.diagnostics if d.severity == "error"]
    regions = []
    for f in model.callees_of(info):  # type: ignore[union-attr]
        start = model.span(f.node.decorator_list[0] if f.node.decorator_list else f.node)  # type: ignore[union-attr]
        end = model.span(f.node)  # type: ignore[union-attr]
        regions.append((start.line, end.end_line))
    return [d for d in analysis.diagnostics if d.severity == "error" and any(a <= d.span.line <= b for a, b in regions)]


def _gate_analysis(front: ModuleFront, fdef: ast.FunctionDef) -> tuple[Analysis, ast.FunctionDef]:
    """The analysis the compile gate reads for one kernel, and the kernel's `def` in it: the
    module's when it is at hand (or small), else the kernel's slice (checker/kernel_slice.py)."""
    hit = _CACHE.get(front.path)
    if hit is not None and hit[0] == front.digest and (hit[1].model is None or hit[1].model.front is front):
        return hit[1], fdef
    sliced = slice_analysis(front, fdef)
    return sliced if sliced is not None else (analysis_of(front), fdef)


def enforce_kernel(kernel: Any) -> Any:
    """The typed model (`ir.KernelIR`) of a kernel whose checks pass; else raise `CheckError`
    (its text the full rendering) when the kernel, its contract or an `@az.func` helper it
    calls breaks a rule or does not type.  Call-site rules elsewhere in the module
    (`az-alias`, `az-no-contract`, ...) do not block compiling."""
    fn = getattr(kernel, "fn", kernel)
    front, fdef = kernel_of(fn)
    analysis, gate_fdef = _gate_analysis(front, fdef)
    model = analysis.model
    sources = {front.path: front.source}
    if model is None:  # nothing anodize could see (no kernel can live in it)
        raise CheckError(analysis.diagnostics or [messages.kernel_source_unavailable(
            Span.point(front.path, fdef.lineno, 0), fdef.name)], sources) from None
    info = model.by_node.get(gate_fdef)
    if info is None or info.kind != "kernel":
        raise CheckError(
            [messages.unsupported_here(
                front.src.name_span(fdef), "kernel-checker-see",
                help="decorate-az-kernel-imported", name=fdef.name)],
            sources,
        ) from None
    mine = kernel_errors(analysis, gate_fdef)
    if mine:
        raise CheckError(mine, sources) from None
    spec = getattr(kernel, "spec", None)
    # a specialisation is typed as itself; a generic kernel as each member, like `anodize check`
    for s in [tuple(spec)] if spec else front.members(fdef):
        typed = front.typed(fdef, s)
        if typed.ir is None:
            raise CheckError(list(typed.diagnostics), sources) from None
    return typed.ir
