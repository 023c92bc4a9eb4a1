"""The debug device (`az.device("debug")`): the examples give the CPU backend's results,
races and out-of-bounds accesses are KernelFaults naming the line, and `breakpoint()`
stops in pdb with the kernel's variables."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import anodize as az
from anodize import DisjointSlice, Slice, f32, f64, i32, i64, kernel, launch_contract, thread, u32
from anodize.runtime import device as devmod
from anodize.runtime.device import debug_device

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

# Small sizes: interpreting is slow.  reduce_sum_unsafe and generic_saxpy have fixed launch sizes
# in `main`, so their kernels are launched below with small inputs instead.
SMALL: dict[str, dict[str, int]] = {
    "vecadd": {"n": 1_003},
    "saxpy": {"n": 777},
    "scale2d": {"rows": 9, "cols": 13},
    "stencil2d": {"rows": 11, "cols": 17},
    "histogram": {"n": 2_000},
    "transpose": {"rows": 20, "cols": 13},
    "transpose_32x8": {"rows": 40, "cols": 36},
    "sgemm": {"m": 9, "k": 7, "n": 5},
    "sgemm_slots": {"m": 9, "k": 7, "n": 5},
    "softmax": {"rows": 1, "cols": 70},  # one block of 512 threads
    "softmax_unsafe": {"rows": 3, "cols": 70},
    "scan": {"n": 600},
    "async_pipeline": {"n": 600, "chunks": 2, "lanes": 2, "iters": 4},
    "async_double_buffer": {"n": 600, "chunks": 3, "iters": 4},
    "async_fanout": {"n": 500},
    "data_parallel": {"n": 901},
    "hashmap": {"n": 2_000},
    "print_assert": {"n": 300},
    "stencil3d": {"layers": 3, "rows": 5, "cols": 7},
    "reduce_sum": {"n": 3_000},
    "grid_sync": {"n": 1_000},
    "tile_add": {"n": 1_500},
    "tile_softmax": {"rows": 3, "cols": 20},
    "tile_layernorm": {"rows": 3, "cols": 20},
    "radix_digits": {"n": 700},
    "particles": {"n": 500, "steps": 2},
    "fluid2d": {"rows": 9, "cols": 13, "steps": 2},
    "autotune_softmax": {"rows": 3, "cols": 20},
}
OWN_RUN = {"reduce_sum_unsafe", "generic_saxpy"}
# f16 examples whose outputs this test's bit-for-bit comparison leaves out (tests/runtime/test_debug_device_runs.py
# runs them on the debug device against NumPy)
HALF_ONLY = {"tile_gemm", "tile_attention", "autotune_gemm", "autotune_attention"}
PRESENT = sorted(n for n in SMALL if (EXAMPLES / f"{n}.py").exists())  # (examples other branches add)
# Interpreted blocks of many threads with barriers are the slow ones: sgemm (16x16 threads, a
# shared tile per K step), softmax_unsafe and tile_layernorm run under `-m slow`; transpose,
# scan, reduce_sum, softmax and tile_softmax keep shared memory, barriers and tiles in the
# default run.
SLOW_ON_DEBUG = {"sgemm", "sgemm_slots", "softmax_unsafe", "tile_layernorm"}  # (softmax and tile_softmax stay)


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_dbg_example_{name}", EXAMPLES / f"{name}.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _on(kind: str, monkeypatch: pytest.MonkeyPatch) -> az.Device:
    dev = devmod.cpu_device() if kind == "cpu" else debug_device()
    monkeypatch.setattr(devmod, "_DEFAULT", dev)
    return dev


def test_every_example_is_covered() -> None:
    found = {p.stem for p in EXAMPLES.glob("*.py") if "def main(" in p.read_text()}
    assert found <= set(SMALL) | OWN_RUN | HALF_ONLY, f"add to SMALL: {found - set(SMALL) - OWN_RUN - HALF_ONLY}"


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_ON_DEBUG else n for n in PRESENT])
def test_example_equals_cpu_backend(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = _load(name)
    outs = []
    for kind in ("cpu", "debug"):
        _on(kind, monkeypatch)
        if name == "data_parallel":  # two stand-in devices of the kind under test
            pick = (lambda count=None, kind=kind: [devmod.cpu_device(k) if kind == "cpu" else debug_device(k) for k in range(2)])
            monkeypatch.setattr(mod, "pick_devices", pick)
        outs.append(np.asarray(mod.main(**SMALL[name])))
    assert outs[0].shape == outs[1].shape
    np.testing.assert_array_equal(outs[1], outs[0])


def test_reduce_sum_equals_cpu_backend() -> None:
    mod = _load("reduce_sum_unsafe")
    x_h = np.random.default_rng(6).random(1500, dtype=np.float32)
    got = []
    for dev in (devmod.cpu_device(), debug_device()):
        total = dev.zeros(1, az.f32)
        mod.reduce_sum[az.LaunchConfig(grid=2, block=256)](dev.to_device(x_h), total)
        got.append(float(total.to_host()[0]))
    assert got[0] == pytest.approx(float(x_h.astype(np.float64).sum()), rel=1e-5)
    assert got[1] == pytest.approx(got[0], rel=1e-6)  # the two blocks' atomic adds may land in either order


def test_generic_saxpy_equals_cpu_backend() -> None:
    mod = _load("generic_saxpy")
    n = 300
    rng = np.random.default_rng(0)
    for dtype, scalar in ((np.float32, az.f32), (np.float64, az.f64)):
        x, y = rng.random(n).astype(dtype), rng.random(n).astype(dtype)
        res = []
        for dev in (devmod.cpu_device(), debug_device()):
            out = dev.empty(n, scalar)
            mod.saxpy[az.LaunchConfig.for_num_elems(n)](dtype(2.5), dev.to_device(x), dev.to_device(y), out)
            p = dev.empty(n, scalar)
            mod.power[az.LaunchConfig.for_num_elems(n)](dev.to_device(x), p, 3)
            res.append((out.to_host(), p.to_host()))
        np.testing.assert_array_equal(res[1][0], res[0][0])
        np.testing.assert_array_equal(res[1][1], res[0][1])


# ---- machine semantics: the interpreter wraps, shifts, divides and casts as lowered ----------


@launch_contract(domain=1, block=64)
@kernel
def int_ops(a: Slice[i32], b: Slice[i32], f: Slice[f32], out: DisjointSlice[i64]) -> None:
    i = thread.index_1d()
    if i in out:
        x = a[i]
        y = b[i]
        acc = i64(x * y)  # i32 wraps
        acc = acc * 31 + i64(x + y)
        acc = acc * 31 + i64(x << (y & 63))
        acc = acc * 31 + i64(x >> (y & 63))
        acc = acc * 31 + i64(u32(x) >> (y & 7))
        if y != 0:
            acc = acc * 31 + i64(x // y) * 7 + i64(x % y)
        acc = acc * 31 + i64(i32(f[i] * 1.0e9))  # saturating, NaN -> 0
        acc = acc * 31 + i64(f32(x) * f[i] > 0.5)
        acc = acc * 31 + i64(~x) + i64(-x)
        out[i] = acc


@launch_contract(domain=1, block=64)
@kernel
def float_ops(a: Slice[f32], b: Slice[f32], c: Slice[f64], out: DisjointSlice[f64]) -> None:
    i = thread.index_1d()
    if i in out:
        x = a[i]
        y = b[i]
        r = f64(x * y + x / y)
        r += f64(x // y) + f64(x % y)
        r += f64(az.math.sqrt(abs(x))) + f64(az.math.exp(y)) + az.math.sin(c[i]) + az.math.log1p(abs(c[i]))
        r += f64(az.math.fma(x, y, x)) + f64(min(x, y)) + f64(az.math.floor(x)) + c[i] // 3.0 + c[i] % -2.5
        r += f64(f32(c[i]))  # f64 -> f32 rounding
        out[i] = r


def test_integer_and_float_semantics_equal_cpu_backend() -> None:
    rng = np.random.default_rng(1)
    n = 200
    a = rng.integers(-2**31, 2**31, n).astype(np.int32)
    b = rng.integers(-40, 40, n).astype(np.int32)
    b[:5] = [0, -1, 31, 32, 33]
    a[:2] = [-2**31, 2**31 - 1]
    f = rng.normal(0, 4, n).astype(np.float32)
    f[:4] = [np.nan, np.inf, -np.inf, 3e9]
    fa, fb = rng.normal(0, 10, n).astype(np.float32), rng.normal(0, 3, n).astype(np.float32)
    fb[:3] = [0.0, -0.0, 1e-30]
    c = rng.normal(0, 100, n)
    res = []
    for dev in (devmod.cpu_device(), debug_device()):
        o1, o2 = dev.empty(n, az.i64), dev.empty(n, az.f64)
        int_ops[az.LaunchConfig.for_num_elems(n, block=64)](dev.to_device(a), dev.to_device(b), dev.to_device(f), o1)
        float_ops[az.LaunchConfig.for_num_elems(n, block=64)](dev.to_device(fa), dev.to_device(fb), dev.to_device(c), o2)
        res.append((o1.to_host(), o2.to_host()))
    np.testing.assert_array_equal(res[1][0], res[0][0])
    np.testing.assert_array_equal(res[1][1], res[0][1])


# ---- faults: out of bounds, races ------------------------------------------------------------


@launch_contract(domain=1, block=32)
@kernel
def shifted_read(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i + 1]  # LINE: oob


@launch_contract(domain=1, block=4)
@kernel
def racy_write(c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        c.write_unchecked(0, i32(i.get()))  # LINE: race


@launch_contract(domain=1, block=8)
@kernel
def one_writer_each(c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        if i in c:
            c.write_unchecked(i.get(), i32(i.get()))


def _line(tag: str) -> int:
    for n, text in enumerate(Path(__file__).read_text().splitlines(), 1):
        if text.rstrip().endswith(f"# LINE: {tag}"):
            return n
    raise AssertionError(tag)


def test_out_of_bounds_read_is_a_kernel_fault_naming_the_line() -> None:
    dev = debug_device()
    a = dev.to_device(np.arange(40, dtype=np.float32))
    c = dev.empty(40, az.f32)
    shifted_read[az.LaunchConfig.for_num_elems(40, block=32)](a, c)
    with pytest.raises(az.KernelFault) as ei:
        c.to_host()
    e = ei.value
    assert (e.path, e.line, e.kind, e.index, e.length) == (__file__, _line("oob"), "read", 40, 40)
    assert f"{__file__}:{_line('oob')}" in str(e)
    np.testing.assert_array_equal(c.to_host()[:39], np.arange(1, 40, dtype=np.float32))  # the device stays usable


@kernel
def no_contract(c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = i32(7)


def test_faults_read_as_on_the_cpu_backend() -> None:
    """The same KernelFault text (kind, file:line, index, length) as the CPU backend's, for an
    out-of-bounds read and for a witness of a launch of the wrong rank (then poisoned)."""
    texts = []
    for dev in (devmod.cpu_device(), debug_device()):
        a, c = dev.to_device(np.arange(40, dtype=np.float32)), dev.empty(40, az.f32)
        shifted_read[az.LaunchConfig.for_num_elems(40, block=32)](a, c)
        with pytest.raises(az.KernelFault) as e1:
            dev.synchronize()
        h = dev.zeros(16, az.i32)
        no_contract.unsafe_launch(az.LaunchConfig((2, 2), (4, 2)), h)
        with pytest.raises(az.KernelFault) as e2:
            dev.synchronize()
        assert not h.to_host().any()  # the poisoned witness admits no write
        texts.append((str(e1.value), str(e2.value), e2.value.kind))
    assert texts[1] == texts[0]
    assert texts[0][2] == "rank"


def test_two_threads_writing_one_element_is_reported() -> None:
    dev = debug_device()
    c = dev.zeros(4, az.i32)
    racy_write[az.LaunchConfig(grid=1, block=4)](c)
    with pytest.raises(az.KernelFault) as ei:
        dev.synchronize()
    e = ei.value
    assert e.line == _line("race") and e.path == __file__
    assert "data race" in e.kind and "`c[0]`" in e.kind and "thread (1, 0, 0)" in e.kind and "(0, 0, 0)" in e.kind
    assert e.count == 3  # threads 1, 2 and 3 each write an element thread 0 wrote


def test_disjoint_writes_are_not_a_race() -> None:
    dev = debug_device()
    c = dev.zeros(20, az.i32)
    one_writer_each[az.LaunchConfig.for_num_elems(20, block=8)](c)
    np.testing.assert_array_equal(c.to_host(), np.arange(20))


SHARED_SRC = '''
import anodize as az
from anodize import DisjointSlice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64)
@kernel
def rotate(out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        s = az.shared.array(64, f32)
        t = thread.tid_x()
        s[t] = f32(t)
        {sync}
        v = s[(t + 1) % 64]
    if i in out:
        out[i] = v
'''


def _shared_kernel(tmp_path: Path, sync: str) -> Any:
    p = tmp_path / f"rot_{'sync' if sync else 'nosync'}.py"
    p.write_text(SHARED_SRC.replace("{sync}", sync or "pass"))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.rotate, p


def _interpret(k: Any, grid: int, block: int, *arrays: np.ndarray) -> tuple[Any, Any]:
    """Run `k` on the debug device's interpreter directly (codegen only: no checker), so a
    race the checker would refuse statically shows what the debug device finds dynamically."""
    from anodize.codegen.driver import compile_debug
    from anodize.runtime.faults import RECORD

    compiled = compile_debug(k)
    rec = np.zeros(1, RECORD)
    flat: list[Any] = []
    for a in arrays:
        flat += [a.ctypes.data, len(a)]
    assert compiled.cpu_entry is not None
    compiled.cpu_entry((grid, 1, 1), (block, 1, 1), flat, rec.ctypes.data, 1, 0)
    return compiled, rec[0]


def test_shared_read_of_a_slot_another_thread_writes_in_the_interval(tmp_path: Path) -> None:
    racy, path = _shared_kernel(tmp_path, "")
    with pytest.raises(az.CheckError):  # the checker refuses it statically ...
        racy[az.LaunchConfig(grid=1, block=64)](debug_device().empty(64, az.f32))
    out = np.zeros(64, np.float32)
    compiled, rec = _interpret(racy, 1, 64, out)  # ... and the interpreter finds it when it runs
    assert rec["count"] >= 1
    site = compiled.fault_sites[rec["site"]]
    assert "data race" in site.kind and "`shared s[" in site.kind
    assert site.path == str(path) and site.line in (13, 15)  # the write or the read: whichever ran second

    fixed, _ = _shared_kernel(tmp_path, "az.syncthreads()")
    out = debug_device().empty(64, az.f32)
    fixed[az.LaunchConfig(grid=1, block=64)](out)
    np.testing.assert_array_equal(out.to_host(), (np.arange(64) + 1) % 64)


def test_write_after_another_threads_read_in_the_interval(tmp_path: Path) -> None:
    p = tmp_path / "war.py"
    p.write_text(SHARED_SRC.replace("{sync}", "pass").replace("v = s[(t + 1) % 64]", "v = s[(t + 1) % 64]\n        s[t] = v + 1.0"))
    spec = importlib.util.spec_from_file_location(p.stem, p)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    compiled, rec = _interpret(mod.rotate, 1, 64, np.zeros(64, np.float32))
    assert rec["count"] >= 1 and "data race" in compiled.fault_sites[rec["site"]].kind


# ---- breakpoint() under pdb ---------------------------------------------------------------------

BP_SRC = textwrap.dedent('''
    import numpy as np
    import anodize as az
    from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


    @launch_contract(domain=1, block=2)
    @kernel
    def probe(a: Slice[f32], c: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        x = a[i] * 2.0
        breakpoint()
        if i in c:
            c[i] = x


    dev = az.device("debug")
    c = dev.empty(2, az.f32)
    probe[az.LaunchConfig(grid=1, block=2)](dev.to_device(np.array([20.5, 7.0], np.float32)), c)
    print("result", c.to_host().tolist())
''')


def test_breakpoint_stops_in_pdb_with_the_kernels_variables(tmp_path: Path) -> None:
    script = tmp_path / "bp_kernel.py"
    script.write_text(BP_SRC)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONBREAKPOINT": ""}
    r = subprocess.run(
        [sys.executable, str(script)],
        input="p i.get()\np x\np thread_idx\nc\np i.get()\n!x = 1.25\nc\n",
        capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "(Pdb)" in out
    assert f"{script}(13)probe()" in out and "-> if i in c:" in out  # the kernel's own file, the line after breakpoint()
    assert "\n(Pdb) 0\n" in out and "(Pdb) 41.0" in out and "(0, 0, 0)" in out  # thread 0: i, x, its id
    assert "(Pdb) 1\n" in out  # thread 1 stops next
    assert "result [41.0, 1.25]" in out  # `!x = 1.25` in pdb changed thread 1's x


THREADED_SRC = textwrap.dedent('''
    import anodize as az
    from anodize import DisjointSlice, f32, kernel, launch_contract, thread


    @launch_contract(domain=1, block=4)
    @kernel
    def rot(out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        with az.unsafe():
            s = az.shared.array(4, f32)
            t = thread.tid_x()
            s[t] = f32(t) * 10.0
            az.syncthreads()
            v = s[(t + 1) % 4]
            if t == 2:
                breakpoint()
        if i in out:
            out[i] = v


    dev = az.device()  # ANODIZE_DEVICE=debug: the debug device
    out = dev.empty(4, az.f32)
    rot[az.LaunchConfig(grid=1, block=4)](out)
    print("result", out.to_host().tolist(), dev.kind)
''')


def test_breakpoint_in_a_threaded_kernel_under_anodize_device_debug(tmp_path: Path) -> None:
    """A kernel with a barrier and shared memory: pdb in one of the block's Python threads,
    while the others wait at the end of the block."""
    script = tmp_path / "rot.py"
    script.write_text(THREADED_SRC)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONBREAKPOINT": "", "ANODIZE_DEVICE": "debug"}
    r = subprocess.run([sys.executable, str(script)], input="p v, t, s\nc\n", capture_output=True, text=True,
                       cwd=str(tmp_path), env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"{script}(18)rot()" in r.stdout
    assert "(Pdb) (30.0, 2, array([ 0., 10., 20., 30.]))" in r.stdout
    assert "result [10.0, 20.0, 30.0, 0.0] debug" in r.stdout


# ---- breakpoint() elsewhere: nothing ------------------------------------------------------------


def test_breakpoint_lowers_to_nothing_on_gpu_and_cpu(tmp_path: Path) -> None:
    from anodize.codegen.driver import compile_cpu, compile_gpu

    src = (ROOT / "fixtures" / "accept" / "breakpoint_stmt.py").read_text()
    codes = {}
    for tag, text in (("with", src), ("without", src.replace("breakpoint()", "pass"))):
        (tmp_path / tag).mkdir()
        p = tmp_path / tag / "bp.py"
        p.write_text(text)
        spec = importlib.util.spec_from_file_location(f"bp_{tag}", p)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        ptx = re.sub(r"callseq \d+", "callseq", compile_gpu(mod.doubled, "sm_90", ptxas=False).ptx)  # a process-wide counter
        codes[tag] = (ptx, compile_cpu(mod.doubled).llvm_ir_optimized)
        if tag == "with":
            a = np.arange(5, dtype=np.float32)
            out = np.zeros(5, np.float32)
            mod.doubled[az.LaunchConfig.for_num_elems(5)](a, out)  # NumPy arrays: the CPU backend, no stop
            np.testing.assert_array_equal(out, 2 * a)
    assert codes["with"] == codes["without"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["vecadd", "sgemm", "softmax", "transpose", "scan"])
def test_example_equals_gpu(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The GPU twin: the debug device gives the GPU's results (exact where the GPU's math is)."""
    mod = _load(name)
    outs = []
    for dev in (az.device(0), debug_device()):
        monkeypatch.setattr(devmod, "_DEFAULT", dev)
        outs.append(np.asarray(mod.main(**SMALL[name]), dtype=np.float64))
    np.testing.assert_allclose(outs[1], outs[0], rtol=2e-6, atol=1e-6)  # libdevice vs libm: a few ulp (softmax's exp)


