"""`anodize check PATH... [--format full|concise|json]`.

Exit status: 0 when clean, 1 when any error is reported, 2 on a usage error.
`[tool.anodize]` in the nearest pyproject.toml (searched upwards from the first
path, else the working directory) gives `include` (what to check when no path is
given) and `exclude` (glob patterns, relative to that file, never checked).
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from pathlib import Path

from .api import CheckConfig, check_file, collect_files
from anodize.language.diagnostics import render_concise, render_full, render_json
from anodize.language.syntax import collector_paused
from .engine import Project
from .stale_artifacts import stale_artifacts


def find_config(start: Path) -> CheckConfig:
    """The settings of the nearest pyproject.toml above `start` (ValueError, located, when invalid)."""
    start = start.resolve()
    for d in [start if start.is_dir() else start.parent, *(start if start.is_dir() else start.parent).parents]:
        pp = d / "pyproject.toml"
        if pp.is_file():
            return CheckConfig.from_pyproject(pp)
    return CheckConfig(root=Path.cwd())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="anodize check", description="Check anodize kernels for races, ownership and launch errors.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: [tool.anodize] include, else .)")
    p.add_argument("--format", choices=("full", "concise", "json"), default="full", help="output format (default: full)")
    return p


def run_check(argv: Sequence[str], kept: list[object] | None = None) -> int:
    """`anodize check` with these arguments: its exit status.  With `kept`, the last module's
    analysis is left in it instead of freed (`anodize.cli.main`, whose process ends at once)."""
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as e:  # argparse already printed the usage error
        return int(e.code) if isinstance(e.code, int) else 2
    try:
        config = find_config(Path(args.paths[0]) if args.paths else Path.cwd())
        paths = args.paths or [str(config.root / p) for p in config.include] or ["."]
        skipped: list[tuple[Path, str]] = []
        files = collect_files(paths, config, skipped)
    except FileNotFoundError as e:
        print(f"anodize check: error: no such file or directory: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"anodize check: error: {e}", file=sys.stderr)
        return 2
    for path, pattern in skipped:
        where = f" in {config.source}" if config.source is not None else ""
        print(f"anodize check: {path}: not checked: excluded by `{pattern}` ([tool.anodize] exclude{where})", file=sys.stderr)
    with collector_paused():
        return _report(files, args.format, kept)


_COLLECT_EVERY = 200_000
"""Lines checked between two passes of the cyclic collector in `anodize check` (each module's
analysis leaves ~17 objects a line of cyclic garbage; the collector's own passes over a large
module's live model cost more than checking it, so it runs between modules, not during one)."""


def _report(files: list[Path], fmt: str, kept: list[object] | None = None) -> int:
    project = Project()
    diags = []
    sources: dict[str, str] = {}
    lines = 0
    for f in files:
        a = check_file(f, project)
        if a.diagnostics:
            sources[a.path] = a.source
            diags.extend(a.diagnostics)
        lines += a.source.count("\n")
        if kept is not None:  # (an earlier module's is freed here, as without `kept`)
            kept[:] = [a]
        del a
        if lines >= _COLLECT_EVERY:
            gc.collect()
            lines = 0
    stale, stale_sources = stale_artifacts(files)  # packages `anodize build` wrote, against their source
    diags.extend(stale)
    sources.update(stale_sources)
    errors = sum(1 for d in diags if d.severity == "error")
    if fmt == "json":
        print(render_json(diags))
    elif fmt == "concise":
        if diags:
            print(render_concise(diags))
    elif diags:
        print(render_full(diags, sources, summary=False) + "\n")
    if fmt != "json":
        n = len(files)
        summary = f"checked {n} file{'s' if n != 1 else ''}: "
        summary += f"{errors} error{'s' if errors != 1 else ''}" if errors else "no errors"
        print(summary, file=sys.stderr)
    return 1 if errors else 0


def main() -> None:  # `python -m anodize.checker.cli`
    raise SystemExit(run_check(sys.argv[1:]))


if __name__ == "__main__":
    main()
