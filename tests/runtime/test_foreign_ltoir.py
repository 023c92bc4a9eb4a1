"""Foreign device functions linked from LTO-IR (`az.foreign.device_function` with LTO-IR bytes, a
`.ltoir` file, or CUDA C++ with `kind="cuda"`): NVRTC compiles CUDA C++ to LTO-IR, nvJitLink links
it with the kernel's PTX into a cubin for sm_90 (both are compilers: no GPU here), each function
is checked against its declaration (symbol, widths, arch), a refusal is a located `az-foreign-link`,
and the linked cubin's cache key holds the LTO-IR's hash and nvJitLink's version.  Tests needing
the libraries skip where they are absent (CI); the `gpu` twin runs the kernels
(fixtures/accept/foreign_device_function.py; the PTX path: tests/runtime/test_foreign_function.py)."""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.language.diagnostics import CheckError
from anodize.language.errors import ArgumentError
from anodize.runtime import foreign_link, lazy
from anodize.runtime.nvrtc import NvrtcFailure, compile_ltoir

ROOT = Path(__file__).resolve().parents[2]
AXPB = 'extern "C" __device__ float az_axpb(float x, float a, int b) { return fmaf(x, a, (float)b); }\n'


def _have_libs() -> bool:
    try:
        foreign_link.nvjitlink_version()
        compile_ltoir(AXPB, "sm_80")
    except (foreign_link.LinkFailure, NvrtcFailure):
        return False
    return True


needs_libs = pytest.mark.skipif(not _have_libs(), reason="needs nvJitLink and NVRTC (pip install 'anodize[ltoir]')")


def _cubin_sm(cubin: bytes) -> int:
    """The SM version a CUDA ELF is built for (e_flags bits 8-15 in the current ELF ABI)."""
    assert cubin.startswith(b"\x7fELF") and cubin[7] == 0x41  # ELFOSABI_CUDA
    return (struct.unpack_from("<I", cubin, 0x30)[0] >> 8) & 0xFF


@pytest.fixture()
def mod(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(ROOT / "fixtures" / "accept"))
    sys.modules.pop("foreign_device_function", None)
    import foreign_device_function

    return foreign_device_function


def _module(tmp_path: Path, code: str, decl: str, name: str = "lto_mod"):
    """A module in `tmp_path` declaring `fn = az.foreign.device_function(<code>, <decl>)` and a
    kernel `k` calling `fn(a[i], k, n)`; imported."""
    (tmp_path / f"{name}.py").write_text(
        "from pathlib import Path\nimport anodize as az\nfrom anodize import DisjointSlice, Slice, f32, f64, i32, kernel, launch_contract, thread\n"
        f"fn = az.foreign.device_function({code}, {decl})\n\n\n"
        "@launch_contract(domain=1, block=256, requires=lambda a, c: len(a) == len(c))\n@kernel\n"
        "def k(a: Slice[f32], c: DisjointSlice[f32], x: f32, n: i32) -> None:\n    i = thread.index_1d()\n    if i in c:\n"
        "        c[i] = f32(fn(a[i], x, n))\n"
    )
    spec = importlib.util.spec_from_file_location(name, tmp_path / f"{name}.py")
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


def _refusal(kernel, arch: str = "sm_90"):
    kernel.store.clear()
    with pytest.raises(CheckError) as e:
        kernel.compile(arch)
    (d,) = e.value.diagnostics
    assert d.code == "az-foreign-link"
    return d


AXPB_DECL = '"az_axpb", {"x": f32, "a": f32, "b": i32}, returns=f32'


@needs_libs
def test_cuda_cxx_compiles_to_ltoir_and_links_into_an_sm_90_cubin(mod) -> None:
    ck = mod.affine.compile("sm_90")
    assert ck.foreign == (("axpb", "az_axpb"),) and ck.cubin is None
    (code,) = ck.links
    assert isinstance(code, bytes) and code.startswith(foreign_link.LTOIR_MAGIC)
    assert ".extern .func  (.param .b32 func_retval0) az_axpb" in ck.ptx
    alone = foreign_link.LinkFailure
    with pytest.raises(alone) as e:  # the kernel's PTX alone does not link: the call is really external
        foreign_link.link_cubin(ck.ptx, (), "sm_90", "affine")
    assert e.value.reason == "symbol" and "az_axpb" in e.value.log
    cubin = foreign_link.link_cubin(ck.ptx, ck.links, "sm_90", ck.name)
    assert _cubin_sm(cubin) == 90 and b"affine" in cubin and b"az_axpb" in cubin
    assert _cubin_sm(foreign_link.link_cubin(mod.affine.compile("sm_80").ptx, mod.affine.compile("sm_80").links, "sm_80")) == 80


