"""The wgmma mainloop's copies (codegen/tile/wgmma.py `mainloop_text`) in the PTX interpreter
(tests/codegen/ptx_sim.py) over the layouts and operand majors the first file's one layout does
not reach: a transposed A (MN-major) and a transposed B (K-major), 2 and 16 chunks a thread
(8 warps over 64 columns; 4 warps over 256), K tails with origins along K that are not multiples
of 8, negative origins along M / N, and every copy flag `emit_wgmma` can pass for the operands
(computed here by its formula: each operand's bit where its leading dimension, base and first
column are multiples of 8, path 1 where both are, path 2 where also no chunk straddles an edge).
Each k-tile's stage image must be the operand tiles (zeros outside), every access aligned."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anodize.codegen.tile.layout import MmaLayout
from anodize.codegen.tile.wgmma import BK, mainloop_text

sys.path.insert(0, str(Path(__file__).parent))
from ptx_sim import Thread  # noqa: E402


def _place(kmajor: bool, r: int, k: int) -> int:
    """Byte offset in an operand's stage part of its element r along M/N, k along K."""
    if kmajor:
        return r * 128 + ((k // 8) ^ (r % 8)) * 16 + (k % 8) * 2
    return (r // 64) * BK * 128 + k * 128 + (((r % 64) // 8) ^ (k % 8)) * 16 + (r % 8) * 2


def _image(t: int, K: int, ops: list[dict]) -> bytearray:
    img = bytearray(sum(o["width"] for o in ops) * BK * 2)
    base = 0
    for o in ops:
        for r in range(o["width"]):
            for k in range(BK):
                kk, mn = BK * t + k, o["mn0"] + r
                inside = 0 <= mn < o["lim"] and kk < K
                v = (o["val"](mn, o["k0"] + kk) if o["kmajor"] else o["val"](o["k0"] + kk, mn)) if inside else 0
                at = base + _place(o["kmajor"], r, k)
                img[at:at + 2] = v.to_bytes(2, "little")
        base += o["width"] * BK * 2
    return img


def _flag(K: int, ops: list[dict]) -> int:
    """`emit_wgmma`'s copy flag for these operands (whole chunks on)."""
    each = [(o["ld"] | (o["base"] >> 1) | (o["k0"] if o["kmajor"] else o["mn0"])) & 7 == 0 for o in ops]
    if not all(each):
        return (each[0] << 2) | (each[1] << 3)
    edges = K
    for o in ops:
        if not o["kmajor"]:
            edges |= o["lim"] - o["mn0"]
    return 1 + ((edges & 7) == 0)


def run_case(lay: MmaLayout, a_trans: bool, b_trans: bool, K: int, a: dict, bop: dict, S: int = 3,
             ahead: bool = True) -> int:
    ops = []
    gsize = 0
    for o, width, kmajor, salt in ((a, lay.m, not a_trans, 1), (bop, lay.n, b_trans, 30001)):
        o = dict(o, width=width, kmajor=kmajor)
        ld = o["ld"]
        if kmajor:  # (a slice's rows hold its K range: K is clamped to it)
            assert ld >= o["k0"] + K
        else:  # (the extent along M / N is the row's length)
            o["lim"] = ld
        rows = o["lim"] if kmajor else o["k0"] + K + BK
        o["val"] = (lambda ld, salt: lambda r, c: (r * ld + c) % 29000 + salt)(ld, salt)
        o["base"] = -(-gsize // 16) * 16 + o.get("pad", 0) * 2
        o["rows"] = rows
        gsize = o["base"] + rows * ld * 2
        ops.append(o)
    gmem = bytearray(gsize)
    for o in ops:
        for i in range(o["rows"] * o["ld"]):
            at = o["base"] + 2 * i
            gmem[at:at + 2] = o["val"](i // o["ld"], i % o["ld"]).to_bytes(2, "little")
    flag = _flag(K, ops)
    text = mainloop_text(lay, S, "f16", 0, a_trans, b_trans, ahead=ahead, whole=True)
    sbase = 1000
    SB = (lay.m + lay.n) * BK * 2
    smem = bytearray(sbase + 1024 + S * SB)
    s0 = (sbase + 1023) & -1024
    args: list[int] = []
    for o in ops:
        args += [o["base"], o["ld"], o["mn0"], o["k0"], o["lim"]]
    args += [K, flag, sbase]
    tiles = -(-K // BK)
    images: dict[int, bytearray] = {}
    for tid in range(lay.wm * 32):
        th = Thread(tid, smem, gmem)
        th.watch = "%wr20"
        th.check_alignment = True
        th.run(text, [0.0] * (2 * lay.count) + args)
        for ev in th.events:
            if ev[0] in ("cp.async", "st.shared"):
                j, at, data = ev[1], ev[2], ev[3]
                if ev[0] == "cp.async":
                    assert at % 16 == 0, ("cp.async to a misaligned stage address", hex(at))
                if j >= tiles:
                    assert data == bytes(len(data))
                    continue
                st = (at - s0) // SB
                img = images.setdefault(j, bytearray(SB))
                img[at - s0 - st * SB:at - s0 - st * SB + len(data)] = data
    for t in range(tiles):
        assert images[t] == _image(t, K, ops), ("k-tile", t, "flag", flag)
    return flag


L8 = MmaLayout(128, 64, 8, 1, 64)  # B: 64 columns over 256 threads, 2 chunks a thread
L16 = MmaLayout(64, 256, 4, 1, 64)  # B: 256 columns over 128 threads, 16 chunks a thread (K-major only:
# the planner keeps N <= 2 M, and an MN-major 256 over 4 warps has 4 rows a step, not the swizzle's 8)
LS = MmaLayout(128, 128, 4, 1, 64)  # stacked: two m64 blocks a warpgroup, 8 chunks a thread
CASES = [  # (layout, a_trans, b_trans, K, A (ld, mn0, k0, lim), B (ld, mn0, k0, lim), the flag expected)
    ("n2-ab", L8, False, False, 77, (101, 8, 3, 150), (90, 0, 5, 90), 0),
    ("n2-AtBt", L8, True, True, 70, (130, -40, 8, 130), (80, 8, 8, 60), 8),
    ("n16-Bt", L16, False, True, 99, (120, 0, 11, 40), (136, -16, 16, 200), 8),
    ("n16-whole", L16, False, True, 128, (136, 0, 0, 64), (200, 0, 0, 256), 2),
    ("n2-whole-B-MN", L8, False, False, 128, (136, 0, 0, 64), (200, 8, 0, 200), 2),
    ("n16-B-base-unaligned", L16, False, True, 128, (136, 0, 0, 64), (200, 0, 0, 256, 3), 4),
    ("n2-At-aligned-B-scalar", L8, True, False, 66, (128, 0, 16, 128), (63, 8, 0, 63), 4),
    ("stacked-At-scalar", LS, True, False, 100, (130, 8, 5, 130), (137, 16, 0, 137), 0),
    ("stacked-A-scalar-B-aligned", LS, False, False, 61, (133, -5, 3, 70), (136, -64, 8, 136), 8),
    ("n2-At-scalar-B-aligned", L8, True, False, 66, (127, 0, 16, 127), (64, 8, 0, 64), 8),
]
QUICK = {"n2-ab", "n16-Bt", "n2-At-scalar-B-aligned", "stacked-A-scalar-B-aligned"}


@pytest.mark.parametrize("case", [pytest.param(c, id=c[0], marks=() if c[0] in QUICK else (pytest.mark.slow,))
                                  for c in CASES])
def test_each_layout_and_major_copies_the_k_tiles_whole(case: tuple) -> None:
    _, lay, at, bt, K, ao, bo, want = case
    a = dict(zip(("ld", "mn0", "k0", "lim", "pad"), ao))
    b = dict(zip(("ld", "mn0", "k0", "lim", "pad"), bo))
    assert run_case(lay, at, bt, K, a, b) == want


@pytest.mark.parametrize("group", [pytest.param("2"), pytest.param("1", marks=pytest.mark.slow)])
def test_every_scalar_group_copies_the_k_tiles_whole(group: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ANODIZE_TILE_SCALAR_GROUP` 2 and 1 (4, the default, above): A's 4 chunks a thread in 2 or
    4 groups, B's 2 in 1 or 2."""
    monkeypatch.setenv("ANODIZE_TILE_SCALAR_GROUP", group)
    _, lay, at, bt, K, ao, bo, want = CASES[0]
    assert run_case(lay, at, bt, K, dict(zip(("ld", "mn0", "k0", "lim"), ao)), dict(zip(("ld", "mn0", "k0", "lim"), bo))) == want
