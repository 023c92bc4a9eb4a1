"""Clean exits: quitting pdb at a kernel's `breakpoint()` ends the program with one line, and
`anodize run` shows a program's error with the program's frames only (not its own, not runpy's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KERNEL = """
import numpy as np
import anodize as az
from anodize import DisjointSlice, Slice, f16, kernel, launch_contract, thread


@launch_contract(domain=1, block=64)
@kernel
def k(x: Slice[f16], out: DisjointSlice[f16]) -> None:
    i = thread.index_1d()
    if i in out:
        breakpoint()
        out[i] = x[i]


dev = az.device("debug")
x = dev.to_device(np.ones(10, np.float16))
out = dev.empty(10, az.f16)
k[az.LaunchConfig.for_num_elems(10, block=64)](x, out)
print("not reached")
"""

USER_ERROR = """
def f() -> None:
    raise ValueError("boom")


f()
"""

LAUNCH_ERROR = """
import numpy as np
import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64)
@kernel
def k(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = x[i]


x = az.device("cpu").to_device(np.ones(10, np.float32))
k[az.LaunchConfig.for_num_elems(10, block=64)](x, x)
"""


def _run(tmp_path: Path, text: str, *cmd: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    prog = tmp_path / "prog.py"
    prog.write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONBREAKPOINT", "ANODIZE_TRACEBACK")}
    return subprocess.run([sys.executable, *cmd, str(prog)], input=stdin, capture_output=True, text=True, env=env, timeout=120)


def test_quitting_pdb_in_a_kernel_ends_quietly(tmp_path: Path) -> None:
    for cmd in ((), ("-m", "anodize", "run")):
        r = _run(tmp_path, KERNEL, *cmd, stdin="p x[:2]\nq\n")
        assert r.returncode == 1, r
        assert "array([1., 1.], dtype=float16)" in r.stdout, r.stdout  # pdb shows an f16 slice's values
        assert r.stderr.strip() == "anodize: quit the debugger in kernel `k`", r.stderr
        assert "not reached" not in r.stdout


def test_anodize_run_shows_the_programs_frames_only(tmp_path: Path) -> None:
    r = _run(tmp_path, USER_ERROR, "-m", "anodize", "run")
    assert r.returncode == 1
    frames = [line for line in r.stderr.splitlines() if line.strip().startswith("File ")]
    assert len(frames) == 2 and all("prog.py" in f for f in frames), r.stderr
    assert "ValueError: boom" in r.stderr and "runpy" not in r.stderr and "cli.py" not in r.stderr


def test_anodize_run_shows_a_refused_launch_at_the_users_line(tmp_path: Path) -> None:
    plain = _run(tmp_path, LAUNCH_ERROR)
    under_run = _run(tmp_path, LAUNCH_ERROR, "-m", "anodize", "run")
    for r in (plain, under_run):
        frames = [line for line in r.stderr.splitlines() if line.strip().startswith("File ")]
        assert len(frames) == 1 and "prog.py" in frames[0] and "line 16" in frames[0], r.stderr
        assert "AliasingError" in r.stderr and r.returncode == 1
