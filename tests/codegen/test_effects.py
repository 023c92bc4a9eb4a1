"""Atomics with scopes and orderings, `print` and `assert`: the PTX they lower to (checked
with ptxas), and what they do on the CPU backend (CI) and on a GPU (twins)."""

from __future__ import annotations

import inspect
from collections.abc import Callable

import cg_effects as E
import numpy as np
import pytest

import anodize as az
from anodize.codegen.cpu.printf import format_printf
from anodize.codegen.driver import compile_gpu


def _ptx_line(ptx: str, needle: str) -> str:
    return next((ln.strip() for ln in ptx.splitlines() if needle in ln), "")


def _line(tag: str) -> int:
    lines = inspect.getsource(E).splitlines()
    return next(n for n, ln in enumerate(lines, 1) if f"# LINE:{tag}" in ln)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_atomic_ptx_orders_and_scopes(arch: str, ptxas_ok: Callable[[str, str], None]) -> None:
    ptx = compile_gpu(E.orders, arch, ptxas=False).ptx
    for text in (
        "atom.acq_rel.gpu.global.add.u32",  # acq_rel: LLVM's atomicrmw would drop the ordering
        "atom.relaxed.sys.global.add.u32",  # the system scope
        "atom.release.sys.global.add.u32",  # sub adds the negation
        "atom.acquire.gpu.global.min.u32",  # seq_cst: fence.sc, then acquire
        "fence.sc.gpu",
        "atom.acquire.gpu.global.max.s64",
        "atom.acq_rel.sys.global.xor.b64",
        "atom.acq_rel.gpu.global.exch.b32",
        "atom.acq_rel.gpu.global.cas.b32",
        "fence.sc.sys",
        "atom.acquire.sys.global.cas.b32",
        "st.release.gpu.global",
        "st.release.sys.global",
        "ld.acquire.gpu.global",
        "ld.relaxed.gpu.global",
        "atom.global.add.f32",  # the default: relaxed, device scope
        "atom.acq_rel.sys.global.add.f32",
        "atom.acq_rel.gpu.global.cas.b32",  # float max: a compare-exchange loop with the ordering
        "atom.release.gpu.global.exch.b32",
        "atom.global.add.f64",
        "atom.acq_rel.gpu.global.add.f64",
    ):
        assert text in ptx, f"`{text}` missing from the PTX"
    assert "atom.global.add.u32" in ptx  # the relaxed device-scope add keeps LLVM's own instruction
    ptxas_ok(ptx, arch)


def test_atomic_load_of_a_never_stored_slice(ptxas_ok: Callable[[str, str], None]) -> None:
    # a noalias, never-stored parameter made NVPTX select `ld.global.nc` for the atomic load
    # (LLVM 22 asserts); atomic slices are not marked noalias
    ptx = compile_gpu(E.load_only, "sm_90", ptxas=False).ptx
    assert "ld.relaxed.gpu.global.b32" in ptx and ".nc" not in _ptx_line(ptx, "ld.relaxed")
    ptxas_ok(ptx, "sm_90")


def test_print_ptx_calls_vprintf(ptxas_ok: Callable[[str, str], None]) -> None:
    ptx = compile_gpu(E.prints, "sm_90", ptxas=False).ptx
    assert ".extern .func  (.param .b32 func_retval0) vprintf" in ptx
    assert "call.uni (retval0), vprintf" in ptx or "vprintf," in _ptx_line(ptx, "call")
    assert ".const .align 1 .b8 __az_str_" in ptx  # the formats live in the constant space
    ptxas_ok(ptx, "sm_90")


def test_assert_ptx_assembles(ptxas_ok: Callable[[str, str], None]) -> None:
    ck = compile_gpu(E.asserts, "sm_90", ptxas=False)
    assert [s.kind for s in ck.fault_sites].count("assert") == 3
    ptxas_ok(ck.ptx, "sm_90")


# ---- running: the CPU backend here, a GPU in the twins -------------------------------------


def _one_op(dev: az.Device) -> None:
    n = 29
    x = np.random.default_rng(3).integers(-1000, 1000, n).astype(np.int64)
    bufs = {
        "h32": dev.zeros(8, az.i32), "u32s": dev.zeros(8, az.u32), "h64": dev.zeros(8, az.i64),
        "u64s": dev.zeros(8, az.u64), "f": dev.zeros(4, az.f32), "d": dev.zeros(4, az.f64),
    }
    c = dev.zeros(n, az.i64)
    E.one_op[az.LaunchConfig(grid=1, block=32)](dev.to_device(x), *bufs.values(), c)
    for name, dt in (("h32", np.int32), ("u32s", np.uint32), ("h64", np.int64), ("u64s", np.uint64)):
        v = x.astype(dt)
        zero = dt(0)
        want = [v.sum(dtype=dt), (zero - v).sum(dtype=dt), min(zero, v.min()), max(zero, v.max()), zero,
                np.bitwise_or.reduce(v), np.bitwise_xor.reduce(v)]
        got = bufs[name].to_host()[:7]
        assert [int(g) for g in got] == [int(w) for w in want], name
    for name, dt in (("f", np.float32), ("d", np.float64)):
        got = bufs[name].to_host()
        assert got[0] == pytest.approx(x.sum()) and got[1] == pytest.approx(-x.sum())
        assert (got[2], got[3]) == (min(0, x.min()), max(0, x.max())), name
    # compare_exchange(7, i, i + 1): the chain 0 -> 1 -> ... advances only through thread i == old value
    assert bufs["h64"].to_host()[7] >= 1 and sorted(c.to_host())[0] == 0


