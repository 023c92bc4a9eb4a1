# barrier mutant of examples/sgemm.py: move_down of the barrier on line 129
"""sgemm: C = A @ B in the safe tier, register-blocked (128x128x8 block tiles, 8x8 per thread).

A block of 16x16 threads computes a 128x128 tile of `c`; each thread owns 8x8 elements of
it through a per-thread tile, `t = thread.tile_2d(8, 8, 4, 4)`: 2x2 groups of 4x4, the
groups 64 rows and 64 columns apart (rows `by*128 + (r // 4)*64 + ty*4 + r % 4` for
r < 8, columns likewise; docs/language.md, "Per-thread tiles").  It accumulates them in
registers (`acc = az.local.array((8, 8), f32)`; every index is a constant once the
compiler unrolls the constant loops, so the arrays live in registers: `ptxas -v` reports
no stack frame and no spills) and writes each through `t.at(r, s)`.

For every 8-wide step along k the block stages a 128x8 tile of A and an 8x128 tile of B
in shared memory under the phase discipline: each thread writes only its own slot
(`thread.index_in_block()`) of four 256-element arrays for A and four for B.  The layout
is chosen so that a thread's fragments are four consecutive words of one array, which the
compiler reads as one 16-byte `ld.shared.v4` (4 of them and 64 FMAs per k):

- A is stored transposed: `sa[k % 4]` slot `(m // 4) * 8 + (k // 4) * 4 + m % 4` holds
  A[r0 + m, k], so rows `4 ty .. 4 ty + 3` at one k are consecutive (and 128 slots on for
  the second group of rows).  Thread `lin` loads the 4 k-neighbours A[r0 + m, 4 kc + q]
  of one row and stores value q in `sa[q]` (the transpose happens in that choice);
- B keeps its rows: `sb[k // 2]` slot `(k % 2) * 128 + n` holds B[k, c0 + n]; thread `lin`
  loads B[lin // 128 + 2 q, c0 + lin % 128] (each warp load is 128 consecutive bytes).

Two sets of these arrays alternate (double buffering): while the block computes on one set,
each thread's loads of the next step's elements are in flight (register prefetch) and
land in the other set, so one barrier a step separates the writes of a set from its reads.
The loads' guards (`a[r, k] if 0 <= r < rows and 0 <= k < cols else 0.0`, each index a
local bound once) prove them in range, so no bounds check is left in the kernel, and
`min_blocks_per_sm=2` in the contract keeps the kernel within 128 registers (two blocks,
16 warps, an SM; without it ptxas takes 171 registers and one block an SM).
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
    min_blocks_per_sm=2,
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
    # two sets of tiles: set 0 (sa*, sb*) and set 1 (xa*, xb*), one read while the other is written
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
    # A, transposed: slot (m // 4) * 8 + (k // 4) * 4 + m % 4 of sa[k % 4] holds A[r0 + m, k];
    # B: slot (k % 2) * 128 + n of sb[k // 2] holds B[k, c0 + n]
    a_row = r0 + (lin // 8) * 4 + lin % 4
    a_col = ((lin // 4) % 2) * 4
    b_row = lin // 128
    b_col = c0 + lin % 128
    ra = (ty * 8) % 256  # this thread's A fragment: slots ra + (k // 4) * 4 + i and 128 on
    rb = (tx * 4) % 256  # its B fragment: slots (k % 2) * 128 + rb + i and 64 on
    for q in range(4):  # the first step's elements
        ac1 = a_col + q
        pa[q] = a[a_row, ac1] if 0 <= a_row < a.shape[0] and 0 <= ac1 < a.shape[1] else 0.0
        br1 = b_row + 2 * q
        pb[q] = b[br1, b_col] if 0 <= br1 < b.shape[0] and 0 <= b_col < b.shape[1] else 0.0
    sa0[w] = pa[0]
    sa1[w] = pa[1]
    sa2[w] = pa[2]
    sa3[w] = pa[3]
    sb0[w] = pb[0]
    sb1[w] = pb[1]
    sb2[w] = pb[2]
    sb3[w] = pb[3]
    az.syncthreads()
    for k0 in range(0, kk_n, 2 * BK):  # two steps a round: one set read, the other written
        kn = k0 + BK
        for q in range(4):  # the next step's elements, in flight while this one computes
            ac2 = kn + a_col + q
            pa[q] = a[a_row, ac2] if 0 <= a_row < a.shape[0] and 0 <= ac2 < a.shape[1] else 0.0
            br2 = kn + b_row + 2 * q
            pb[q] = b[br2, b_col] if 0 <= br2 < b.shape[0] and 0 <= b_col < b.shape[1] else 0.0
        for k in range(BK):
            for h in range(2):
                ia = ra + h * 128 + (k // 4) * 4
                ib = (k % 2) * 128 + rb + h * 64
                for i in range(4):
                    af[h * 4 + i] = (sa0[ia + i] if k % 4 == 0 else sa1[ia + i] if k % 4 == 1 else sa2[ia + i] if k % 4 == 2 else sa3[ia + i])
                    bf[h * 4 + i] = (sb0[ib + i] if k // 2 == 0 else sb1[ib + i] if k // 2 == 1 else sb2[ib + i] if k // 2 == 2 else sb3[ib + i])
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
        kn = k0 + 2 * BK
        az.syncthreads()  # set 1 is complete; nobody reads set 0 any more
        for q in range(4):
            ac3 = kn + a_col + q
            pa[q] = a[a_row, ac3] if 0 <= a_row < a.shape[0] and 0 <= ac3 < a.shape[1] else 0.0
            br3 = kn + b_row + 2 * q
            pb[q] = b[br3, b_col] if 0 <= br3 < b.shape[0] and 0 <= b_col < b.shape[1] else 0.0
        for k in range(BK):
            for h in range(2):
                ia = ra + h * 128 + (k // 4) * 4
                ib = (k % 2) * 128 + rb + h * 64
                for i in range(4):
                    af[h * 4 + i] = (xa0[ia + i] if k % 4 == 0 else xa1[ia + i] if k % 4 == 1 else xa2[ia + i] if k % 4 == 2 else xa3[ia + i])
                    bf[h * 4 + i] = (xb0[ib + i] if k // 2 == 0 else xb1[ib + i] if k // 2 == 1 else xb2[ib + i] if k // 2 == 2 else xb3[ib + i])
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
        az.syncthreads()  # set 0 is complete; nobody reads set 1 any more
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
