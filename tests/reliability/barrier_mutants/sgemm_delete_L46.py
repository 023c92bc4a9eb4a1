# barrier mutant of examples/sgemm.py: delete of the barrier on line 46
"""sgemm: C = A @ B with 16x16 shared-memory tiles.

Why unsafe: tiles of A and B are staged in shared memory and every thread of
the block must meet at `az.syncthreads()` between loading and using a tile.
The output write itself stays safe: each thread writes its own `index_2d`
element of `c` after the loop.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread


@launch_contract(
    domain=2,
    block=(16, 16),
    requires=lambda a, b, c: a.shape[1] == b.shape[0] and c.shape[0] == a.shape[0] and c.shape[1] == b.shape[1],
)
@kernel
def sgemm(a: Slice2D[f32], b: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    m = a.shape[0]
    k = a.shape[1]
    n = b.shape[1]
    acc = f32(0.0)
    with az.unsafe():
        ta = az.shared.array((16, 16), f32)
        tb = az.shared.array((16, 16), f32)
        tx = thread.tid_x()
        ty = thread.tid_y()
        row = thread.block_idx_y() * 16 + ty
        col = thread.block_idx_x() * 16 + tx
        for t in range(0, k, 16):
            if row < m and t + tx < k:
                ta[ty, tx] = a[row, t + tx]
            else:
                ta[ty, tx] = 0.0
            if t + ty < k and col < n:
                tb[ty, tx] = b[t + ty, col]
            else:
                tb[ty, tx] = 0.0
            az.syncthreads()
            for kk in range(16):
                acc += ta[ty, kk] * tb[kk, tx]
    if ij in c:
        c[ij] = acc


def main(m: int = 200, k: int = 150, n: int = 130) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(7)
    a_h = rng.standard_normal((m, k), dtype=np.float32)
    b_h = rng.standard_normal((k, n), dtype=np.float32)
    a, b = dev.to_device(a_h), dev.to_device(b_h)
    c = dev.empty((m, n), az.f32)
    sgemm[az.LaunchConfig.for_shape((m, n), block=(16, 16))](a, b, c)
    res = c.to_host()
    ref = a_h.astype(np.float64) @ b_h.astype(np.float64)
    err = np.linalg.norm(res - ref) / np.linalg.norm(ref)
    assert err < 1e-5, err
    print(f"sgemm on {dev.describe()}: {m}x{k} @ {k}x{n}, relative error {err:.2e}")
    return res


if __name__ == "__main__":
    main()
