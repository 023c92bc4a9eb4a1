"""`ANODIZE_TILE_LDSM_XOR=1` (codegen/tile/mma_regs.py `ldsm_xor`): the register-A matmul's
ldmatrix addresses as one lane base a tile plus an immediate, the k-step's XOR inside the asm
(`inline_ptx.ldsm_kstep`).  The address arithmetic is checked exhaustively against the swizzled
offsets the tile is staged with (`staging._rowmajor`): both built as LLVM IR by the compiler's own
functions and run on the host (the XOR and immediate `ldsm_kstep` puts in its asm are spelled in
IR beside them); the PTX of by-ops attention keeps its ldmatrix count, loses the hoisted offset
registers and passes ptxas without spills at d128 / 4 warps."""

from __future__ import annotations

import ctypes
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import llvmlite.binding as llvm
import llvmlite.ir as ir
import pytest

from anodize.codegen.tile.mma_regs import _lane_base
from anodize.codegen.tile.staging import _rowmajor

I32 = ir.IntType(32)
ROOT = Path(__file__).resolve().parents[2]


def c(v: int | ir.Value) -> ir.Value:
    return ir.Constant(I32, v) if isinstance(v, int) else v


def _kstep(b: ir.IRBuilder, full: ir.Value, step: ir.Value, imm: ir.Value) -> ir.Value:
    """What `ldsm_kstep(b, full, step, imm)` addresses: (full ^ (step % 4) << 5) + imm + 128 (step // 4)."""
    x = b.shl(b.and_(step, c(3)), c(5))
    return b.add(b.xor(full, x), b.add(imm, b.mul(b.lshr(step, c(2)), c(128))))


def _cases(cpr: int) -> dict[str, Callable[[ir.IRBuilder, list[ir.Value]], tuple[ir.Value, ir.Value]]]:
    """Per operand, (old, new) addresses of lane `lane` (warp `w`: 32 rows a warp) at outer index
    `i` and inner index `j`, built by mma_regs' old and new paths' arithmetic."""
    def parts(b: ir.IRBuilder, lane: ir.Value) -> tuple[ir.Value, ...]:
        j8, l7, lr, hi = b.lshr(lane, c(3)), b.and_(lane, c(7)), b.and_(lane, c(15)), b.lshr(lane, c(4))
        return j8, l7, lr, hi

    def b_trans(b: ir.IRBuilder, a: list[ir.Value]) -> tuple[ir.Value, ir.Value]:  # rows n, k-step kk = i, npair = j
        base, lane, _, kk, npair = a
        j8, l7, _, _ = parts(b, lane)
        n_lane = b.add(b.shl(b.lshr(j8, c(1)), c(3)), l7)
        old = b.add(base, _rowmajor(b, b.add(b.mul(npair, c(16)), n_lane), b.add(b.mul(kk, c(2)), b.and_(j8, c(1))), cpr))
        new = _kstep(b, _lane_base(b, base, n_lane, b.and_(j8, c(1)), cpr), kk, b.mul(npair, c(16 * cpr * 16)))
        return old, new

    def b_rows_k(b: ir.IRBuilder, a: list[ir.Value]) -> tuple[ir.Value, ir.Value]:  # rows k, kk = i, column pair = j
        base, lane, _, kk, npair = a
        _, _, lr, hi = parts(b, lane)
        old = b.add(base, _rowmajor(b, b.add(b.mul(kk, c(16)), lr), b.add(b.mul(npair, c(2)), hi), cpr))
        new = _kstep(b, _lane_base(b, base, lr, hi, cpr), npair, b.mul(kk, c(16 * cpr * 16)))
        return old, new

    def a_resident(b: ir.IRBuilder, a: list[ir.Value]) -> tuple[ir.Value, ir.Value]:  # rows 32 w + 16 mi + lr, kk = i, mi = j
        base, lane, w, kk, mi = a
        _, _, lr, hi = parts(b, lane)
        a_row = b.add(b.mul(w, c(32)), lr)
        old = b.add(base, _rowmajor(b, b.add(a_row, b.mul(mi, c(16))), b.add(b.mul(kk, c(2)), hi), cpr))
        new = _kstep(b, _lane_base(b, base, a_row, hi, cpr), kk, b.mul(mi, c(16 * cpr * 16)))
        return old, new

    return {"b_trans": b_trans, "b_rows_k": b_rows_k, "a_resident": a_resident}


@pytest.fixture(scope="module")
def jit() -> Callable[[int, str], Callable[..., int]]:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    keep: list[object] = []

    def build(cpr: int, case: str) -> Callable[..., int]:
        mod = ir.Module(name=f"ldsm_{case}_{cpr}")
        mod.triple = llvm.get_process_triple()
        fn = ir.Function(mod, ir.FunctionType(I32, [I32] * 5), "diff")
        b = ir.IRBuilder(fn.append_basic_block())
        old, new = _cases(cpr)[case](b, list(fn.args))
        b.ret(b.sub(old, new))
        ref = llvm.parse_assembly(str(mod))
        eng = llvm.create_mcjit_compiler(ref, llvm.Target.from_default_triple().create_target_machine())
        eng.finalize_object()
        keep.append(eng)
        return ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_int32] * 5)(eng.get_function_address("diff"))

    return build


@pytest.mark.parametrize("cpr", [8, 16])
@pytest.mark.parametrize("case", ["b_trans", "b_rows_k", "a_resident"])
def test_base_plus_immediate_addresses_are_the_swizzled_offsets(cpr: int, case: str, jit: Callable[[int, str], Callable[..., int]]) -> None:
    diff = jit(cpr, case)
    seen = 0
    for base in (0, 128, 16384, 49152 + 256):
        for lane in range(32):
            for w in range(4):
                for i in range(8 if case == "b_rows_k" else cpr // 2):  # k-steps (rows k: row blocks of 16)
                    for j in range({"b_trans": 8, "b_rows_k": cpr // 2, "a_resident": 4}[case]):
                        assert diff(base, lane, w, i, j) == 0, (case, cpr, base, lane, w, i, j)
                        seen += 1
    assert seen > 4_000


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_by_ops_attention_d128_w4_keeps_its_ldmatrix_and_loses_the_spills(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_TILE_ATTN_WGMMA", "0")  # (the mma.sync loop's mix: test_tile_attention_wgmma.py pins wgmma's)
    sys.path.insert(0, str(ROOT / "tools"))
    from ptx_mix import analyse, attention_ptx, row_counts

    def mix(mode: str) -> tuple[dict[str, int], dict[str, int]]:
        ptx = attention_ptx("exp2", 4, 128, mode)
        assert ptx is not None
        rep = analyse(ptx)
        main = rep.main_loop()
        assert main is not None
        return {**row_counts(main.mix), "all": main.total}, rep.resources

    before, res0 = mix("ops+p+r+f+e+g")
    after, res1 = mix("ops+p+r+f+e+g+x")
    assert after["ldmatrix"] == before["ldmatrix"] == 80 and after["mma.sync"] == 256
    assert res0["spill_st"] > 100  # the hoisted offsets: ptxas at its cap and spilling
    assert res1["spill_st"] <= 32 and after["all"] < before["all"]
