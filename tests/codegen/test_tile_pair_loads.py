"""Paired epilogue loads (codegen/tile/pair_loads.py, `ANODIZE_TILE_PAIR_LOADS`): a fragment
loop's two loads of one row's adjacent columns as one load of twice the width where aligned and
inside.  The pair's PTX block run by the interpreter (tests/codegen/ptx_sim.py) for every thread
of accumulator layouts over slices with odd and even row pitches, unaligned bases and edge tiles
reads exactly what the two per-element loads read (`other` outside, no access outside the slice,
no misaligned access); the GEMM variants' PTX has one wide load a pair (ptxas takes it), none
with the switch unset; on a GPU the variants match NumPy in both forms."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile.layout import MmaLayout
from anodize.codegen.tile.pair_loads import pair_text

sys.path.insert(0, str(Path(__file__).parent))
import tile_mma_cases as C  # noqa: E402
from ptx_sim import Thread  # noqa: E402
from test_tile_mma import kernel_ir, ptxas_log, run_case  # noqa: E402

OTHER = 0x5A5A


def _run_pair(es: int, gmem: bytearray, row_addr: int, disp: int, ok0: bool, ok1: bool, other: int) -> tuple[int, int]:
    """The pair block's two elements, with the alignment test the lowering computes."""
    aligned = int((row_addr + disp) % (2 * es) == 0)
    text = pair_text("b16" if es == 2 else "f32", 8 * es, True, disp)
    t = Thread(0, bytearray(), gmem)
    t.check_alignment = True
    if es == 2:
        ops = t.run(text, [0, row_addr, int(ok0), int(ok1), aligned, other])
        return ops[0] & 0xFFFF, ops[0] >> 16
    ops = t.run(text, [0, 0, row_addr, int(ok0), int(ok1), aligned, other])
    return ops[0], ops[1]


LAYOUTS = [MmaLayout(64, 64, 2, 2), MmaLayout(128, 64, 4, 1, 16), MmaLayout(128, 128, 4, 1, 64)]
# (rows, columns = the row pitch, base in half elements, the tile) : odd and even pitches, unaligned bases, edge tiles
SLICES = [(100, 130, 0, (1, 1)), (100, 131, 0, (1, 2)), (70, 64, 2, (0, 0)), (200, 129, 2, (1, 1)), (64, 63, 0, (0, 0))]


