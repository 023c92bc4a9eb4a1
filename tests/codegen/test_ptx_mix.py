"""tools/ptx_mix.py: the per-loop instruction mix of a PTX kernel (natural loops of the CFG, nested
ones on their own), its opcode categories, and ptxas's resources."""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from ptx_mix import analyse, classify, row_counts  # noqa: E402

# an entry whose outer loop (L_outer) holds a block placed after the loop's latch (as LLVM lays
# out a loop with a rare path) and an inner loop (L_inner); a straight tail after both
PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
	.reg .pred %p<4>;
	.reg .b32 %r<40>;
	.reg .b64 %rd<4>;
	.reg .b16 %rs<4>;
	.shared .align 16 .b8 buf[1024];
	mov.u32 %r1, 0;
	ld.param.u64 %rd1, [p];
$L_outer:
	cp.async.wait_group 1;
	bar.sync 0;
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r2, %r3, %r4, %r5}, [%r1];
	ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r6, %r7, %r8, %r9}, [%r1];
	mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%r10, %r11, %r12, %r13}, {%r2, %r3, %r4, %r5}, {%r6, %r7}, {%r10, %r11, %r12, %r13};
	@%p1 bra $L_rare;
$L_back:
	mov.u32 %r20, 0;
$L_inner:
	ex2.approx.ftz.f32 %r14, %r14;
	fma.rn.f32 %r15, %r14, %r14, %r15;
	shfl.sync.bfly.b32 %r16, %r15, 1, 31, -1;
	add.s32 %r20, %r20, 1;
	setp.lt.s32 %p2, %r20, 4;
	@%p2 bra $L_inner;
	cvt.rn.f16x2.f32 %r17, %r14, %r15;
	cp.async.cg.shared.global [%r1], [%rd1], 16;
	cp.async.commit_group;
	add.s32 %r1, %r1, 1;
	setp.lt.s32 %p3, %r1, 8;
	@%p3 bra $L_outer;
	st.global.v2.f32 [%rd1], {%r10, %r11};
	st.global.b16 [%rd1], %rs1;
	ret;
$L_rare:
	ld.global.v4.b32 {%r30, %r31, %r32, %r33}, [%rd1];
	st.shared.v4.b32 [%r1], {%r30, %r31, %r32, %r33};
	bra.uni $L_back;
}
"""


def test_loops_are_the_natural_loops_with_blocks_placed_anywhere() -> None:
    rep = analyse(PTX, resources=False)
    by = {lp.header: lp for lp in rep.loops}
    assert set(by) == {"$L_outer", "$L_inner"}
    outer, inner = by["$L_outer"], by["$L_inner"]
    assert (outer.depth, inner.depth) == (0, 1) and inner.blocks < outer.blocks
    assert "$L_rare" in outer.blocks  # (placed after the return, still the loop's)
    assert outer.mix["mma.m16n8k16"] == 1 and outer.mix["ldmatrix.x4"] == 1 and outer.mix["ldmatrix.trans.x4"] == 1
    assert outer.mix["st.shared.128"] == 1 and outer.mix["ld.global.128"] == 1 and outer.mix["ex2"] == 1
    assert inner.mix == Counter({"ex2": 1, "fma.f32": 1, "shfl": 1})
    assert inner.total == 6
    assert "st.global.64" not in outer.mix and rep.kernel["st.global.64"] == 1 and rep.kernel["st.global.16"] == 1
    assert rep.main_loop() is outer


def test_categories_and_the_table_columns() -> None:
    assert classify("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16") == "wgmma"
    assert classify("wgmma.fence.sync.aligned") == "wgmma.fence"
    assert classify("ld.shared.v2.b32") == "ld.shared.64" and classify("st.shared.b16") == "st.shared.16"
    assert classify("ld.global.nc.v4.b32") == "ld.global.128"
    assert classify("cp.async.ca.shared.global") == "cp.async" and classify("cp.async.wait_group") == "cp.async.wait_group"
    assert classify("cvt.rn.f16.f32") == "cvt.f16" and classify("cvt.rn.f16x2.f32") == "cvt.f16x2"
    assert classify("add.s32") is None and classify("mov.b32") is None
    cells = row_counts(Counter({"wgmma": 2, "wgmma.fence": 1, "mma.m16n8k16": 3, "ld.shared.128": 1, "ld.shared.32": 2,
                                "cp.async.commit_group": 1, "cvt.f16": 4, "cvt.f16x2": 5}))
    assert (cells["wgmma"], cells["mma.sync"], cells["ld.shared"], cells["commit"]) == (2, 3, 3, 1)
    assert (cells["cvt.f16"], cells["cvt.f16x2"]) == (4, 5)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_ptxas_resources_are_read() -> None:
    rep = analyse(PTX)
    assert rep.resources["smem"] == 1024 and rep.resources["regs"] > 0
    assert rep.resources["spill_st"] == 0 == rep.resources["spill_ld"]


def test_inline_asm_scopes_count_each_of_their_instructions() -> None:
    ptx = PTX.replace("\tret;\n", "\t{ .reg .pred p; setp.ne.b32 p, %r1, 0; mov.b16 %rs1, 0; @p ld.global.nc.b16 %rs1, [%rd1]; }\n"
                      "\t{ .reg .b32 t; ld.shared.v2.b32 {%r1, t}, [%r2]; }\n\tret;\n")
    rep = analyse(ptx, resources=False)
    assert rep.kernel["ld.global.16"] == 1 and rep.kernel["ld.shared.64"] == 1
