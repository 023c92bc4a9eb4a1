"""Foreign kernels (`az.foreign.ptx/cubin/cuda`): checked launches of code anodize did not compile.

On the fake GPU of tests/fakecuda.py the runtime's GPU launch path runs up to cuda.core's
launch, so these tests see the exact arguments a foreign kernel receives (bare pointers and
scalars, no lengths, no hidden arguments) and every host-side check its declared signature
and contract allow.  The `gpu` twins launch the PTX, the cubin and CUDA C++ (NVRTC) for real.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize import DisjointSlice, Slice, f32, i32
import fakecuda

PTX = r"""
.version 7.0
.target sm_80
.address_size 64

.visible .entry vecadd_n(
    .param .u64 a,
    .param .u64 b,
    .param .u64 c,
    .param .u32 n
)
{
    .reg .pred %p<2>;
    .reg .f32 %f<4>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<11>;

    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u64 %rd3, [c];
    ld.param.u32 %r2, [n];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mov.u32 %r5, %tid.x;
    mad.lo.s32 %r1, %r3, %r4, %r5;
    setp.ge.s32 %p1, %r1, %r2;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    cvta.to.global.u64 %rd6, %rd3;
    mul.wide.s32 %rd7, %r1, 4;
    add.s64 %rd8, %rd4, %rd7;
    add.s64 %rd9, %rd5, %rd7;
    add.s64 %rd10, %rd6, %rd7;
    ld.global.f32 %f1, [%rd8];
    ld.global.f32 %f2, [%rd9];
    add.f32 %f3, %f1, %f2;
    st.global.f32 [%rd10], %f3;
DONE:
    ret;
}
"""

CUDA = r"""
template <typename T>
__global__ void vecadd_t(const T* a, const T* b, T* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
template __global__ void vecadd_t<float>(const float*, const float*, float*, int);
"""

SIG = {"a": Slice[f32], "b": Slice[f32], "c": DisjointSlice[f32], "n": i32}


def _contracted(k: az.foreign.ForeignKernel) -> az.foreign.ForeignKernel:
    return az.launch_contract(domain=1, block=128, requires=lambda a, b, c, n: len(a) >= n and len(b) >= n and len(c) >= n)(k)


def _refused(exc: type[Exception], needle: str, fn: object) -> None:
    with pytest.raises(exc) as e:
        fn()  # type: ignore[operator]
    assert needle in str(e.value), str(e.value)


def test_ptx_launch_passes_bare_pointers_and_keeps_the_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    dev, calls = fakecuda.record_launches(monkeypatch)
    k = _contracted(az.foreign.ptx(PTX, "vecadd_n", SIG))
    n = 300
    a, b, c = (dev.to_device(np.ones(n, np.float32)) for _ in range(3))
    cfg = az.LaunchConfig.for_num_elems(n, block=128)
    k[cfg](a, b, c, n)
    k[cfg](a, b, c, n)  # the repeated launch (memo / quick path) passes the same
    assert len(calls) == 2
    for call in calls:
        _stream, _config, handle, *flat = call
        assert handle == ("kernel handle", "vecadd_n")
        assert flat[:3] == [a.ptr, b.ptr, c.ptr] and int(flat[3]) == n and len(flat) == 4, flat
    assert k.compile("sm_90").abi == "foreign"
    _refused(az.ArgumentError, "parameter `c`", lambda: k[cfg](a, b, dev.empty(n, az.f64), n))
    _refused(az.AliasingError, "output `c`", lambda: k[cfg](a, b, b, n))
    _refused(az.ContractViolation, "len(c) >= n", lambda: k[cfg](a, b, dev.empty(n - 1, az.f32), n))
    _refused(az.LaunchError, "block", lambda: k[az.LaunchConfig(3, 256)](a, b, c, n))
    _refused(az.LaunchError, "not available", lambda: k[cfg].op(a, b, c, n))
    assert len(calls) == 2, "a refused launch launched"


def test_roles_and_contract_gate_the_safe_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    dev, calls = fakecuda.record_launches(monkeypatch)
    n = 64
    a, b, c = (dev.to_device(np.ones(n, np.float32)) for _ in range(3))
    cfg = az.LaunchConfig.for_num_elems(n, block=128)
    no_contract = az.foreign.ptx(PTX, "vecadd_n", SIG)
    _refused(az.LaunchError, "has no launch contract", lambda: no_contract[cfg](a, b, c, n))
    no_contract.unsafe_launch(cfg, a, b, c, n)  # the argument checks still apply
    _refused(az.AliasingError, "output `c`", lambda: no_contract.unsafe_launch(cfg, a, b, a, n))
    raw = az.foreign.ptx(PTX, "vecadd_n")  # no signature: only a raw unsafe launch
    _refused(az.LaunchError, "no declared signature", lambda: raw[cfg])
    raw.unsafe_launch(cfg, a, b, c, np.int32(n))
    assert [list(x[3:]) for x in calls] == [[a.ptr, b.ptr, c.ptr, n]] * 2
    cpu = az.device("cpu")
    x = cpu.to_device(np.ones(n, np.float32))
    _refused(az.LaunchError, "CUDA GPUs only", lambda: _contracted(az.foreign.ptx(PTX, "vecadd_n", SIG))[cfg](x, x, cpu.empty(n, az.f32), n))


def test_a_contract_over_several_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    dev, calls = fakecuda.record_launches(monkeypatch)
    k = az.launch_contract(
        domain=1,
        block=64,
        requires=lambda a, b, c, n: len(a) >= n
        and len(b) >= n
        and len(c) >= n * 2,
    )(az.foreign.ptx(PTX, "vecadd_n", SIG))
    assert k.contract is not None and k.contract.requires is not None
    assert [r.source for r in k.contract.requires.relations] == ["len(a) >= n", "len(b) >= n", "len(c) >= n * 2"]
    a = dev.to_device(np.ones(10, np.float32))
    _refused(az.ContractViolation, "len(c) >= n * 2", lambda: k[az.LaunchConfig.for_num_elems(10, block=64)](a, a, dev.empty(10, az.f32), 10))


def test_declaration_errors() -> None:
    _refused(az.ArgumentError, "no `.entry nope`", lambda: az.foreign.ptx(PTX, "nope", SIG))
    _refused(az.ArgumentError, "parameter `a`", lambda: az.foreign.ptx(PTX, "vecadd_n", {"a": np.float32}))
    k = az.launch_contract(domain=1, block=128, requires=lambda a, q: len(a) >= q)(az.foreign.ptx(PTX, "vecadd_n", SIG))
    _refused(az.ArgumentError, "names `q`", lambda: k.contract)


def test_ptx_file_and_cubin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "vecadd.ptx"
    src.write_text(PTX)
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas is not installed")
    out = tmp_path / "vecadd.cubin"
    subprocess.run([ptxas, "-arch=sm_90", str(src), "-o", str(out)], check=True)  # the PTX is valid
    dev, calls = fakecuda.record_launches(monkeypatch)
    for k in (az.foreign.ptx(src, "vecadd_n", SIG), az.foreign.cubin(out, "vecadd_n", SIG)):
        k = _contracted(k)
        n = 10
        a, b, c = (dev.to_device(np.ones(n, np.float32)) for _ in range(3))
        k[az.LaunchConfig.for_num_elems(n, block=128)](a, b, c, n)
    assert len(calls) == 2
    assert az.foreign.cubin(out, "vecadd_n", SIG).compile("sm_90").cubin == out.read_bytes()
    _refused(az.ArgumentError, "not a cubin", lambda: az.foreign.cubin(src, "vecadd_n", SIG))


def test_cuda_without_nvrtc_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from anodize.runtime import nvrtc

    try:
        from cuda.bindings import nvrtc as lib

        lib.nvrtcVersion()
        have = True
    except Exception:
        have = False
    k = _contracted(az.foreign.cuda(CUDA, "vecadd_t<float>", SIG))
    dev, calls = fakecuda.record_launches(monkeypatch)
    n = 8
    a, b, c = (dev.to_device(np.ones(n, np.float32)) for _ in range(3))
    if have:
        k[az.LaunchConfig.for_num_elems(n, block=128)](a, b, c, n)
        assert calls and "vecadd_t" in calls[0][2][1]
        _refused(az.LaunchError, "NVRTC", lambda: nvrtc.compile_cuda("__global__ void f( {", "f", "sm_90"))
    else:
        _refused(az.LaunchError, "NVRTC library", lambda: k[az.LaunchConfig.for_num_elems(n, block=128)](a, b, c, n))


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["ptx", "cuda"])
def test_foreign_kernel_runs_on_the_gpu(how: str) -> None:
    k = _contracted(az.foreign.ptx(PTX, "vecadd_n", SIG) if how == "ptx" else az.foreign.cuda(CUDA, "vecadd_t<float>", SIG))
    dev = az.device(0)
    n = 1000
    x, y = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
    a, b, c = dev.to_device(x), dev.to_device(y), dev.empty(n, az.f32)
    k[az.LaunchConfig.for_num_elems(n, block=128)](a, b, c, n)
    assert np.array_equal(c.to_host(), x + y)
