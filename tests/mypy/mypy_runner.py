"""Run mypy with the anodize plugin over the repository's fixtures (shared by tests/mypy/ and bench/).

mypy runs in a scratch root that links `fixtures/` and `examples/`, so that
`import anodize` resolves to the installed package, not to the source folder at the
repository root.  Fixture folders are not packages: a module is named by its file
(`host_kernels`), and host modules import the kernels beside them by that name.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import mypy.api

REPO = Path(__file__).resolve().parents[2]
PLUGIN = "anodize.checker.mypy_plugin"
LINKED = ("fixtures", "examples")

# `# M: code[, code]` marks an expected mypy report (any code) in host-side modules;
# kernel fixtures use the checker's own `# E: az-code` expectations (tests/harness.py).
_M_MARK = re.compile(r"#\s*M:\s*([a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*)\s*$")


@dataclass(frozen=True)
class Report:
    path: str  # relative to the repository root, e.g. "fixtures/mypy_host/mh_launch_errors.py"
    line: int
    column: int  # 0-based, as mypy's JSON gives it
    code: str | None
    severity: str  # "error" | "note"
    message: str


def write_config(root: Path, *, plugin: bool = True, strict: bool = False) -> Path:
    lines = ["[mypy]", "show_error_codes = True"]
    if plugin:
        lines.append(f"plugins = {PLUGIN}")
    if strict:
        lines.append("strict = True")
    cfg = root / ("mypy-plugin.ini" if plugin else "mypy-plain.ini")
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def make_root(tmp: Path) -> Path:
    """A scratch root with `fixtures/` and `examples/` linked in from the repository."""
    root = tmp / "root"
    root.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = root / name
        if not link.exists() and (REPO / name).exists():
            link.symlink_to(REPO / name, target_is_directory=True)
    return root


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run(
    root: Path,
    targets: Sequence[str],
    *,
    cache_dir: Path,
    plugin: bool = True,
    strict: bool = False,
    extra: Sequence[str] = (),
) -> tuple[list[Report], str, int]:
    """One mypy run from `root`; returns the parsed reports, the raw stderr and the exit status."""
    cfg = write_config(root, plugin=plugin, strict=strict)
    args = ["--config-file", str(cfg), "--cache-dir", str(cache_dir), "-O", "json", *extra, *targets]
    with _cwd(root):
        out, err, status = mypy.api.run(args)
    return parse_json(out), err, status


def parse_json(out: str) -> list[Report]:
    reports = []
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        d = json.loads(line)
        reports.append(
            Report(
                os.path.normpath(d["file"]),
                int(d["line"]),
                int(d["column"]),
                d.get("code"),
                d["severity"],
                d["message"],
            )
        )
    return reports


def mypy_marks(path: Path) -> set[tuple[int, str]]:
    """`# M: code` expectations of a host-side module, as (line, code): every report mypy
    gives there with the plugin (the az codes `anodize check` gives too, and mypy's own)."""
    marks = set()
    for no, text in enumerate(path.read_text().splitlines(), start=1):
        m = _M_MARK.search(text)
        if m:
            for code in m.group(1).split(","):
                marks.add((no, code.strip()))
    return marks


def python_files(*dirs: str) -> list[str]:
    """Every .py file under the linked folders, relative to the root (sorted)."""
    files: list[str] = []
    for d in dirs:
        base = REPO / d
        if base.is_dir():
            files.extend(str(p.relative_to(REPO)) for p in sorted(base.rglob("*.py")))
    return files
