"""The staged epilogue's PTX (codegen/tile/epilogue.py) run by a small interpreter
(tests/codegen/ptx_sim.py): every thread's fragments written to the staged tile (stmatrix or
register pairs) and copied out must store exactly the per-element store's elements -- tile
(pid.row * M + r, pid.col * N + c) where inside `dst` -- and nothing else, at edge tiles, for
unaligned `dst` and for every layout family (warp grids (w, 1) and (wm, wn), stacked wgmma)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anodize.codegen.tile import epilogue as E
from anodize.codegen.tile.layout import MmaLayout

sys.path.insert(0, str(Path(__file__).parent))
from ptx_sim import Thread  # noqa: E402

SENTINEL = 0xA5


def _elem(lay: MmaLayout, tid: int, i: int) -> tuple[int, int]:
    warp, lane = divmod(tid, 32)
    dr, dc = lay.offset(i)
    return lay.warp_row(warp) + dr + lane // 4, (warp % lay.wn) * (lay.n // lay.wn) + dc + 2 * (lane % 4)


def _stage(lay: MmaLayout, es: int, stmatrix: bool, smem: bytearray, sbase: int, ident: dict[tuple[int, int], int]) -> None:
    threads = lay.wm * lay.wn * 32
    addr = [Thread(t, smem, bytearray()).run(E.start_text(lay, es, stmatrix), [0, sbase])[0] for t in range(threads)]
    for regs, off, kind in E.stage_groups(lay, es, stmatrix):
        if kind == "stmatrix":  # matrix q: lane 8q + rr gives row rr's address; lane l holds (l // 4, 2 (l % 4) ..) in register q
            for w in range(threads // 32):
                for q in range(4):
                    for lane in range(32):
                        t = 32 * w + lane
                        for h in range(2):
                            at = addr[32 * w + 8 * q + lane // 4] + off + (2 * (lane % 4) + h) * 2
                            smem[at:at + 2] = ident[_elem(lay, t, regs[2 * q + h])].to_bytes(2, "little")
            continue
        for t in range(threads):
            for h, r in enumerate(regs):
                at = addr[t] + off + h * es
                smem[at:at + es] = ident[_elem(lay, t, r)].to_bytes(es, "little")


LAYOUTS = [(MmaLayout(128, 256, 8, 1, 64), 2, True), (MmaLayout(128, 128, 4, 1, 64), 2, True), (MmaLayout(128, 128, 4, 1, 16), 2, False),
           (MmaLayout(64, 64, 2, 2, 16), 2, False), (MmaLayout(64, 64, 2, 2, 16), 2, True), (MmaLayout(64, 32, 4, 1, 16), 4, False),
           (MmaLayout(32, 64, 1, 4, 16), 4, False), (MmaLayout(16, 8, 1, 1, 16), 2, False)]
DSTS = [(300, 520, (1, 1), 0), (130, 70, (1, 0), 0), (200, 517, (1, 1), 2), (64, 64, (0, 0), 6)]
QUICK = {(2, 2), (3, 0), (4, 3), (5, 1), (6, 2), (7, 1)}  # (layout, dst) pairs the default run takes


@pytest.mark.parametrize("case", [pytest.param((i, j), id=f"l{i}-d{j}", marks=() if (i, j) in QUICK else (pytest.mark.slow,))
                                  for i in range(len(LAYOUTS)) for j in range(len(DSTS))])
def test_the_staged_copy_stores_exactly_the_per_element_stores_elements(case: tuple[int, int]) -> None:
    (lay, es, stm), (rows, cols, pid, base) = LAYOUTS[case[0]], DSTS[case[1]]
    threads = lay.wm * lay.wn * 32
    ident = {(r, c): (r * lay.n + c) % 0xFFFF + 1 for r in range(lay.m) for c in range(lay.n)}
    sbase = 100
    smem = bytearray(sbase + E.staged_bytes(lay, es))
    _stage(lay, es, stm, smem, sbase, ident)
    gmem = bytearray([SENTINEL]) * (base + rows * cols * es)
    row0, col0 = pid[0] * lay.m, pid[1] * lay.n
    text = E.staged_text(lay, es, threads, 0)
    for t in range(threads):
        Thread(t, smem, gmem).run(text, [base, rows, cols, row0, col0, sbase])
    want = bytearray([SENTINEL]) * len(gmem)
    for (r, c), v in ident.items():
        if row0 + r < rows and col0 + c < cols:
            at = base + ((row0 + r) * cols + col0 + c) * es
            want[at:at + es] = v.to_bytes(es, "little")
    assert gmem == want
