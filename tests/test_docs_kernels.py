"""Every code block of README.md and docs/*.md that defines a kernel passes `anodize check`
(a block that shows an error marks it with `# E: az-code` on its line), and a complete block
(its own imports, a device and a launch) runs on the CPU backend.  A block without imports is a
fragment: it is checked below the imports the docs take for granted (`import anodize as
az`, the public names of `anodize`, `typing`'s `TypeVar`/`Final`/`cast`, NumPy, `math`)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import anodize
from anodize.checker.api import check_source
from anodize.language.front import front_for_source
from harness import expectations_from_source

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_PUBLIC = sorted(n for n in anodize.__all__ if not n.startswith("_") and n != "math")  # `math`: Python's
PREAMBLE = (
    "import math\nfrom typing import Final, TypeVar, cast\n\nimport numpy as np\n\nimport anodize as az\n"
    f"from anodize import {', '.join(_PUBLIC)}\n"
)


def _blocks(path: Path) -> list[tuple[int, str]]:
    """(first line, text) of each fenced block tagged python or untagged."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    out, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            info = lines[i][3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if info in ("", "python", "py"):
                out.append((i + 2, "".join(lines[i + 1 : j])))
            i = j + 1
        else:
            i += 1
    return out


def _source(code: str) -> str:
    return code if re.search(r"^(import|from) \w", code, re.M) else PREAMBLE + code


def _kernel_blocks() -> list[tuple[str, str]]:
    out = []
    for path in DOCS:
        for line, code in _blocks(path):
            if "kernel" not in code:
                continue
            try:
                front = front_for_source(_source(code), "<doc>")
                kernels = [f for _, f in front.functions() if front.symbols.function_kind(f) == "kernel"]
            except SyntaxError:  # a block of output or shell text
                continue
            if kernels:
                out.append((f"{path.relative_to(ROOT)}:{line}", code))
    return out


BLOCKS = _kernel_blocks()


def test_the_docs_define_kernels() -> None:
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("where,code", BLOCKS, ids=[w for w, _ in BLOCKS])
def test_doc_kernel_passes_check(where: str, code: str) -> None:
    src = _source(code)
    shift = src.count("\n") - code.count("\n")
    got = {(d.span.line - shift, d.code) for d in check_source(src, where) if d.severity == "error"}
    assert got == expectations_from_source(code), f"{where}: {sorted(got)}"


# a program: its own imports, a device and a launch
COMPLETE = [(w, c) for w, c in BLOCKS if _source(c) is c and "az.device(" in c and "LaunchConfig" in c and not expectations_from_source(c)]


def test_some_doc_blocks_are_complete_programs() -> None:
    assert COMPLETE


@pytest.mark.slow  # a fresh process compiles and runs README's 2^20-element vecadd (~15-35 s here)
@pytest.mark.parametrize("where,code", COMPLETE, ids=[w for w, _ in COMPLETE])
def test_complete_doc_block_runs_on_the_cpu_backend(where: str, code: str, tmp_path: Path) -> None:
    path = tmp_path / "doc_block.py"
    path.write_text(code, encoding="utf-8")
    env = {**os.environ, "ANODIZE_DEVICE": "cpu"}
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, f"{where}:\n{proc.stdout}\n{proc.stderr}"
