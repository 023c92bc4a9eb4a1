"""The safe sgemm of examples/sgemm.py with double-buffered shared tiles (a bench variant):
two sets of the eight arrays, one read while the other is written, so one barrier per
8-wide step instead of two."""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

BT = 128
BK = 8
TM = 8


@launch_contract(
    domain=2,
    block=(16, 16),
    requires=lambda a, b, c: a.shape[1] == b.shape[0] and c.shape[0] == a.shape[0] and c.shape[1] == b.shape[1],
)
@kernel
def sgemm_db(a: Slice2D[f32], b: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    t = thread.tile_2d(TM, TM, 4, 4)  # this thread's 8x8 elements of `c`
    w = thread.index_in_block()  # this thread's slot of the shared arrays
    lin = w.get()
    ty = (lin // 16) % 16  # (the `% 16` lets the compiler see that the shared reads are in range)
    tx = lin % 16
    o = t.at(0, 0)
    r0 = o.row - ty * 4  # the block's first row and column of `c`
    c0 = o.col - tx * 4
    kk_n = a.shape[1]
    sa0 = az.shared.array(256, f32)
    sa1 = az.shared.array(256, f32)
    sa2 = az.shared.array(256, f32)
    sa3 = az.shared.array(256, f32)
    sb0 = az.shared.array(256, f32)
    sb1 = az.shared.array(256, f32)
    sb2 = az.shared.array(256, f32)
    sb3 = az.shared.array(256, f32)
    xa0 = az.shared.array(256, f32)
    xa1 = az.shared.array(256, f32)
    xa2 = az.shared.array(256, f32)
    xa3 = az.shared.array(256, f32)
    xb0 = az.shared.array(256, f32)
    xb1 = az.shared.array(256, f32)
    xb2 = az.shared.array(256, f32)
    xb3 = az.shared.array(256, f32)
    acc = az.local.array((TM, TM), f32)
    af = az.local.array(TM, f32)
    bf = az.local.array(TM, f32)
    pa = az.local.array(4, f32)
    pb = az.local.array(4, f32)
    # slot `lin` of sa[q] holds A[r0 + h*64 + y*4 + q, k] with (h*16 + y)*8 + k = lin, and
    # slot `lin` of sb[q] holds B[k, c0 + h*64 + x*4 + q] with k*32 + h*16 + x = lin
    a_row = r0 + (lin // 128) * 64 + ((lin // 8) % 16) * 4
    a_col = lin % 8
    b_row = lin // 32
    b_col = c0 + ((lin // 16) % 2) * 64 + (lin % 16) * 4
    for q in range(4):  # the first step's elements
        pa[q] = a[a_row + q, a_col] if a_row + q < a.shape[0] and a_col < a.shape[1] else 0.0
        pb[q] = b[b_row, b_col + q] if b_row < b.shape[0] and b_col + q < b.shape[1] else 0.0
    sa0[w] = pa[0]
    sa1[w] = pa[1]
    sa2[w] = pa[2]
    sa3[w] = pa[3]
    sb0[w] = pb[0]
    sb1[w] = pb[1]
    sb2[w] = pb[2]
    sb3[w] = pb[3]
    az.syncthreads()
    for k0 in range(0, kk_n, 2 * BK):  # two steps a round: one set of arrays read, the other written
        for q in range(4):
            pa[q] = a[a_row + q, (k0 + BK) + a_col] if a_row + q < a.shape[0] and (k0 + BK) + a_col < a.shape[1] else 0.0
            pb[q] = b[(k0 + BK) + b_row, b_col + q] if (k0 + BK) + b_row < b.shape[0] and b_col + q < b.shape[1] else 0.0
        for k in range(BK):
            for h in range(2):
                ia = (h * 16 + ty) * 8 + k
                af[h * 4 + 0] = sa0[ia]
                af[h * 4 + 1] = sa1[ia]
                af[h * 4 + 2] = sa2[ia]
                af[h * 4 + 3] = sa3[ia]
                ib = k * 32 + h * 16 + tx
                bf[h * 4 + 0] = sb0[ib]
                bf[h * 4 + 1] = sb1[ib]
                bf[h * 4 + 2] = sb2[ib]
                bf[h * 4 + 3] = sb3[ib]
            for r in range(TM):
                for s in range(TM):
                    acc[r, s] = az.math.fma(af[r], bf[s], acc[r, s])
        xa0[w] = pa[0]
        xa1[w] = pa[1]
        xa2[w] = pa[2]
        xa3[w] = pa[3]
        xb0[w] = pb[0]
        xb1[w] = pb[1]
        xb2[w] = pb[2]
        xb3[w] = pb[3]
        az.syncthreads()
        for q in range(4):
            pa[q] = a[a_row + q, (k0 + 2 * BK) + a_col] if a_row + q < a.shape[0] and (k0 + 2 * BK) + a_col < a.shape[1] else 0.0
            pb[q] = b[(k0 + 2 * BK) + b_row, b_col + q] if (k0 + 2 * BK) + b_row < b.shape[0] and b_col + q < b.shape[1] else 0.0
        for k in range(BK):
            for h in range(2):
                ia = (h * 16 + ty) * 8 + k
                af[h * 4 + 0] = xa0[ia]
                af[h * 4 + 1] = xa1[ia]
                af[h * 4 + 2] = xa2[ia]
                af[h * 4 + 3] = xa3[ia]
                ib = k * 32 + h * 16 + tx
                bf[h * 4 + 0] = xb0[ib]
                bf[h * 4 + 1] = xb1[ib]
                bf[h * 4 + 2] = xb2[ib]
                bf[h * 4 + 3] = xb3[ib]
            for r in range(TM):
                for s in range(TM):
                    acc[r, s] = az.math.fma(af[r], bf[s], acc[r, s])
        sa0[w] = pa[0]
        sa1[w] = pa[1]
        sa2[w] = pa[2]
        sa3[w] = pa[3]
        sb0[w] = pb[0]
        sb1[w] = pb[1]
        sb2[w] = pb[2]
        sb3[w] = pb[3]
        az.syncthreads()
    for r in range(TM):
        for s in range(TM):
            ij = t.at(r, s)
            if ij in c:
                c[ij] = acc[r, s]


def config(m: int, n: int) -> az.LaunchConfig:
    return az.LaunchConfig(grid=(-(-n // BT), -(-m // BT)), block=(16, 16))


sgemm = sgemm_db


def main(m: int = 70, k: int = 45, n: int = 150) -> None:
    dev = az.device()
    rng = np.random.default_rng(7)
    a_h = rng.standard_normal((m, k), dtype=np.float32)
    b_h = rng.standard_normal((k, n), dtype=np.float32)
    c = dev.empty((m, n), az.f32)
    sgemm_db[config(m, n)](dev.to_device(a_h), dev.to_device(b_h), c)
    ref = a_h.astype(np.float64) @ b_h.astype(np.float64)
    err = np.linalg.norm(c.to_host() - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err
    print(f"sgemm_db {m}x{k}x{n}: relative error {err:.1e}")
