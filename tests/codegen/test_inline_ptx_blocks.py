"""The pieces every multi-line inline-PTX block shares (codegen/tensorcore/inline_ptx.py): the
block's text (`ptx_block`, `align_smem`, `declare_regs`), its call (`asm_block`), the unaligned copy loop
(`scalar_copy`) and the wgmma descriptor fields.  The tile GEMM's mainloop (codegen/tile/wgmma.py),
its staged epilogue (codegen/tile/epilogue.py) and the standalone GEMM (codegen/tensorcore/
wgmma_asm.py) build their blocks from them; their PTX is what it was before they shared them
(checked by diffing every tile example's and tile test's PTX, staged epilogue on and off)."""

from __future__ import annotations

import llvmlite.ir as ir

from anodize.codegen.tensorcore.inline_ptx import (
    I32, SW128, VOID, align_smem, asm_block, declare_regs, desc_field, ptx_block, scalar_copy,
)
from anodize.codegen.tensorcore.wgmma_asm import AsmGemmConfig, gemm_asm_text
from anodize.codegen.tile import epilogue, wgmma
from anodize.codegen.tile.layout import MmaLayout


def test_a_block_is_its_lines_in_braces_one_a_line() -> None:
    lines: list[str] = []
    align_smem(lines.append, "%r3", "$1")
    assert ptx_block(lines) == "{\n\tadd.u32 %r3, $1, 1023;\n\tand.b32 %r3, %r3, -1024;\n\t}"


def test_the_call_is_convergent_with_side_effects_and_clobbers_memory() -> None:
    mod = ir.Module()
    fn = ir.Function(mod, ir.FunctionType(VOID, [I32]), "k")
    b = ir.IRBuilder(fn.append_basic_block())
    out = asm_block(b, I32, ptx_block(["mov.u32 $0, $1;", "bar.sync 0;"]), ["=r", "r"], [fn.args[0]])
    b.ret_void()
    assert out.type == I32
    text = str(mod)
    assert 'asm sideeffect "{\\0A\tmov.u32 $0, $1;\\0A\tbar.sync 0;\\0A\t}", "=r,r,~{memory}"' in text
    assert "convergent" in text


def test_the_copy_loop_tests_rows_by_distance_or_by_count() -> None:
    def text(**rows: object) -> list[str]:
        lines: list[str] = []
        scalar_copy(lines.append, "AZX", "A7", n=4, g="%g", gstride="%s", rowstep=16, colleft="%c", dst="%d", doff="%o",
                    dstep=2048, **rows)  # type: ignore[arg-type]
        return lines
    left, count = text(rowleft="%left"), text(rows=("%r0", "%lim"))
    assert "setp.lt.s32 %sp0, %sr2, %left;" in left and "setp.lt.u32 %sp0, %sr2, %lim;" in count
    for lines in (left, count):
        assert lines[0] == "{" and lines[-1] == "}"  # its own register scope
        assert lines.count("AZX_SA7:") == 1 and lines[-2] == "@%sp0 bra AZX_SA7;"
        assert len(count) == len(left) + 4  # (one add a chunk)


def test_the_copy_loop_has_a_group_of_loads_in_flight_before_its_stores() -> None:
    """Session 15: the 2-byte path's loads were each followed by their store (one memory latency
    an element); now a group's 32 loads all come before the first store, and a chunk is one
    16-byte shared store."""
    lines: list[str] = []
    scalar_copy(lines.append, "AZX", "B1", n=8, g="%g", gstride="%s", rowstep=16, colleft="%c", dst="%d", doff="%o",
                dstep=2048, rowleft="%left")
    loads = [i for i, x in enumerate(lines) if "ld.global.b16" in x]
    stores = [i for i, x in enumerate(lines) if x.startswith("st.shared")]
    assert len(loads) == 32 and len(stores) == 4 and max(loads) < min(stores)
    assert all(lines[i].startswith("st.shared.v4.b32 [%sr1+") for i in stores)
    assert [x for x in lines if "ld.global.b16" in x][:8] == [f"@%sp4 ld.global.b16 %sh{k}, [%sd1+{2 * k}];" for k in range(8)]


def test_descriptor_fields_are_16_byte_units_of_18_bits() -> None:
    assert desc_field(1024) == 64 and desc_field(16) == 1 and desc_field((1 << 18) + 32) == 2
    assert SW128 == 1 << 62


def test_each_block_has_its_labels_once_and_balanced_braces() -> None:
    lay = MmaLayout(128, 128, 4, 1, 16)
    texts = [
        wgmma.mainloop_text(MmaLayout(128, 128, 4, 1, 64), 4, "f16", 3),
        epilogue.staged_text(lay, 2, 128, 5),
        epilogue.start_text(lay, 2, True),
        gemm_asm_text(AsmGemmConfig(tile_m=128, tile_n=128, num_warps=8), 9),
    ]
    for t in texts:
        lines = t.split("\n\t")
        assert lines[0] == "{" and lines[-1] == "}" and t.count("{") - t.count("}") == 0
        labels = [x for x in lines if x.endswith(":")]
        assert len(labels) == len(set(labels))


def test_scratch_registers_are_declared_by_prefix_and_count() -> None:
    lines: list[str] = []
    declare_regs(lines.append, "w", 16, 8, 64, 24)
    assert lines == [".reg .pred %wp<16>;", ".reg .b16 %wh<8>;", ".reg .b32 %wr<64>;", ".reg .b64 %wd<24>;"]
    staged = epilogue.staged_text(MmaLayout(128, 128, 4, 1, 16), 2, 128, 5).split("\n\t")
    assert staged[1:5] == [".reg .pred %ep<8>;", ".reg .b16 %eh<2>;", ".reg .b32 %er<40>;", ".reg .b64 %ed<12>;"]
