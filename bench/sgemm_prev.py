"""The previous examples/sgemm.py (single-buffered, A fragments across k), kept for timing beside it.

sgemm: C = A @ B in the safe tier, register-blocked (128x128x8 block tiles, 8x8 per thread).

A block of 16x16 threads computes a 128x128 tile of `c`; each thread owns 8x8 elements of
it through a per-thread tile, `t = thread.tile_2d(8, 8, 4, 4)`: 2x2 groups of 4x4, the
groups 64 rows and 64 columns apart (rows `by*128 + (r // 4)*64 + ty*4 + r % 4` for
r < 8, columns likewise; docs/language.md, "Per-thread tiles").  It accumulates them in
registers (`acc = az.local.array((8, 8), f32)`; every index is a constant once the
compiler unrolls the constant loops, so the arrays live in registers: `ptxas -v` reports
no stack frame and no spills) and writes each through `t.at(r, s)`.

For every 8-wide step along k the block stages an 128x8 tile of A and an 8x128 tile of B
in shared memory under the phase discipline: each thread writes only its own slot
(`thread.index_in_block()`) of eight 256-element arrays, `sa[q]` holding the A elements
of rows `h*64 + ty*4 + q` and `sb[q]` the B elements of columns `h*64 + tx*4 + q`, laid
out so that the compute loop reads them without bank conflicts (the two rows of
threads of a warp read two neighbouring words of `sa[q]`, its 16 columns sixteen
neighbouring words of `sb[q]`).  The next step's elements are loaded from global memory
into registers while the block computes on this one (register prefetch), so one barrier
separates the writes from the reads and one the reads from the next writes.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

BT = 128  # the block's tile of `c`: BT x BT
BK = 8  # the k step
TM = 8  # each thread's tile: TM x TM, in 2 x 2 groups of 4 x 4


@launch_contract(
    domain=2,
    block=(16, 16),
    requires=lambda a, b, c: a.shape[1] == b.shape[0] and c.shape[0] == a.shape[0] and c.shape[1] == b.shape[1],
)
@kernel
def sgemm(a: Slice2D[f32], b: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
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
    for k0 in range(0, kk_n, BK):
        sa0[w] = pa[0]
        sa1[w] = pa[1]
        sa2[w] = pa[2]
        sa3[w] = pa[3]
        sb0[w] = pb[0]
        sb1[w] = pb[1]
        sb2[w] = pb[2]
        sb3[w] = pb[3]
        az.syncthreads()  # the step's tiles are complete
        kn = k0 + BK
        for q in range(4):  # the next step's elements, in flight while this one computes
            pa[q] = a[a_row + q, kn + a_col] if a_row + q < a.shape[0] and kn + a_col < a.shape[1] else 0.0
            pb[q] = b[kn + b_row, b_col + q] if kn + b_row < b.shape[0] and b_col + q < b.shape[1] else 0.0
        for k in range(BK):
            for h in range(2):
                ia = (h * 16 + ty) * 8 + k
                af[h * 4] = sa0[ia]
                af[h * 4 + 1] = sa1[ia]
                af[h * 4 + 2] = sa2[ia]
                af[h * 4 + 3] = sa3[ia]
                ib = k * 32 + h * 16 + tx
                bf[h * 4] = sb0[ib]
                bf[h * 4 + 1] = sb1[ib]
                bf[h * 4 + 2] = sb2[ib]
                bf[h * 4 + 3] = sb3[ib]
            for r in range(TM):
                for s in range(TM):
                    acc[r, s] = az.math.fma(af[r], bf[s], acc[r, s])
        az.syncthreads()  # every thread is done with the tiles before the next step writes them
    for r in range(TM):
        for s in range(TM):
            ij = t.at(r, s)
            if ij in c:
                c[ij] = acc[r, s]


def config(m: int, n: int) -> az.LaunchConfig:
    """One block of 16x16 threads per 128x128 tile of `c`."""
    return az.LaunchConfig(grid=(-(-n // BT), -(-m // BT)), block=(16, 16))


# small sizes for tools/sanitize.py (racecheck and synccheck run instrumented builds)
SANITIZE_KWARGS = {"m": 70, "k": 50, "n": 40}


def main(m: int = 200, k: int = 150, n: int = 130) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(7)
    a_h = rng.standard_normal((m, k), dtype=np.float32)
    b_h = rng.standard_normal((k, n), dtype=np.float32)
    a, b = dev.to_device(a_h), dev.to_device(b_h)
    c = dev.empty((m, n), az.f32)
    sgemm[config(m, n)](a, b, c)
    res = c.to_host()
    ref = a_h.astype(np.float64) @ b_h.astype(np.float64)
    err = np.linalg.norm(res - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err
    print(f"sgemm on {dev.describe()}: {m}x{k} @ {k}x{n}, relative error {err:.2e}")
    return res


if __name__ == "__main__":
    main()
