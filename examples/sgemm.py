"""sgemm: C = A @ B with 16x16 shared-memory tiles, in the safe tier.

Each block computes a 16x16 tile of `c`.  For every 16-wide step along k, each
thread loads one element of A's tile and one of B's into shared memory at its own
slot (`thread.index_in_block_2d()`), the block meets at a barrier, each thread
accumulates its dot product from the two tiles (any slot: nothing writes them
until the next barrier), and the block meets again before the next step
overwrites them.  Each thread writes its own `index_2d` element of `c`.

FOLLOW-UP (register blocking, issue 16 item 3): the fast form gives each thread a
4x4 or 8x8 block of `c` accumulated in registers (`acc = az.local.array((8, 8), f32)`)
from larger A/B tiles, which needs `az.local.array` (branch local-values, in
progress) and a witness over several output elements per thread.  Until then this
is the one-element-per-thread tiled form.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

T = 16


@launch_contract(
    domain=2,
    block=(T, T),
    requires=lambda a, b, c: a.shape[1] == b.shape[0] and c.shape[0] == a.shape[0] and c.shape[1] == b.shape[1],
)
@kernel
def sgemm(a: Slice2D[f32], b: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    w = thread.index_in_block_2d()  # this thread's slot of both tiles
    m = a.shape[0]
    k = a.shape[1]
    n = b.shape[1]
    row = ij.row
    col = ij.col
    ta = az.shared.array((T, T), f32)
    tb = az.shared.array((T, T), f32)
    acc = f32(0.0)
    for t in range(0, k, T):
        ta[w] = a[row, t + w.col] if row < m and t + w.col < k else 0.0
        tb[w] = b[t + w.row, col] if t + w.row < k and col < n else 0.0
        az.syncthreads()  # both tiles are complete
        for kk in range(T):
            acc += ta[w.row, kk] * tb[kk, w.col]
        az.syncthreads()  # every thread is done with the tiles before the next step writes them
    if ij in c:
        c[ij] = acc


# small sizes for tools/sanitize.py (racecheck and synccheck run instrumented builds)
SANITIZE_KWARGS = {"m": 70, "k": 50, "n": 40}


def main(m: int = 200, k: int = 150, n: int = 130) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(7)
    a_h = rng.standard_normal((m, k), dtype=np.float32)
    b_h = rng.standard_normal((k, n), dtype=np.float32)
    a, b = dev.to_device(a_h), dev.to_device(b_h)
    c = dev.empty((m, n), az.f32)
    sgemm[az.LaunchConfig.for_shape((m, n), block=(T, T))](a, b, c)
    res = c.to_host()
    ref = a_h.astype(np.float64) @ b_h.astype(np.float64)
    err = np.linalg.norm(res - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err
    print(f"sgemm on {dev.describe()}: {m}x{k} @ {k}x{n}, relative error {err:.2e}")
    return res


if __name__ == "__main__":
    main()
