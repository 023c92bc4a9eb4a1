"""Codegen test setup: the kernels' folder on sys.path, and the ptxas fixture."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from anodize.codegen.gpu.ptx import find_ptxas, run_ptxas  # noqa: E402


@pytest.fixture(scope="session")
def ptxas_ok() -> Callable[[str, str], None]:
    """Assemble a PTX with ptxas for one arch; skips only when ptxas is truly absent."""
    if find_ptxas() is None:
        pytest.skip("ptxas is not installed")

    def check(ptx: str, arch: str) -> None:
        run_ptxas(ptx, arch)

    return check
