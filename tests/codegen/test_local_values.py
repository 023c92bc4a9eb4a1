"""Local values: `az.local.array`, tuple returns and unpacking on the CPU backend, the debug
device and the GPU target (PTX through ptxas: a register-blocked kernel keeps its local
arrays in registers, 0 bytes of stack frame); GPU twins marked `gpu`."""

from __future__ import annotations

import re

import numpy as np
import pytest

import anodize as az
from anodize.codegen.llvm import locals as lower_locals
from anodize.codegen.driver import compile_gpu
from anodize.codegen.toolchain import find_ptxas
from anodize.language.typer import build_ir
from anodize.language import ir

import cg_locals as K

DEVICES = ("cpu", "debug")


def _tuples_want(a: np.ndarray) -> np.ndarray:
    mag = np.abs(a).astype(np.float16).astype(np.float64)
    s = np.where(a < 0, -1.0, 1.0)
    x, y = s, mag  # swapped
    return x * 1000.0 + y + np.where(a < 0, 0.5, 0.0) + 4 * 10000.0  # u8: 250 + 10 wraps to 4


@pytest.mark.parametrize("name", DEVICES)
def test_tuples_and_small_local_arrays(name: str) -> None:
    dev = az.device(name)
    a = np.array([-2.0, 3.0, 0.0, -0.5, 1e-3, -7.25, 11.0, 2.5] * 4, dtype=np.float32)
    c = dev.zeros(32, az.f64)
    K.tuples[az.LaunchConfig(grid=1, block=32)](dev.to_device(a), c)
    assert np.array_equal(c.to_host(), _tuples_want(a))


@pytest.mark.parametrize("name", DEVICES)
def test_declaration_in_a_loop_is_fresh_and_break_continue_hold(name: str) -> None:
    dev = az.device(name)
    c = dev.zeros(40, az.i64)
    K.rezero[az.LaunchConfig(grid=2, block=32)](c)
    assert (c.to_host() == 6 + 100 * (1 + 3 + 4 + 5)).all()


