"""examples/torch_distributed.py with two processes: a `torch.distributed` job (gloo on the CPU
backend) whose ranks each run an anodize kernel on their own tensors and all-reduce the
results; skipped cleanly without PyTorch.  The `gpu` twin runs it as one NCCL process."""

from __future__ import annotations

import os
import re
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
    # (the two ranks write to one pipe: a line of one can land before the other's newline)
    found = sorted(re.findall(r"rank (\d)/2 on cpu: total (\S+) matches NumPy", r.stdout))
    assert [rank for rank, _ in found] == ["0", "1"], r.stdout
    assert len({total for _, total in found}) == 1, found  # every rank holds the same all-reduced total


@pytest.mark.gpu
def test_one_nccl_process() -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANODIZE_DEVICE"}
    r = subprocess.run(
        [sys.executable, str(EXAMPLE), "--nprocs", "1", "--port", str(_free_port())],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0/1 on cuda:0" in r.stdout
