"""`anodize check` as a program ends its process at once after the report (anodize/cli.py
`main`, no interpreter teardown, the last module's analysis not freed): its output is all
there, flushed, and its exit status is the check's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "anodize", "check", *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_errors_are_printed_whole_and_the_status_is_1(tmp_path: Path) -> None:
    bad = (ROOT / "fixtures/reject/atomic_plain.py").read_text()
    path = tmp_path / "many.py"
    path.write_text(bad + "".join(bad.split("\n", 1)[1].replace("def ", f"def n{i}_") for i in range(40)))
    out = _check(str(path), "--format", "concise")
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) >= 41 and all(": az-" in ln for ln in lines)
    assert out.stderr.strip().startswith("checked 1 file:") and "error" in out.stderr


def test_a_clean_module_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "clean.py"
    path.write_text("x = 1\n")
    out = _check(str(path))
    assert out.returncode == 0 and out.stderr.strip() == "checked 1 file: no errors"
