"""Codegen test helpers: FileCheck, ptxas, and a CPU launcher over numpy arrays (imported by the tests)."""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anodize.codegen.artifact import CompiledKernel

ARCHS = ("sm_80", "sm_90")
# ARCHS for the tests that run ptxas over many kernels: sm_90 by default, sm_80 (the same
# lowering with other target features) under `-m slow`
ARCH_PARAMS = [pytest.param("sm_80", marks=pytest.mark.slow), "sm_90"]


def filecheck(text: str, checks: str, *, what: str = "module") -> None:
    """Run FileCheck (the `filecheck` package's command line, in this process) on `text`;
    on failure, keep the input."""
    from filecheck.main import main

    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory(prefix="az-filecheck-") as d:
        check_file, input_file = Path(d, "checks.txt"), Path(d, "input.txt")
        check_file.write_text(checks)
        input_file.write_text(text)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:  # `filecheck --input-file INPUT CHECKS`; it exits with its status
                main(["filecheck", "--input-file", str(input_file), str(check_file)])
                status: object = 0
            except SystemExit as e:
                status = e.code
    if status not in (0, None):
        keep = Path(tempfile.mkdtemp(prefix="az-filecheck-fail-")) / f"{what}.txt"
        keep.write_text(text)
        pytest.fail(f"FileCheck failed on the {what} (input kept at {keep}):\n{out.getvalue()}{err.getvalue()}")


@dataclass
class Fault:
    count: int
    site: int
    index: int
    length: int


def run_cpu(
    ck: CompiledKernel,
    grid: Sequence[int],
    block: Sequence[int],
    *args: Any,
    rank: int | None = None,
    dynamic_shared: int = 0,
) -> Fault:
    """Launch a CPU-compiled kernel over numpy arrays / Python scalars; returns the fault record."""
    assert ck.cpu_entry is not None
    flat: list[Any] = []
    for p, a in zip(ck.params, args, strict=True):
        if p.is_slice:
            arr = np.asarray(a)
            assert arr.flags.c_contiguous and arr.dtype == p.scalar.dtype, (p, arr.dtype)
            flat.append(arr.ctypes.data)
            flat.extend(arr.shape if p.rank == 2 else [arr.shape[0]])
        else:
            flat.append(a)
    rec = np.zeros(4, np.uint64)
    rank = rank if rank is not None else (2 if len(block) >= 2 and (block[1] > 1 or len(grid) >= 2) else 1)
    ck.cpu_entry(tuple(grid), tuple(block), flat, rec.ctypes.data, rank, dynamic_shared)
    w = rec.view(np.uint32)
    return Fault(int(w[0]), int(w[1]), int(rec.view(np.int64)[1]), int(rec.view(np.int64)[2]))


_CPU_COMPILED: dict[tuple[int, tuple[tuple[str, Any], ...]], tuple[Any, CompiledKernel]] = {}


def compiled_cpu(kernel: Any, **options: Any) -> CompiledKernel:
    """`driver.compile_cpu(kernel, **options)`, compiled once per kernel and options for the whole
    test session (the CPU backend's O3 of a barrier-split kernel takes seconds; a test that
    launches one kernel several times, or parametrises over its inputs, pays it once).  The
    artifact is immutable; a test of the compile itself calls `compile_cpu`."""
    from anodize.codegen.driver import compile_cpu

    from anodize.codegen.cpu.engine import cpu_isa

    key = (id(kernel), tuple(sorted(options.items())), cpu_isa())
    hit = _CPU_COMPILED.get(key)
    if hit is None or hit[0] is not kernel:  # (the kernel is kept alive, so its id is not reused)
        hit = _CPU_COMPILED[key] = (kernel, compile_cpu(kernel, **options))
    return hit[1]


def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
