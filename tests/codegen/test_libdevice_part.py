"""A module links only the libdevice functions it calls, with what they call (codegen/gpu/ptx.py
`_libdevice`): the PTX is byte-identical to the PTX with all of libdevice linked, for every
math function of the language at f32 and f64 and for the GELU tile kernel; each part is cut
once a process."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import cg_kernels as K
import pytest

from anodize.codegen.driver import compile_gpu
from anodize.codegen.gpu import ptx
from anodize.codegen.llvm.binding import binding

sys.path.insert(0, str(Path(__file__).parent))
import tile_mma_cases as C  # noqa: E402
from test_block_slots import canonical  # noqa: E402
from tile_cases import kernel_ir  # noqa: E402

pytestmark = pytest.mark.skipif(ptx.libdevice_path() is None, reason="libdevice is not installed")

_calls = 0


def _emit(art: Any, parts: bool, monkeypatch: pytest.MonkeyPatch) -> str:
    """`emit_ptx` past the test session's memo of it (tests/conftest.py): a comment makes the text new."""
    global _calls
    _calls += 1
    with monkeypatch.context() as m:
        m.setattr(ptx, "LIBDEVICE_PARTS", parts)
        return canonical(ptx.emit_ptx(f"{art.llvm_ir}\n; libdevice part call {_calls}\n", art.entry, "sm_90a" if ".target sm_90a" in art.ptx else "sm_90")[1])


def test_math_kernels_ptx_is_byte_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    for kernel in (K.math32, K.math64):
        art = compile_gpu(kernel, "sm_90", ptxas=False)
        assert ptx.libdevice_calls(art.llvm_ir)
        assert _emit(art, True, monkeypatch) == _emit(art, False, monkeypatch), kernel


@pytest.mark.slow
def test_every_math_function_ptx_is_byte_identical(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import math_cases as M

    kernels = M.load_kernels(tmp_path)
    names = [f"{g}_{t}" for t in ("f32", "f64") for g in ("unary", "binary", "fma", "ldexp", "pred")]
    for n in names:
        art = compile_gpu(getattr(kernels, n if not n.startswith("ldexp") else n + "_i64"), "sm_90", ptxas=False)
        if ptx.uses_libdevice(art.llvm_ir):
            assert _emit(art, True, monkeypatch) == _emit(art, False, monkeypatch), n


def test_gelu_tile_kernel_ptx_is_byte_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    art = compile_gpu(kernel_ir(C.source("gelu_residual", 128, 256, 64, 8, "f16"), "k"), "sm_90", ptxas=False)
    assert ptx.libdevice_calls(art.llvm_ir) == {"__nv_tanhf"}
    assert _emit(art, True, monkeypatch) == _emit(art, False, monkeypatch)


def test_a_part_defines_what_it_is_cut_for_and_is_cut_once(monkeypatch: pytest.MonkeyPatch) -> None:
    llvm = binding()
    parsed: list[int] = []
    real = llvm.parse_bitcode

    def parse(data: bytes, context: Any = None) -> Any:
        parsed.append(len(data))
        return real(data, context)

    monkeypatch.setattr(llvm, "parse_bitcode", parse)
    want = frozenset({"__nv_expf", "__nv_sinf"})
    ptx._PART_BITCODE.pop(want, None)
    part = ptx._part_bitcode(want)
    assert ptx._part_bitcode(want) is part and len(parsed) == 1  # cut from one parse of libdevice, then kept
    mod = real(part, llvm.create_context())
    defined = {f.name for f in mod.functions if not f.is_declaration}
    assert want <= defined and len(defined) < 20  # libdevice defines ~575


def test_a_first_compile_for_another_arch_cuts_its_part(tmp_path: Path) -> None:
    """A fresh process whose first libdevice compile targets sm_90a (no sm_90 target machine made
    yet: cutting the part makes one) finishes (the cut once waited on the lock it held)."""
    import subprocess

    art = compile_gpu(K.math32, "sm_90", ptxas=False)
    src = tmp_path / "m.ll"
    src.write_text(art.llvm_ir)
    code = (f"from anodize.codegen.gpu import ptx\n"
            f"print(len(ptx.emit_ptx(open({str(src)!r}).read(), {art.entry!r}, 'sm_90a')[1]) > 0)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr[-2000:]
