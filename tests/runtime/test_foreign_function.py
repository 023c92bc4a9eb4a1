"""Foreign device functions (`az.foreign.device_function`) called from anodize kernels: the call
lowers to a PTX call of an `.extern .func`, both PTX modules pass `ptxas -c` and link (nvlink here;
cuda.core's Linker at load time on a GPU), the CPU backend and the debug device refuse the call
at its line, the disk cache re-reads the function's PTX from the program, and the `gpu` twin
runs it (fixtures/accept/foreign_device_function.py; the rejects: fixtures/reject/foreign_function_calls.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize import f32, i32
from anodize.language.errors import ArgumentError, CheckError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def mod(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(ROOT / "fixtures" / "accept"))
    sys.modules.pop("foreign_device_function", None)
    import foreign_device_function

    return foreign_device_function


def test_the_call_is_a_ptx_call_of_an_extern_func(mod) -> None:
    ck = mod.scaled.compile("sm_90")
    assert ck.foreign == (("scale", "az_scale"),) and ck.links == (mod.SCALE_PTX,)
    assert ".extern .func  (.param .b32 func_retval0) az_scale" in ck.ptx
    assert "call.uni (retval0), az_scale, (param0, param1);" in ck.ptx
    assert ck.cubin is None  # relocatable: the loader links it with the function's PTX


@pytest.mark.skipif(shutil.which("ptxas") is None or shutil.which("nvlink") is None, reason="needs ptxas and nvlink")
def test_both_ptx_modules_assemble_relocatable_and_link(mod, tmp_path: Path) -> None:
    ck = mod.scaled.compile("sm_90")
    (tmp_path / "k.ptx").write_text(ck.ptx)
    (tmp_path / "f.ptx").write_text(ck.links[0])
    for name in ("k", "f"):
        subprocess.run(["ptxas", "-arch=sm_90", "-c", "-o", str(tmp_path / f"{name}.o"), str(tmp_path / f"{name}.ptx")], check=True)
    alone = subprocess.run(["nvlink", "-arch=sm_90", str(tmp_path / "k.o"), "-o", str(tmp_path / "alone.cubin")],
                           capture_output=True, text=True)
    assert alone.returncode != 0 and "az_scale" in alone.stdout + alone.stderr  # the extern is really unresolved alone
    subprocess.run(["nvlink", "-arch=sm_90", str(tmp_path / "k.o"), str(tmp_path / "f.o"), "-o", str(tmp_path / "k.cubin")], check=True)
    assert (tmp_path / "k.cubin").read_bytes().startswith(b"\x7fELF")


def test_the_loader_links_both_modules(mod, monkeypatch: pytest.MonkeyPatch) -> None:
    from anodize.runtime import cuda_device

    seen: dict[str, object] = {}

    class FakeLinker:
        def __init__(self, *parts, options):
            seen["parts"], seen["options"] = parts, options

        def link(self, target):
            seen["target"] = target
            return "linked"

    monkeypatch.setattr(cuda_device, "Linker", FakeLinker)
    monkeypatch.setattr(cuda_device, "ObjectCode", type("FakeObjectCode", (), {"from_ptx": staticmethod(lambda code, name: (name, code))}))
    ck = mod.scaled.compile("sm_90")
    assert cuda_device.link_foreign(ck, "sm_90") == "linked"
    assert seen["parts"] == (("scaled", ck.ptx.encode()), ("scaled.foreign0", mod.SCALE_PTX.encode()))
    assert seen["target"] == "cubin" and seen["options"].arch == "sm_90"


@pytest.mark.parametrize("where", ["cpu", "debug"])
def test_cpu_and_debug_refuse_at_the_call(mod, where: str) -> None:
    dev = az.device(where)
    a, c = dev.to_device(np.ones(8, np.float32)), dev.empty(8, az.f32)
    with pytest.raises(CheckError) as e:
        mod.scaled[az.LaunchConfig.for_num_elems(8, block=256)](a, c, np.float32(2), np.int32(3))
    (d,) = e.value.diagnostics
    assert d.code == "az-unsupported" and d.span.line == 37 and d.span.path.endswith("foreign_device_function.py")
    assert "`scale`, a foreign device function" in d.message and ("CPU backend" if where == "cpu" else "debug device") in d.message


def test_declaration_errors_at_run_time() -> None:
    ptx = "\n.visible .func (.param .b32 r) f(.param .b32 x)\n{\n ret;\n}\n"
    fn = az.foreign.device_function(ptx, "f", {"x": i32}, returns=i32)
    assert fn.params == (("x", "i32"),) and fn.ret == "i32"
    with pytest.raises(TypeError, match="call it from a kernel"):
        fn(1)
    with pytest.raises(ArgumentError, match="no `.func g`"):
        az.foreign.device_function(ptx, "g", {"x": i32}, returns=i32)
    with pytest.raises(ArgumentError, match="not a scalar type"):
        az.foreign.device_function(ptx, "f", {"x": az.Slice[f32]}, returns=i32)


def test_a_rebound_name_is_refused_at_compile(mod, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mod, "scale", lambda x, k: x * k)
    mod.scaled.store.clear()
    with pytest.raises(TypeError, match="is not the foreign device function `az_scale`"):
        mod.scaled.compile("sm_90")


def test_a_cache_hit_reads_the_functions_ptx_from_the_program(mod, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    first = mod.scaled.compile("sm_90")
    mod.scaled.store.clear()
    again = mod.scaled.compile("sm_90")
    assert again.from_cache and again.foreign == first.foreign and again.links == (mod.SCALE_PTX,)
    new = mod.SCALE_PTX.replace("mul.rn.f32", "add.rn.f32")  # the program now holds other PTX for the function
    monkeypatch.setattr(mod.scale, "ptx", new)
    mod.scaled.store.clear()
    assert mod.scaled.compile("sm_90").links == (new,)


def test_build_skips_a_kernel_calling_a_foreign_function(tmp_path: Path) -> None:
    from anodize.build import build_package

    logs: list[str] = []
    with pytest.raises(ValueError, match="no kernel was built"):
        build_package(ROOT / "fixtures" / "accept" / "foreign_device_function.py", "sm_90", tmp_path, {}, logs.append)
    assert any("skipped `scaled`: it calls foreign device functions (az_scale)" in line for line in logs)


@pytest.mark.gpu
def test_foreign_function_runs_on_the_gpu(mod) -> None:
    dev = az.device(0)
    n = 1000
    x = np.random.rand(n).astype(np.float32)
    a, c = dev.to_device(x), dev.empty(n, az.f32)
    mod.scaled[az.LaunchConfig.for_num_elems(n, block=256)](a, c, np.float32(2.5), np.int32(3))
    np.testing.assert_allclose(c.to_host(), x * np.float32(2.5) + np.float32(3.0), rtol=1e-6)
