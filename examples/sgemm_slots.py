"""sgemm_slots: examples/sgemm.py with its shared-memory staging written by multi-slot ownership.

The same kernel as sgemm.py (128x128x8 block tiles, 8x8 per thread in registers, A stored
transposed, double-buffered tiles, register prefetch; its docstring explains the layout), with
one difference: where sgemm.py gives each thread exactly one slot of sixteen 256-element shared
arrays (eight a set), each set here is two arrays of four quarters, and a thread stages its four
elements of A and of B into its own four slots of each:

    for q in range(4):
        sa[w + q * 256] = pa[q]
        sb[w + q * BQ] = pb[q]

`w` is `thread.index_in_block()`, the contract's block is 256 threads, and each quarter's
stride is at least 256, so no two threads reach one slot: the checker proves the slot sets
disjoint (multi-slot ownership, docs/language.md "Safe shared memory") and the typer proves
them inside the arrays, so the writes carry no bounds check.  The reads are as in sgemm.py:
one 16-byte `ld.shared.v4` per fragment, 64 a round.

B's quarters are BQ = 260 slots apart, not 256: with 256 the last fragment's offset (960
slots) covers every bit above the thread's column offset, LLVM folds that address into an
`or` its load vectoriser does not follow, and two of the 64 16-byte reads become eight scalar
ones (with their addresses held across the loop: 448 bytes of spills).  `ptxas -v` for sm_90:
128 registers and a 40-byte stack frame (56 bytes of spill stores), where sgemm.py has none;
the PTX is otherwise the same (64 `ld.shared.v4`, 24 `st.shared`, 1024 FMAs, 3 barriers).
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

BT = 128  # the block's tile of `c`: BT x BT
BK = 8  # the k step
TM = 8  # each thread's tile: TM x TM, in 2 x 2 groups of 4 x 4
BQ = 260  # the stride of B's quarters (256 and 4 of padding)


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
    # two sets of tiles, one read while the other is written: set 0 (sa, sb) and set 1 (xa, xb);
    # each array holds four quarters, a thread's slots are w + q * stride (stride >= the block's 256)
    sa = az.shared.array(4 * 256, f32)
    sb = az.shared.array(4 * BQ, f32)
    xa = az.shared.array(4 * 256, f32)
    xb = az.shared.array(4 * BQ, f32)
    acc = az.local.array((TM, TM), f32)
    af = az.local.array(TM, f32)
    bf = az.local.array(TM, f32)
    pa = az.local.array(4, f32)
    pb = az.local.array(4, f32)
    # A, transposed: slot (k % 4) * 256 + (m // 4) * 8 + (k // 4) * 4 + m % 4 of sa holds A[r0 + m, k];
    # B: slot (k // 2) * BQ + (k % 2) * 128 + n of sb holds B[k, c0 + n]
    a_row = r0 + (lin // 8) * 4 + lin % 4
    a_col = ((lin // 4) % 2) * 4
    b_row = lin // 128
    b_col = c0 + lin % 128
    ra = (ty * 8) % 256  # this thread's A fragment: slots (k % 4) * 256 + ra + (k // 4) * 4 + i and 128 on
    rb = (tx * 4) % 256  # its B fragment: slots (k // 2) * BQ + (k % 2) * 128 + rb + i and 64 on
    for q in range(4):  # the first step's elements
        ac1 = a_col + q
        pa[q] = a[a_row, ac1] if 0 <= a_row < a.shape[0] and 0 <= ac1 < a.shape[1] else 0.0
        br1 = b_row + 2 * q
        pb[q] = b[br1, b_col] if 0 <= br1 < b.shape[0] and 0 <= b_col < b.shape[1] else 0.0
    for q in range(4):  # this thread's four slots of each array (multi-slot ownership)
        sa[w + q * 256] = pa[q]
        sb[w + q * BQ] = pb[q]
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
                ia = ra + (k % 4) * 256 + h * 128 + (k // 4) * 4
                ib = rb + (k // 2) * BQ + (k % 2) * 128 + h * 64
                for i in range(4):
                    af[h * 4 + i] = sa[ia + i]
                    bf[h * 4 + i] = sb[ib + i]
            for r in range(TM):
                for s in range(TM):
                    acc[r, s] = az.math.fma(af[r], bf[s], acc[r, s])
        for q in range(4):
            xa[w + q * 256] = pa[q]
            xb[w + q * BQ] = pb[q]
        az.syncthreads()  # set 1 is complete; nobody reads set 0 any more
        kn = k0 + 2 * BK
        for q in range(4):
            ac3 = kn + a_col + q
            pa[q] = a[a_row, ac3] if 0 <= a_row < a.shape[0] and 0 <= ac3 < a.shape[1] else 0.0
            br3 = kn + b_row + 2 * q
            pb[q] = b[br3, b_col] if 0 <= br3 < b.shape[0] and 0 <= b_col < b.shape[1] else 0.0
        for k in range(BK):
            for h in range(2):
                ia = ra + (k % 4) * 256 + h * 128 + (k // 4) * 4
                ib = rb + (k // 2) * BQ + (k % 2) * 128 + h * 64
                for i in range(4):
                    af[h * 4 + i] = xa[ia + i]
                    bf[h * 4 + i] = xb[ib + i]
            for r in range(TM):
                for s in range(TM):
                    acc[r, s] = az.math.fma(af[r], bf[s], acc[r, s])
        for q in range(4):
            sa[w + q * 256] = pa[q]
            sb[w + q * BQ] = pb[q]
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
    print(f"sgemm_slots on {dev.describe()}: {m}x{k} @ {k}x{n}, relative error {err:.2e}")
    return res


if __name__ == "__main__":
    main()
