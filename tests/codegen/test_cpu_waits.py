"""A kernel whose `unsafe` code waits on another thread's write (liveness.py) runs on the CPU
backend one host thread per GPU thread, so the writer runs while the waiter spins (the region
backend, which runs a block's threads in turn between barriers, would never end it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from anodize.codegen.cpu.engine import RegionModule
from anodize.codegen.driver import compile_cpu
from anodize.language.typer import build_ir

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "accept" / "spin_wait_unsafe.py"


def test_an_unsafe_wait_runs_on_host_threads() -> None:
    spec = importlib.util.spec_from_file_location("fixture_spin_wait_unsafe", FIXTURE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
        assert build_ir(mod.handshake).waits and not build_ir(mod.not_waits).waits
        ck = compile_cpu(mod.handshake)
        assert ck.cpu_entry is not None and not isinstance(ck.cpu_entry, RegionModule) and ck.cpu_entry.threaded
        assert isinstance(compile_cpu(mod.not_waits).cpu_entry, RegionModule)
        from cg_helpers import run_cpu

        x = np.arange(128, dtype=np.float32)
        out = np.zeros(128, np.float32)
        assert run_cpu(ck, (2,), (64,), x, out).count == 0  # (hangs without host threads)
        assert np.array_equal(out, x)
    finally:
        sys.modules.pop(spec.name, None)