@needs_libs
def test_an_ltoir_and_a_ptx_function_link_together(mod) -> None:
    ck = mod.mixed.compile("sm_90")
    assert [type(x) for x in ck.links] in ([str, bytes], [bytes, str]) and mod.SCALE_PTX in ck.links
    cubin = foreign_link.link_cubin(ck.ptx, ck.links, "sm_90", ck.name)
    assert _cubin_sm(cubin) == 90 and b"az_scale" in cubin and b"az_axpb" in cubin


@needs_libs
def test_the_loader_links_ltoir_through_nvjitlink(mod, monkeypatch: pytest.MonkeyPatch) -> None:
    from anodize.runtime import cuda_device

    monkeypatch.setattr(cuda_device, "ObjectCode", type("FakeObjectCode", (), {"from_cubin": staticmethod(lambda code, name: (name, code))}))
    monkeypatch.setattr(cuda_device, "Linker", None)  # cuda.core's Linker is the PTX-only path
    ck = mod.affine.compile("sm_90")
    name, cubin = cuda_device.link_foreign(ck, "sm_90")
    assert name == "affine" and _cubin_sm(cubin) == 90


@needs_libs
@pytest.mark.parametrize("given", ["bytes", "file"])
def test_ltoir_given_as_bytes_or_a_file(tmp_path: Path, given: str) -> None:
    data = compile_ltoir(AXPB, "sm_80")  # LTO-IR for an older GPU links into a newer one's cubin
    (tmp_path / "axpb.ltoir").write_bytes(data)
    code = "Path(__file__).with_name('axpb.ltoir')" if given == "file" else "Path(__file__).with_name('axpb.ltoir').read_bytes()"
    m = _module(tmp_path, code, AXPB_DECL, name=f"lto_{given}")
    assert m.fn.kind == "ltoir" and m.fn.ltoir == data
    ck = m.k.compile("sm_90")
    assert ck.links == (data,) and _cubin_sm(foreign_link.link_cubin(ck.ptx, ck.links, "sm_90")) == 90


@needs_libs
def test_a_wrong_signature_is_refused_at_the_declaration(tmp_path: Path) -> None:
    (tmp_path / "axpb.ltoir").write_bytes(compile_ltoir(AXPB, "sm_90"))
    m = _module(tmp_path, "Path(__file__).with_name('axpb.ltoir')", '"az_axpb", {"x": f64, "a": f32, "b": i32}, returns=f32', name="lto_sig")
    d = _refusal(m.k)
    assert d.span.path.endswith("lto_sig.py") and d.span.line == 4
    assert "`az_axpb` is declared `(64, 32, 32) -> 32`, but its LTO-IR defines `(32, 32, 32) -> 32`" in d.message
    assert "32 bits" in (d.help or "")


@needs_libs
def test_a_missing_or_mangled_symbol_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.ltoir").write_bytes(compile_ltoir(AXPB.replace('extern "C" ', ""), "sm_90"))  # C++ linkage: mangled
    m = _module(tmp_path, "Path(__file__).with_name('f.ltoir')", AXPB_DECL, name="lto_missing")
    d = _refusal(m.k)
    assert d.span.line == 4 and "the LTO-IR given for `az_axpb` defines no device function `az_axpb`" in d.message
    assert 'extern \\"C\\"' in (d.help or "") or 'extern "C"' in (d.help or "")


@needs_libs
def test_ltoir_for_a_newer_gpu_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f.ltoir").write_bytes(compile_ltoir(AXPB, "sm_100"))
    m = _module(tmp_path, "Path(__file__).with_name('f.ltoir')", AXPB_DECL, name="lto_arch")
    d = _refusal(m.k, "sm_90")
    assert "is for a newer GPU than sm_90" in d.message and "older GPU" in (d.help or "")
    assert m.k.compile("sm_100").links  # it links for the GPU it was built for


@needs_libs
def test_cuda_cxx_that_does_not_compile_is_located(tmp_path: Path) -> None:
    m = _module(tmp_path, repr('extern "C" __device__ float az_axpb(float x, float a, int b) { return x *; }'),
                AXPB_DECL + ', kind="cuda"', name="lto_cxx")
    d = _refusal(m.k)
    assert d.span.line == 4 and "does not compile to LTO-IR for sm_90" in d.message and "error" in d.message


