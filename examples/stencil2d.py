"""stencil2d: a 5-point Laplacian-style stencil in the safe tier.

Interior points average their four neighbours and themselves; border points
copy the input.  Reads of neighbours are plain reads of a shared `Slice2D`
(any index, bounds checked); the write is this thread's own element.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread


@launch_contract(
    domain=2,
    block=(32, 8),
    requires=lambda u, out: u.shape[0] == out.shape[0] and u.shape[1] == out.shape[1],
)
@kernel
def stencil2d(u: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    if ij in out:
        r = ij.row
        c = ij.col
        rows = u.shape[0]
        cols = u.shape[1]
        if r > 0 and r < rows - 1 and c > 0 and c < cols - 1:
            out[ij] = 0.2 * (u[r, c] + u[r - 1, c] + u[r + 1, c] + u[r, c - 1] + u[r, c + 1])
        else:
            out[ij] = u[r, c]


def reference(u: np.ndarray) -> np.ndarray:
    out = u.copy()
    out[1:-1, 1:-1] = np.float32(0.2) * (
        u[1:-1, 1:-1] + u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]
    )
    return out


def main(rows: int = 257, cols: int = 511) -> np.ndarray:
    dev = az.device()
    u_h = np.random.default_rng(3).random((rows, cols), dtype=np.float32)
    u = dev.to_device(u_h)
    out = dev.empty((rows, cols), az.f32)
    stencil2d[az.LaunchConfig.for_shape((rows, cols), block=(32, 8))](u, out)
    res = out.to_host()
    np.testing.assert_allclose(res, reference(u_h), rtol=1e-5, atol=1e-6)
    print(f"stencil2d on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()