@pytest.mark.parametrize("es", [2, 4])
@pytest.mark.parametrize("lay", LAYOUTS, ids=lambda lay: f"{lay.m}x{lay.n}w{lay.wm}x{lay.wn}s{lay.mstep}")
def test_the_pair_block_reads_what_the_per_element_loads_read(lay: MmaLayout, es: int) -> None:
    wide = narrow = 0
    for rows, cols, half, (tr, tc) in SLICES:
        base = half * es // 2  # (an element-aligned base: 2 bytes of f16, 4 of f32, neither twice that)
        gmem = bytearray(base + rows * cols * es)
        for j in range(rows * cols):
            gmem[base + j * es:base + (j + 1) * es] = ((j * 7 + 3) % (1 << (8 * es) - 1) + 1).to_bytes(es, "little")
        for tid in range(lay.wm * lay.wn * 32):
            warp, lane = divmod(tid, 32)
            for i in range(0, lay.count, 2):  # register pairs: columns dc, dc + 1 of one row
                dr, dc = lay.offset(i)
                r = tr * lay.m + lay.warp_row(warp) + dr + lane // 4
                c = tc * lay.n + (warp % lay.wn) * (lay.n // lay.wn) + 2 * (lane % 4) + dc
                ok = [r < rows and c + h < cols for h in (0, 1)]
                want = [int.from_bytes(gmem[base + (r * cols + c + h) * es:base + (r * cols + c + h + 1) * es], "little")
                        if ok[h] else OTHER for h in (0, 1)]
                row_addr = base + (r * cols + c - dc) * es  # the row local's address; dc the displacement
                got = _run_pair(es, gmem, row_addr, dc * es, ok[0], ok[1], OTHER)
                assert list(got) == want, (lay, rows, cols, base, tid, i)
                wide += all(ok) and (row_addr + dc * es) % (2 * es) == 0
                narrow += any(ok) and not (all(ok) and (row_addr + dc * es) % (2 * es) == 0)
    assert wide > 0 and narrow > 0  # (both ways taken: interior aligned pairs, edges and odd pitches)


def _ptx(name: str, tile: tuple[int, int, int, int], arch: str = "sm_90") -> str:
    return compile_gpu(kernel_ir(C.source(name, *tile, "f16")), arch, ptxas=False).ptx


def _count(ptx: str, op: str) -> int:
    return len(re.findall(re.escape(op) + r"\s", ptx))


# (variant, the wide op, pairs a thread at 128 x 256 over 8 warps / at 64 x 64 over 4 on mma.sync)
WIDE = [("epilogue", "ld.global.nc.b32", "ld.global.nc.b16", 32, 4), ("gelu_residual", "ld.global.nc.b32", "ld.global.nc.b16", 64, 16),
        ("acc_in", "ld.global.nc.v2.f32", "ld.global.nc.f32", 64, 16)]


@pytest.mark.parametrize("mode", ["1", pytest.param("branch", marks=pytest.mark.slow)])
@pytest.mark.parametrize("case", [pytest.param(c, id=c[0], marks=() if c[0] == "epilogue" else pytest.mark.slow) for c in WIDE])
def test_each_pair_is_one_wide_load_and_ptxas_takes_it(monkeypatch: pytest.MonkeyPatch, case: tuple[str, str, str, int, int],
                                                        mode: str) -> None:
    name, wide, narrow, pairs, pairs_small = case
    for tile, arch, n in (((128, 256, 64, 8), "sm_90", pairs), ((64, 64, 32, 4), "sm_80", pairs_small)):
        monkeypatch.delenv("ANODIZE_TILE_PAIR_LOADS", raising=False)
        before = _ptx(name, tile, arch)
        assert _count(before, wide) == 0 and _count(before, narrow) == 2 * n, (tile, _count(before, narrow))
        monkeypatch.setenv("ANODIZE_TILE_PAIR_LOADS", mode)
        ptx = _ptx(name, tile, arch)
        # one wide load a pair; the per-element loads stay, for the edges and odd pitches
        assert _count(ptx, wide) == n and _count(ptx, narrow) == 2 * n, (tile, _count(ptx, wide))
        if mode == "1":  # (predicated: the wide load and the narrow ones exclude each other)
            assert len(re.findall(r"@%azq2 ld\.global", ptx)) == n
        if shutil.which("ptxas"):
            log = ptxas_log(ptx, arch)
            if name != "gelu_residual":  # (it spills at 128 x 256 under -O1: the switch is off by default)
                assert re.search(r" 0 bytes spill stores", log), log


def test_the_canonical_gemm_is_unchanged_by_the_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANODIZE_TILE_PAIR_LOADS", raising=False)
    before = _ptx("canonical", (128, 256, 64, 8))
    monkeypatch.setenv("ANODIZE_TILE_PAIR_LOADS", "1")
    label = re.compile(r"(AZ[A-Z_]+?)\d+")  # (the inline blocks' labels count on across compiles)

    def norm(ptx: str) -> list[str]:
        return [label.sub(r"\1", ln.split("//")[0]) for ln in ptx.splitlines()]

    assert norm(_ptx("canonical", (128, 256, 64, 8))) == norm(before)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["1", "branch"])
@pytest.mark.parametrize("name", ["epilogue", "gelu_residual", "acc_in"])
@pytest.mark.parametrize("tile", [(128, 256, 64, 8), (64, 64, 32, 4), (128, 128, 64, 4)], ids=lambda t: "x".join(map(str, t)))
@pytest.mark.parametrize("m,n,k", [(256, 512, 256), (200, 301, 190), (130, 255, 64)])
def test_paired_loads_match_numpy_on_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, name: str,
                                             tile: tuple[int, int, int, int], m: int, n: int, k: int) -> None:
    """Odd row pitches (301, 255: every other row's pairs unaligned) and edge tiles too."""
    monkeypatch.setenv("ANODIZE_TILE_PAIR_LOADS", mode)
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    run_case(tmp_path, az.device(), name, tile, m, n, k, tag=f"pairs {mode}")


assert np is not None