@pytest.mark.parametrize("name", DEVICES)
def test_register_blocked_sgemm(name: str) -> None:
    dev = az.device(name)
    rng = np.random.default_rng(11)
    m, kk, n = 32, 20, 32
    a = rng.standard_normal((m, kk)).astype(np.float32)
    b = rng.standard_normal((kk, n)).astype(np.float32)
    c = dev.zeros((m, n), az.f32)
    K.sgemm_rb[az.LaunchConfig.for_shape((m // K.TM, n // K.TN), block=(8, 8))](dev.to_device(a), dev.to_device(b), c)
    assert np.allclose(c.to_host(), a @ b, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name", DEVICES)
def test_out_of_range_local_index_faults(name: str) -> None:
    dev = az.device(name)
    k = np.array([0, 1, 2] * 10 + [0, 0], dtype=np.int64)
    c = dev.zeros(32, az.f32)
    K.fault2d[az.LaunchConfig(grid=1, block=32)](dev.to_device(k), c)
    assert np.array_equal(c.to_host(), (k * 10 + 4).astype(np.float32))
    k[9] = 3  # axis 0 has 3 rows
    with pytest.raises(az.KernelFault) as e:
        K.fault2d[az.LaunchConfig(grid=1, block=32)](dev.to_device(k), c)
        dev.synchronize()
    assert (e.value.index, e.value.length) == (3, 3)
    assert e.value.line == _line_of("c[i] = t[k[i], 4]")


def _line_of(text: str) -> int:
    src = open(K.__file__).read().splitlines()
    return next(n for n, line in enumerate(src, 1) if text in line)


def test_constant_loop_indices_are_proven_and_runtime_ones_checked() -> None:
    k = build_ir(K.sgemm_rb)
    reads = _collect(k, ir.LocalArrayRead) + _collect(k, ir.LocalArrayWrite)
    assert reads and not any(r.checked for r in reads)  # `for ii in range(TM)`: proven in range
    f = build_ir(K.fault2d)
    checked = [r for r in _collect(f, ir.LocalArrayRead) if r.checked]
    assert len(checked) == 1 and f.fault_sites[checked[0].site].param == "local t"


def _collect(k: ir.KernelIR, cls: type) -> list:  # type: ignore[type-arg]
    out: list = []  # type: ignore[type-arg]
    seen: set[int] = set()

    def walk(x: object) -> None:
        if isinstance(x, tuple):
            for y in x:
                walk(y)
        elif isinstance(x, ir.FuncIR):
            if id(x) not in seen:
                seen.add(id(x))
                walk(x.body)
        elif hasattr(x, "__dataclass_fields__"):
            if isinstance(x, cls):
                out.append(x)
            for f in x.__dataclass_fields__:  # type: ignore[attr-defined]
                if f not in ("span", "ty"):
                    walk(getattr(x, f))

    walk(k.body)
    return out


# ---- the GPU target: PTX through ptxas ------------------------------------------------------

def _ptxas_stack(ck) -> int:  # type: ignore[no-untyped-def]
    """The entry's stack frame, read from `ptxas -arch=sm_90 -v`'s own log."""
    pat = rf"Function properties for {ck.entry}\s*\n\s*(\d+) bytes stack frame, (\d+) bytes spill stores"
    m = re.search(pat, ck.resources.ptxas_log)
    assert m, ck.resources.ptxas_log
    return int(m.group(1))


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_register_blocking_keeps_local_arrays_in_registers(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ptxas -arch=sm_90 -v`: the register-blocked kernels have no stack frame and no local
    memory; without the lowering's unrolling of constant loops, the one whose indices the
    typer could not prove keeps its arrays in a stack frame."""
    for kern in (K.sgemm_rb, K.sgemm_rb_checked):
        ck = compile_gpu(kern, "sm_90", ptxas=True)
        assert re.search(r"^entry:(?:\n  .*)*\n  %\"?acc\"? = alloca \[16 x float\]", ck.llvm_ir, re.M), "the array's alloca is in the entry block"
        assert _ptxas_stack(ck) == 0
        assert ck.resources.stack_frame == 0 and ck.resources.spill_stores == 0
        assert ".local" not in ck.ptx
    monkeypatch.setattr(lower_locals, "UNROLL_MAX_TRIPS", 0)
    rolled = compile_gpu(K.sgemm_rb_checked, "sm_90", ptxas=True)
    assert _ptxas_stack(rolled) > 0  # unrolling is what keeps its arrays in registers


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
@pytest.mark.parametrize("kern", [K.tuples, K.fault2d, K.rezero], ids=lambda k: k.__name__)
def test_other_local_value_kernels_assemble(kern) -> None:  # type: ignore[no-untyped-def]
    ck = compile_gpu(kern, "sm_90", ptxas=True)
    assert ck.resources.spill_stores == 0


# ---- GPU twins ----------------------------------------------------------------------------


@pytest.mark.gpu
def test_gpu_tuples_sgemm_and_fault() -> None:
    dev = az.device(0)
    a = np.array([-2.0, 3.0, 0.0, -0.5, 1e-3, -7.25, 11.0, 2.5] * 4, dtype=np.float32)
    c = dev.zeros(32, az.f64)
    K.tuples[az.LaunchConfig(grid=1, block=32)](dev.to_device(a), c)
    assert np.array_equal(c.to_host(), _tuples_want(a))
    c2 = dev.zeros(40, az.i64)
    K.rezero[az.LaunchConfig(grid=2, block=32)](c2)
    assert (c2.to_host() == 1306).all()
    rng = np.random.default_rng(11)
    m, kk, n = 256, 64, 256
    am = rng.standard_normal((m, kk)).astype(np.float32)
    bm = rng.standard_normal((kk, n)).astype(np.float32)
    cm = dev.zeros((m, n), az.f32)
    K.sgemm_rb[az.LaunchConfig.for_shape((m // K.TM, n // K.TN), block=(8, 8))](dev.to_device(am), dev.to_device(bm), cm)
    assert np.allclose(cm.to_host(), am @ bm, rtol=1e-4, atol=1e-3)
    assert K.sgemm_rb.compile().resources.stack_frame == 0
    k = np.array([0, 1, 2] * 10 + [3, 0], dtype=np.int64)
    with pytest.raises(az.KernelFault) as e:
        K.fault2d[az.LaunchConfig(grid=1, block=32)](dev.to_device(k), dev.zeros(32, az.f32))
        dev.synchronize()
    assert (e.value.index, e.value.length) == (3, 3)


@pytest.mark.parametrize("name", DEVICES)
def test_an_array_declared_in_a_branch_not_taken_reads_zeros(name: str) -> None:
    dev = az.device(name)
    a = np.arange(32, dtype=np.float32)
    c = dev.zeros(32, az.f32)
    K.branch_decl[az.LaunchConfig(grid=1, block=32)](dev.to_device(a), c)
    assert np.array_equal(c.to_host(), a + np.where(np.arange(32) % 2 == 0, 5.0, 0.0))