def test_every_atomic_on_every_width_cpu() -> None:
    _one_op(az.device("cpu"))


def _oob(dev: az.Device) -> None:
    h, c = dev.zeros(16, az.i32), dev.zeros(8, az.i32)
    E.oob[az.LaunchConfig(grid=1, block=32)](h, c)
    with pytest.raises(az.KernelFault) as e:
        dev.synchronize()
    assert e.value.kind == "atomic" and e.value.length == 16 and e.value.count == 4  # i + 10 >= 16 for i in 6..7 (2 ops)
    assert list(h.to_host()[10:]) == [5] * 6  # the in-range threads did their work


def test_atomics_are_bounds_checked_cpu() -> None:
    _oob(az.device("cpu"))


EXPECTED_PRINT = (
    "x -5 18446744073709551615 1.5 0.1 True False 100%\n"
    "\n"
    "1e+300 -2.5e-08 -9223372036854775808 4294967295 é\n"
)


def test_print_cpu(capfd: pytest.CaptureFixture[str]) -> None:
    dev = az.device("cpu")
    E.prints[az.LaunchConfig(grid=1, block=4)](dev.zeros(3, az.f32))
    dev.synchronize()
    assert capfd.readouterr().out == EXPECTED_PRINT


def test_format_printf() -> None:
    import struct

    slots = [struct.pack("<q", -3), struct.pack("<Q", 2**64 - 1), struct.pack("<d", 0.1)]
    assert format_printf("%lld %llu %g 100%%\n", lambda i: slots[i]) == "-3 18446744073709551615 0.1 100%\n"


def _asserts(dev: az.Device) -> None:
    n = 100
    a = np.arange(n, dtype=np.float32) * 0.5 + 0.75  # positive, below 100, never 50
    c = dev.zeros(n, az.f32)
    cfg = az.LaunchConfig.for_num_elems(n, block=32)
    E.asserts[cfg](dev.to_device(a), c)
    np.testing.assert_array_equal(c.to_host(), a + 1)
    a[[3, 60]] = 500.0
    E.asserts[cfg](dev.to_device(a), c)
    with pytest.raises(az.KernelFault) as e:
        c.to_host()
    f = e.value
    assert (f.kind, f.message, f.line, f.count) == ("assert", "too big", _line("assert"), 2)
    assert f"cg_effects.py:{_line('assert')}: assertion failed: too big (2 faults recorded" in str(f)
    assert c.to_host()[4] == a[4] + 1  # the thread went on after its failed assert; the fault was reset
    a[[3, 60]] = 4.0
    a[49] = 50.0
    E.asserts[cfg](dev.to_device(a), c)
    with pytest.raises(az.KernelFault) as e:
        dev.synchronize()
    assert (e.value.line, e.value.message) == (_line("bare-assert"), "")
    assert str(e.value).endswith(f":{_line('bare-assert')}: assertion failed")
    a[49] = -1.0
    E.asserts[cfg](dev.to_device(a), c)
    with pytest.raises(az.KernelFault) as e:
        dev.synchronize()
    assert (e.value.line, e.value.message) == (_line("helper-assert"), "not positive")
    a[49] = 1.0
    E.asserts[cfg](dev.to_device(a), c)  # the context survives
    np.testing.assert_array_equal(c.to_host(), a + 1)


def test_assert_faults_cpu() -> None:
    _asserts(az.device("cpu"))


@pytest.mark.gpu
def test_every_atomic_on_every_width_gpu() -> None:
    _one_op(az.device())


@pytest.mark.gpu
def test_atomics_are_bounds_checked_gpu() -> None:
    _oob(az.device())


@pytest.mark.gpu
def test_print_gpu(capfd: pytest.CaptureFixture[str]) -> None:
    dev = az.device()
    E.prints[az.LaunchConfig(grid=1, block=4)](dev.zeros(3, az.f32))
    dev.synchronize()
    assert capfd.readouterr().out == EXPECTED_PRINT


@pytest.mark.gpu
def test_assert_faults_gpu() -> None:
    _asserts(az.device())


def test_assert_message_survives_the_disk_cache(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from anodize.runtime import artifact_store

    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    ck = compile_gpu(E.asserts, "sm_90", ptxas=False)
    inputs = artifact_store.cache_inputs(E.asserts, "sm_90", {"test": "assert-message"})
    artifact_store.save(inputs, ck)
    back = artifact_store.load(inputs, E.asserts)
    assert back is not None
    assert [(s.kind, s.line, s.message) for s in back.fault_sites if s.kind == "assert"] == [
        ("assert", _line("assert"), "too big"), ("assert", _line("bare-assert"), ""), ("assert", _line("helper-assert"), "not positive")
    ]