PRINT_SRC = '''
from anodize import DisjointSlice, Slice, f32, i32, kernel, launch_contract, thread


@launch_contract(domain=1, block=4)
@kernel
def talk(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        print("thread", i.get(), "value", a[i], a[i] > 1.0, i32(-3))
        assert a[i] < 2.5, "too big"
        c[i] = a[i]
'''


def test_print_and_assert_as_on_the_cpu_backend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from anodize.language import ir

    if not hasattr(ir, "Print"):
        pytest.skip("print and assert are not in this tree's language yet")
    p = tmp_path / "talk.py"
    p.write_text(PRINT_SRC)
    spec = importlib.util.spec_from_file_location("talk", p)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    seen = []
    for dev in (devmod.cpu_device(), debug_device()):
        c = dev.empty(4, az.f32)
        mod.talk[az.LaunchConfig(grid=1, block=4)](dev.to_device(np.array([0.5, 1.5, 2.5, 3.0], np.float32)), c)
        with pytest.raises(az.KernelFault) as e:
            dev.synchronize()
        seen.append((capsys.readouterr().out, str(e.value)))
    assert seen[1] == seen[0]
    assert "thread 1 value 1.5 True -3\n" in seen[0][0] and "assertion failed: too big (2 faults" in seen[0][1]
