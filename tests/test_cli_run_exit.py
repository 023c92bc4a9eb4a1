"""`anodize run` ends as Python does on `sys.exit(...)` (issue 34, item 6): a message is printed
on stderr with status 1, an int is the status, None is 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("arg,status,err", [('"stopped: no input"', 1, "stopped: no input\n"), ("3", 3, ""), ("None", 0, None),
                                            ("['a', 1]", 1, "['a', 1]\n")])
def test_sys_exit_as_python_does(tmp_path: Path, arg: str, status: int, err: str | None) -> None:
    script = tmp_path / "ex.py"
    script.write_text(f"import sys\nsys.exit({arg})\n")
    py = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    az = subprocess.run([sys.executable, "-m", "anodize", "run", str(script)], capture_output=True, text=True, timeout=120)
    assert py.returncode == az.returncode == status
    if err is not None:
        assert py.stderr == err and az.stderr == err
