"""scale2d: out[r, c] = s * m[r, c] + r, with a 2-D witness. `anodize run examples/scale2d.py`."""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread


@launch_contract(
    domain=2,
    block=(16, 16),
    requires=lambda s, m, out: m.shape[0] == out.shape[0] and m.shape[1] == out.shape[1],
)
@kernel
def scale2d(s: f32, m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    if ij in out:
        out[ij] = s * m[ij] + f32(ij.row)


def main(rows: int = 300, cols: int = 517, s: float = 0.5) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(2)
    m_host = rng.random((rows, cols), dtype=np.float32)
    m = dev.to_device(m_host)
    out = dev.empty((rows, cols), az.f32)
    scale2d[az.LaunchConfig.for_shape((rows, cols), block=(16, 16))](s, m, out)
    res = out.to_host()
    ref = np.float32(s) * m_host + np.arange(rows, dtype=np.float32)[:, None]
    np.testing.assert_allclose(res, ref, rtol=1e-6)
    print(f"scale2d on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()