def test_no_nvjitlink_is_a_located_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing():
        raise ImportError("No module named 'cuda.bindings.nvjitlink'")

    monkeypatch.setattr(lazy, "cuda_nvjitlink", missing)
    foreign_link.nvjitlink_version.cache_clear()
    foreign_link._ltoir_signature.cache_clear()
    (tmp_path / "f.ltoir").write_bytes(foreign_link.LTOIR_MAGIC + b"\0" * 64)  # never read: no linker
    m = _module(tmp_path, "Path(__file__).with_name('f.ltoir')", AXPB_DECL, name="lto_nolib")
    d = _refusal(m.k)
    assert d.span.line == 4 and "cannot be linked here" in d.message and "anodize[ltoir]" in (d.help or "")
    foreign_link.nvjitlink_version.cache_clear()


def test_a_ptx_function_is_checked_against_its_declaration_too(tmp_path: Path) -> None:
    ptx = ".visible .func (.param .b64 r) az_axpb(.param .b32 x, .param .b32 a, .param .b32 b)\n{\n ret;\n}\n"
    m = _module(tmp_path, repr(ptx), AXPB_DECL, name="ptx_sig")
    d = _refusal(m.k)
    assert "declared `(32, 32, 32) -> 32`, but its PTX defines `(32, 32, 32) -> 64`" in d.message
    assert foreign_link.func_signature(ptx, "az_axpb") == ((32, 32, 32), 64)
    assert foreign_link.func_signature(".extern .func (.param .b32 r) f(.param .b32 x);", "f") is None  # a declaration defines nothing
    assert foreign_link.func_signature(".visible .func f(.param .align 8 .b8 s[16])\n{\n}", "f") == ((128,), None)


def test_declarations_refused_at_run_time() -> None:
    with pytest.raises(ArgumentError, match="is not LTO-IR"):
        az.foreign.device_function(b"not lto-ir", "f", {"x": az.f32}, returns=az.f32)
    with pytest.raises(ArgumentError, match="is not a kind of device code"):
        az.foreign.device_function("x", "f", {"x": az.f32}, returns=az.f32, kind="fatbin")
    fn = az.foreign.device_function(AXPB, "az_axpb", {"x": az.f32, "a": az.f32, "b": az.i32}, returns=az.f32, kind="cuda")
    assert fn.kind == "cuda" and fn.source == AXPB and fn.line > 0 and fn.path == __file__


@needs_libs
def test_the_link_cache_key_holds_the_ltoir_hash_and_nvjitlink_version(mod, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import hashlib

    ck = mod.affine.compile("sm_90")
    inputs = foreign_link.link_inputs(ck.ptx, ck.links, "sm_90")
    assert inputs["links"] == [["ltoir", hashlib.sha256(ck.links[0]).hexdigest()]]
    assert inputs["nvjitlink"] == foreign_link.nvjitlink_version() and inputs["arch"] == "sm_90"
    other = compile_ltoir(AXPB.replace("fmaf(x, a, (float)b)", "x * a + b"), "sm_90")
    assert foreign_link.link_inputs(ck.ptx, (other,), "sm_90") != inputs
    monkeypatch.setattr(foreign_link, "nvjitlink_version", lambda: "99.0")
    assert foreign_link.link_inputs(ck.ptx, ck.links, "sm_90") != inputs
    monkeypatch.undo()
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    foreign_link._LINKED.clear()
    first = foreign_link.link_cubin(ck.ptx, ck.links, "sm_90", "affine")
    foreign_link._LINKED.clear()
    monkeypatch.setattr(foreign_link, "_link", lambda *a, **k: pytest.fail("linked again: the disk cache missed"))
    assert foreign_link.link_cubin(ck.ptx, ck.links, "sm_90", "affine") == first


@needs_libs
def test_a_cache_hit_reads_the_functions_code_from_the_program(mod, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    first = mod.affine.compile("sm_90")
    mod.affine.store.clear()
    again = mod.affine.compile("sm_90")
    assert again.from_cache and again.links == first.links
    monkeypatch.setattr(mod.axpb, "source", AXPB.replace("fmaf(x, a, (float)b)", "x * a - b"))
    mod.affine.store.clear()
    assert mod.affine.compile("sm_90").links != first.links


@pytest.mark.gpu
@pytest.mark.parametrize("which", ["affine", "mixed"])
def test_ltoir_functions_run_on_the_gpu(mod, which: str) -> None:
    dev = az.device(0)
    n = 1000
    x = np.random.rand(n).astype(np.float32)
    a, c = dev.to_device(x), dev.empty(n, az.f32)
    getattr(mod, which)[az.LaunchConfig.for_num_elems(n, block=256)](a, c, np.float32(2.5), np.int32(3))
    want = x * np.float32(2.5) + np.float32(3.0)
    np.testing.assert_allclose(c.to_host(), want * 2 if which == "mixed" else want, rtol=1e-6)
