"""The wgmma mainloop's PTX (codegen/tile/wgmma.py `mainloop_text`) run by a small interpreter
(tests/codegen/ptx_sim.py), wgmma itself a no-op: every thread's copies of k-tile t, taken
together, are the operand tiles in the 128-byte-swizzled stage layout (zeros past K and outside
the slices, no global read outside them) on every copy path (2-byte loads, clamped chunks, whole
chunks, and one operand on 2-byte loads while the other's rows are aligned); the multiply of k-tile t reads the stage its copies went to after a `cp.async.wait_group`
that completes their group and a proxy fence after that wait, before the barrier the multiply
follows; and no copy writes a stage a wgmma still in flight (not yet waited for before the last
barrier) reads -- for K = 0, K below S * 64, K not a multiple of 64 or 8,
tiles across the M / N edges, load-ahead and copy-first orders."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anodize.codegen.tile.layout import MmaLayout
from anodize.codegen.tile.wgmma import BK, mainloop_text

sys.path.insert(0, str(Path(__file__).parent))
from ptx_sim import Thread  # noqa: E402

LAY = MmaLayout(64, 64, 4, 1, 64)


def _expected(t: int, K: int, a: dict, bop: dict) -> bytearray:
    """Stage image of k-tile t: A K-major (M x 64), then B MN-major (64 x N, one 64-column block)."""
    img = bytearray((LAY.m + LAY.n) * BK * 2)
    for r in range(LAY.m):
        for k in range(BK):
            kk = BK * t + k
            row = a["mn0"] + r
            v = a["val"](row, a["k0"] + kk) if 0 <= row < a["lim"] and kk < K else 0
            at = r * 128 + ((k // 8) ^ (r % 8)) * 16 + (k % 8) * 2
            img[at:at + 2] = v.to_bytes(2, "little")
    base = LAY.m * BK * 2
    for k in range(BK):
        for c in range(LAY.n):
            kk = BK * t + k
            col = bop["mn0"] + c
            v = bop["val"](bop["k0"] + kk, col) if 0 <= col < bop["lim"] and kk < K else 0
            at = base + (c // 64) * BK * 128 + k * 128 + (((c % 64) // 8) ^ (k % 8)) * 16 + (c % 8) * 2
            img[at:at + 2] = v.to_bytes(2, "little")
    return img


ORDERS = [(3, True), (4, True), (4, False)]
SHAPES = [(0, 2, 100, 200, 32, 64), (40, 2, 100, 200, 32, 64), (100, 1, 90, 100, 32, 64), (136, 2, 40, 96, 32, 64),
          (200, 2, 100, 200, -48, -64), (77, 1, 100, 130, 32, 64), (77, 0, 100, 130, 32, 64),
          (77, 4, 100, 130, 32, 64), (136, 8, 40, 96, 32, 64)]  # (flags 4 / 8: A / B alone on 16-byte copies)
QUICK = {(0, 0), (1, 1), (0, 3), (2, 4), (1, 5), (0, 6), (1, 7), (2, 8)}  # (order, shape) pairs the default run takes


@pytest.mark.parametrize("case", [pytest.param((i, j), id=f"o{i}-s{j}", marks=() if (i, j) in QUICK else (pytest.mark.slow,))
                                  for i in range(len(ORDERS)) for j in range(len(SHAPES))])
def test_each_k_tile_lands_whole_in_the_stage_its_multiply_reads(case: tuple[int, int]) -> None:
    (S, ahead), (K, flag, a_rows, b_cols, a_mn0, b_mn0) = ORDERS[case[0]], SHAPES[case[1]]
    # (flag 8: A on 2-byte loads with rows really unaligned, 255 elements; flag 4: B's, 263)
    a_ld, b_ld = 255 if flag == 8 else 256, 263 if flag == 4 else 264
    a_k0, b_k0 = 8, 16  # the operands' origins along K (multiples of 8: the 16-byte paths)
    a = {"mn0": a_mn0, "k0": a_k0, "lim": a_rows, "val": lambda r, c: (r * a_ld + c) % 30000 + 1}
    bop = {"mn0": b_mn0, "k0": b_k0, "lim": b_cols, "val": lambda r, c: (r * b_ld + c) % 30000 + 30001}
    a_elems, b_elems = a_rows * a_ld, (b_k0 + K + 64) * b_ld
    gmem = bytearray((a_elems + b_elems) * 2)
    for i in range(a_elems):
        gmem[2 * i:2 * i + 2] = a["val"](i // a_ld, i % a_ld).to_bytes(2, "little")
    for i in range(b_elems):
        gmem[2 * (a_elems + i):2 * (a_elems + i) + 2] = bop["val"](i // b_ld, i % b_ld).to_bytes(2, "little")
    n = LAY.count
    text = mainloop_text(LAY, S, "f16", 0, ahead=ahead, whole=True)
    sbase = 1000
    smem = bytearray(sbase + 1024 + S * (LAY.m + LAY.n) * BK * 2)
    s0 = (sbase + 1023) & -1024
    args = [0, a_ld, a["mn0"], a_k0, a_rows, 2 * a_elems, b_ld, bop["mn0"], b_k0, b_cols, K, flag, sbase]
    tiles = -(-K // BK)
    L = S - 1 if ahead else S - 2
    images: dict[int, bytearray] = {}
    stage_of: dict[int, int] = {}
    SB = (LAY.m + LAY.n) * BK * 2
    for tid in range(LAY.wm * 32):
        th = Thread(tid, smem, gmem)
        th.watch = "%wr20"
        th.run(text, [0.0] * (2 * n) + args)
        groups = 0  # cp.async groups committed
        done = 0  # ... of which complete at the last wait
        group_of: dict[int, int] = {}  # k-tile -> its group
        wg: list[int] = []  # stages of this warpgroup's committed wgmma groups not yet waited for
        in_flight_at_bar: list[int] = []
        fenced = fenced_at_bar = 0  # groups complete at the last proxy fence / at the fence before the last barrier
        muls = 0
        cur_stage = None
        for ev in th.events:
            op = ev[0]
            if op == "cp.async":
                j, dst, data = ev[1], ev[2], ev[3]
                st = (dst - s0) // SB
                assert st not in wg and st not in in_flight_at_bar, ("a copy overwrites a stage a wgmma may read", j, st)
                assert j < tiles or (not ahead and data == bytes(16)), ("a copy of a k-tile past K", j)
                group_of[j] = groups
                stage_of.setdefault(j, st)
                assert stage_of[j] == st
                img = images.setdefault(j, bytearray(SB))
                img[dst - s0 - st * SB:dst - s0 - st * SB + 16] = data
            elif op == "st.shared":
                j, at, data = ev[1], ev[2], ev[3]
                st = (at - s0) // SB
                assert st not in wg and st not in in_flight_at_bar
                group_of[j] = groups
                stage_of.setdefault(j, st)
                img = images.setdefault(j, bytearray(SB))
                img[at - s0 - st * SB:at - s0 - st * SB + len(data)] = data
            elif op == "cp.async.commit_group":
                groups += 1
            elif op == "cp.async.wait_group":
                done = max(done, groups - ev[1])
            elif op == "fence.proxy.async":
                fenced = done
            elif op == "bar.sync":
                in_flight_at_bar = list(wg)
                fenced_at_bar = fenced
            elif op == "wgmma.fence.sync":
                t = muls
                assert group_of[t] < done, ("k-tile read before its copies are waited for", t)
                assert group_of[t] < fenced_at_bar, ("k-tile read without a proxy fence after its copies", t)
                cur_stage = stage_of[t]
                muls += 1
            elif op == "wgmma.commit_group.sync":
                wg.append(cur_stage)
            elif op == "wgmma.wait_group.sync":
                wg = wg[len(wg) - ev[1]:] if ev[1] else []
        assert muls == tiles and not wg
    for t in range(tiles):
        assert images[t] == _expected(t, K, a, bop), ("k-tile", t)
