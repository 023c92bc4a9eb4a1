"""examples/torch_distributed.py with two processes: a `torch.distributed` job (gloo on the CPU
backend) whose ranks each run an anodize kernel on their own tensors and all-reduce the
results; skipped cleanly without PyTorch.  The `gpu` twin runs it as one NCCL process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "torch_distributed.py"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(nprocs: int, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), "--nprocs", str(nprocs), "--n", "5000", "--port", str(_free_port())],
        capture_output=True, text=True, timeout=300, env={**os.environ, **env},
    )


def test_two_gloo_processes_all_reduce_their_kernel_results() -> None:
    r = _run(2, {"ANODIZE_DEVICE": "cpu"})
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(ln for ln in r.stdout.splitlines() if "matches NumPy" in ln)
    assert [ln.split(":")[0] for ln in lines] == ["rank 0/2 on cpu", "rank 1/2 on cpu"], r.stdout
    totals = {ln.split("total ")[1].split()[0] for ln in lines}
    assert len(totals) == 1, lines  # every rank holds the same all-reduced total


@pytest.mark.gpu
def test_one_nccl_process() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANODIZE_DEVICE"}
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), "--nprocs", "1", "--port", str(_free_port())],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0/1 on cuda:0" in r.stdout
