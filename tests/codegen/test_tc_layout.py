"""The GEMM tile's shared-memory layout, checked on the CPU by running the emitter's own index
code on NumPy arrays: every 16-byte copy lands where the ldmatrix addresses expect it, each
ldmatrix hands every lane the fragment `mma.m16n8k16.row.col` needs, and the 8 rows of each
ldmatrix phase fall in 8 distinct bank groups (no bank conflicts)."""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np
import pytest

from anodize.codegen.tensorcore.gemm import GemmConfig, _Tile


class NumpyBuilder:
    """The integer subset of ir.IRBuilder the index code uses, over NumPy int64 arrays."""

    @staticmethod
    def _v(x):
        return int(x.constant) if isinstance(x, ir.Constant) else x

    def _op(f):  # noqa: N805
        return lambda self, a, b: f(self._v(a), self._v(b))

    add = _op(lambda a, b: a + b)
    sub = _op(lambda a, b: a - b)
    mul = _op(lambda a, b: a * b)
    shl = _op(lambda a, b: a << b)
    lshr = _op(lambda a, b: a >> b)
    and_ = _op(lambda a, b: a & b)
    or_ = _op(lambda a, b: a | b)
    xor = _op(lambda a, b: a ^ b)
    udiv = _op(lambda a, b: a // b)
    urem = _op(lambda a, b: a % b)


def _fill(t: _Tile, rows: int, cols: int, values: np.ndarray) -> np.ndarray:
    """Shared bytes (as 2-byte elements) after the tile's 16-byte copies of `values` (rows x cols)."""
    smem = np.full(rows * cols, -1, dtype=np.int64)
    for r, c, off in t._chunks(rows, cols):
        for tid in range(t.cfg.threads):
            e = off[tid] // 2
            assert (smem[e : e + 8] == -1).all(), "two copies write the same bytes"
            smem[e : e + 8] = values[r[tid], c[tid] * 8 : c[tid] * 8 + 8]
    assert (smem >= 0).all(), "a shared element no copy writes"
    return smem


def _ldmatrix(smem: np.ndarray, addr: np.ndarray, trans: bool) -> np.ndarray:
    """regs[lane, j, 2]: what `ldmatrix.x4` gives each lane; also checks the bank groups."""
    mats = np.empty((4, 8, 8), dtype=np.int64)
    for j in range(4):
        groups = {(int(addr[8 * j + i]) // 16) % 8 for i in range(8)}
        assert len(groups) == 8, f"bank conflict in ldmatrix phase {j}"
        for i in range(8):
            e = int(addr[8 * j + i]) // 2
            assert e % 8 == 0
            mats[j, i] = smem[e : e + 8]
    regs = np.empty((32, 4, 2), dtype=np.int64)
    for lane in range(32):
        g, tq = lane // 4, lane % 4
        for j in range(4):
            m = mats[j].T if trans else mats[j]
            regs[lane, j] = m[g, 2 * tq : 2 * tq + 2]
    return regs


@pytest.mark.parametrize(
    "cfg",
    [
        GemmConfig(),
        GemmConfig(tile_n=256),
        GemmConfig(tile_k=64, stages=4),
        GemmConfig(tile_k=16),
        GemmConfig(tile_m=64, tile_n=64, num_warps=4),
        GemmConfig(b_trans=True),
        GemmConfig(b_trans=True, tile_n=256, tile_k=64),
    ],
    ids=["128x128x32", "128x256x32", "128x128x64", "128x128x16", "64x64x32-4w", "btrans", "btrans-128x256x64"],
)
def test_copies_and_fragments_agree(cfg: GemmConfig) -> None:
    t = _Tile(NumpyBuilder(), cfg, aligned=True)
    t.tid = np.arange(cfg.threads)
    bm, bn, bk = cfg.tile_m, cfg.tile_n, cfg.tile_k
    A = np.arange(bm * bk).reshape(bm, bk)
    B = 1_000_000 + np.arange(bk * bn).reshape(bk, bn)  # B[k, n]
    sa = _fill(t, bm, bk, A)
    sb = _fill(t, bn, bk, np.ascontiguousarray(B.T)) if cfg.b_trans else _fill(t, bk, bn, B)
    wgm, wgn = cfg.warp_grid()
    wtm, wtn = bm // wgm, bn // wgn
    lane = np.arange(32)
    g, tq = lane // 4, lane % 4
    for warp in range(cfg.num_warps):
        wm, wn = warp // wgn, warp % wgn
        t.fragment_offsets(wm, wn, lane)
        for kk in range(bk // 16):
            k0 = kk * 16
            for mi in range(t.mt):
                regs = _ldmatrix(sa, t.a_off[mi][kk], trans=False)
                r = wm * wtm + mi * 16 + g
                want = [A[r, k0 + 2 * tq], A[r + 8, k0 + 2 * tq], A[r, k0 + 8 + 2 * tq], A[r + 8, k0 + 8 + 2 * tq]]
                for q in range(4):
                    np.testing.assert_array_equal(regs[:, q, 0], want[q])
                    np.testing.assert_array_equal(regs[:, q, 1], want[q] + 1)
            for npair in range(t.nt // 2):
                regs = _ldmatrix(sb, t.b_off[npair][kk], trans=not cfg.b_trans)
                for half in range(2):
                    n = wn * wtn + npair * 16 + half * 8 + g
                    for q, kb in enumerate((k0 + 2 * tq, k0 + 8 + 2 * tq)):
                        np.testing.assert_array_equal(regs[:, 2 * half + q, 0], B[kb, n])
                        np.testing.assert_array_equal(regs[:, 2 * half + q, 1], B[kb + 1, n])


@pytest.mark.parametrize("bn", [64, 128, 256])
def test_wgmma_layouts_are_the_canonical_128b_swizzle(bn: int) -> None:
    """tc_wgmma's copies write the layouts its descriptors name: K-major A with 128-byte rows,
    chunk c of row r at c ^ (r % 8); MN-major B as 64-wide blocks of 64 k-rows, same swizzle."""
    from anodize.codegen.tensorcore.wgmma import WgmmaConfig

    cfg = WgmmaConfig(tile_n=bn)
    t = _Tile(NumpyBuilder(), cfg, aligned=True)
    t.tid = np.arange(cfg.threads)
    bm, bk = cfg.tile_m, cfg.tile_k
    A = np.arange(bm * bk).reshape(bm, bk)
    sa = _fill(t, bm, bk, A)
    for r in range(bm):
        for k in range(bk):
            assert sa[(r * 128 + (((k // 8) ^ (r % 8)) * 16)) // 2 + k % 8] == A[r, k]
    B = np.arange(bk * bn).reshape(bk, bn)
    sb = np.full(bk * bn, -1, dtype=np.int64)
    for r, c, off in t._chunks(bk, bn, blocked=True):
        for tid in range(cfg.threads):
            sb[off[tid] // 2 : off[tid] // 2 + 8] = B[r[tid], c[tid] * 8 : c[tid] * 8 + 8]
    for k in range(bk):
        for n in range(bn):
            byte = (n // 64) * bk * 128 + k * 128 + ((((n % 64) // 8) ^ (k % 8)) * 16) + (n % 8) * 2
            assert sb[byte // 2] == B[k, n]
