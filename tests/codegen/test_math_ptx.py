"""Each kernel math function lowers to its libdevice function or LLVM intrinsic, for f32
and f64, and the PTX passes ptxas; `az.threadfence()` / `az.warp.sync()` lower to
`membar.gl` / `bar.warp.sync -1` (and run on the CPU backend)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import math_cases as M
import numpy as np
import pytest
from cg_helpers import ARCH_PARAMS, ARCHS, run_cpu

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread
from anodize.codegen.driver import compile_cpu, compile_gpu
from anodize.codegen.llvm.lower import INTRINSIC_MATH
from anodize.codegen.gpu.ptx import libdevice_path, libdevice_symbol
from anodize.language.vocab import MATH_FUNCS, MATH_PREDICATES

needs_libdevice = pytest.mark.skipif(libdevice_path() is None, reason="libdevice is not installed")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return M.load_kernels(tmp_path_factory.mktemp("mathptx"))


@pytest.fixture(scope="module")
def compiled(kernels: Any) -> dict[str, Any]:
    names = [f"{g}_{t}" for t in ("f32", "f64") for g in ("unary", "binary", "fma", "ldexp", "pred")]
    return {n: compile_gpu(getattr(kernels, n if not n.startswith("ldexp") else n + "_i64"), ptxas=False) for n in names}


def _group(name: str) -> str:
    if name in MATH_PREDICATES:
        return "pred"
    if name in ("fma", "ldexp"):
        return name
    return "unary" if MATH_FUNCS[name] == 1 else "binary"


def expected_call(name: str, bits: int) -> str:
    """The callee `math.<name>` must declare in the unoptimised LLVM IR."""
    fs = "f32" if bits == 32 else "f64"
    if name in INTRINSIC_MATH:
        return f"llvm.{INTRINSIC_MATH[name]}.{fs}"
    return libdevice_symbol(name, bits)


@needs_libdevice
@pytest.mark.parametrize("bits", [32, 64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", [n for n in MATH_FUNCS if n not in MATH_PREDICATES])
def test_lowers_to_libdevice_or_intrinsic(name: str, bits: int, compiled: dict[str, Any]) -> None:
    t = M.TYPES[bits]
    ck = compiled[f"{_group(name)}_{t}"]
    ret = "float" if bits == 32 else "double"
    callee = expected_call(name, bits)
    args = {"fma": f"{ret}, {ret}, {ret}", "ldexp": f"{ret}, i32"}.get(name, ", ".join([ret] * MATH_FUNCS[name]))
    decls = re.sub(r' %"[^"]*"', "", ck.llvm_ir)  # drop parameter names
    assert f'declare {ret} @"{callee}"({args})' in decls, (callee, args)
    if bits == 32:
        assert "double" not in ck.llvm_ir  # f32 stays f32
    assert "__nv_" not in ck.ptx  # every libdevice function was linked in and inlined


@needs_libdevice
@pytest.mark.parametrize("bits", [32, 64], ids=["f32", "f64"])
def test_classification_is_an_fcmp(bits: int, compiled: dict[str, Any]) -> None:
    ir = compiled[f"pred_{M.TYPES[bits]}"].llvm_ir
    assert "fcmp uno" in ir and "fcmp oeq" in ir and "fcmp one" in ir  # isnan, isinf, isfinite
    assert "__nv_is" not in ir and "__nv_finite" not in ir


def test_ldexp_exponent_is_clamped_not_wrapped(kernels: Any) -> None:
    ck = compile_gpu(kernels.ldexp_f32_i64, ptxas=False)
    assert "trunc i64" in ck.llvm_ir and "4096" in ck.llvm_ir


@needs_libdevice
@pytest.mark.parametrize("arch", ARCH_PARAMS)
def test_ptxas_accepts_every_math_kernel(arch: str, kernels: Any, ptxas_ok: Any) -> None:
    for t in ("f32", "f64"):
        for g in ("unary", "binary", "fma", "ldexp_{t}_i32", "ldexp_{t}_i64", "pred"):
            name = g.format(t=t) if "{" in g else f"{g}_{t}"
            ck = compile_gpu(getattr(kernels, name), arch, ptxas=False)
            ptxas_ok(ck.ptx, arch)


# ---- fences --------------------------------------------------------------------------------------
@launch_contract(domain=1, block=64)
@kernel
def fenced(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    az.threadfence()
    az.warp.sync()
    if i in c:
        c[i] = a[i] * 2.0


def test_fences_lower_to_membar_and_warp_sync(ptxas_ok: Any) -> None:
    ck = compile_gpu(fenced, ptxas=False)
    assert 'call void @"llvm.nvvm.membar.gl"()' in ck.llvm_ir
    assert 'call void @"llvm.nvvm.bar.warp.sync"(i32 -1)' in ck.llvm_ir
    assert re.search(r"membar\.gl;", ck.ptx) and re.search(r"bar\.warp\.sync\s+-1;", ck.ptx)
    for arch in ARCHS:
        ptxas_ok(compile_gpu(fenced, arch, ptxas=False).ptx, arch)


@pytest.mark.parametrize("split", [True, False])
def test_fences_run_on_the_cpu_backend(split: bool) -> None:
    ck = compile_cpu(fenced, split_barriers=split)
    assert "fence seq_cst" in ck.llvm_ir
    # warp.sync: where each warp's lanes split (the region backend), or a rendezvous of the
    # warp's host threads (one host thread per GPU thread)
    assert ("__az_cpu_vote" in ck.llvm_ir) is not split
    a = np.arange(100, dtype=np.float32)
    c = np.zeros(100, np.float32)
    assert run_cpu(ck, (2,), (64,), a, c).count == 0
    np.testing.assert_array_equal(c, a * 2)


def test_fence_as_a_value_is_rejected(tmp_path: Path) -> None:
    from anodize.language.diagnostics import CheckError

    src = tmp_path / "fence_value.py"
    src.write_text(
        "import anodize as az\nfrom anodize import DisjointSlice, f32, kernel, launch_contract, thread\n\n\n"
        "@launch_contract(domain=1, block=64)\n@kernel\ndef k(c: DisjointSlice[f32]) -> None:\n"
        "    i = thread.index_1d()\n    x = az.threadfence()\n    if i in c:\n        c[i] = 1.0\n"
    )
    mod = M.load_module(src)
    with pytest.raises(CheckError) as info:
        compile_cpu(mod.k)
    assert "fence_value.py:9" in str(info.value)
