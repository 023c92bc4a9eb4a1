"""stencil3d: a 7-point stencil over a 3-D grid in the safe tier.

Each thread owns one element `(layer, row, col)` of the output, named by its
`thread.index_3d()` witness.  Interior points average themselves and their six
neighbours; border points copy the input.  Neighbour reads are plain reads of a
shared `Slice3D` (any index, bounds checked); the write is this thread's own element.
Shapes are `(layers, rows, cols)`, row-major; the launch is
`LaunchConfig.for_shape((layers, rows, cols), block=(bx, by, bz))`.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice3D, Slice3D, f32, kernel, launch_contract, thread


@launch_contract(
    domain=3,
    block=(32, 4, 2),
    requires=lambda u, out: u.shape[0] == out.shape[0] and u.shape[1] == out.shape[1] and u.shape[2] == out.shape[2],
)
@kernel
def stencil3d(u: Slice3D[f32], out: DisjointSlice3D[f32]) -> None:
    ijk = thread.index_3d()
    if ijk in out:
        z = ijk.layer
        y = ijk.row
        x = ijk.col
        nz = u.shape[0]
        ny = u.shape[1]
        nx = u.shape[2]
        if z > 0 and z < nz - 1 and y > 0 and y < ny - 1 and x > 0 and x < nx - 1:
            s = u[z, y, x] + u[z - 1, y, x] + u[z + 1, y, x] + u[z, y - 1, x] + u[z, y + 1, x]
            out[ijk] = (s + u[z, y, x - 1] + u[z, y, x + 1]) / 7.0
        else:
            out[ijk] = u[ijk]


def reference(u: np.ndarray) -> np.ndarray:
    out = u.copy()
    c = u[1:-1, 1:-1, 1:-1]
    s = c + u[:-2, 1:-1, 1:-1] + u[2:, 1:-1, 1:-1] + u[1:-1, :-2, 1:-1] + u[1:-1, 2:, 1:-1]
    out[1:-1, 1:-1, 1:-1] = (s + u[1:-1, 1:-1, :-2] + u[1:-1, 1:-1, 2:]) / np.float32(7.0)
    return out


def main(layers: int = 64, rows: int = 96, cols: int = 130) -> np.ndarray:
    dev = az.device()
    u_h = np.random.default_rng(5).random((layers, rows, cols), dtype=np.float32)
    u = dev.to_device(u_h)
    out = dev.empty((layers, rows, cols), az.f32)
    stencil3d[az.LaunchConfig.for_shape((layers, rows, cols), block=(32, 4, 2))](u, out)
    res = out.to_host()
    np.testing.assert_allclose(res, reference(u_h), rtol=1e-5, atol=1e-6)
    print(f"stencil3d on {dev.describe()}: {layers}x{rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()
