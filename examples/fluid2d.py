"""A 2-D fluid step over a bundle: the velocity field (u, v) and its next state travel as one
`az.Bundle` parameter whose fields keep their roles (the current field read-only, the next
one and the divergence written at the thread's own cell).  Interior cells diffuse each
velocity component (5-point Laplacian) and record the field's divergence; border cells keep
their velocity (no-slip walls) with zero divergence.  `anodize run examples/fluid2d.py`."""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread


class Flow(az.Bundle):
    u: Slice2D[f32]
    v: Slice2D[f32]
    u_next: DisjointSlice2D[f32]
    v_next: DisjointSlice2D[f32]
    div: DisjointSlice2D[f32]


@launch_contract(
    domain=2,
    block=(32, 8),
    requires=lambda f, k: f.u.shape[0] == f.u_next.shape[0] and f.u.shape[1] == f.u_next.shape[1]
    and f.v.shape[0] == f.u_next.shape[0] and f.v.shape[1] == f.u_next.shape[1]
    and f.v_next.shape[0] == f.u_next.shape[0] and f.v_next.shape[1] == f.u_next.shape[1]
    and f.div.shape[0] == f.u_next.shape[0] and f.div.shape[1] == f.u_next.shape[1],
)
@kernel
def fluid_step(f: Flow, k: f32) -> None:
    ij = thread.index_2d()
    if ij in f.u_next:
        r = ij.row
        c = ij.col
        if r > 0 and r < f.u.shape[0] - 1 and c > 0 and c < f.u.shape[1] - 1:
            lu = f.u[r - 1, c] + f.u[r + 1, c] + f.u[r, c - 1] + f.u[r, c + 1] - 4.0 * f.u[r, c]
            lv = f.v[r - 1, c] + f.v[r + 1, c] + f.v[r, c - 1] + f.v[r, c + 1] - 4.0 * f.v[r, c]
            f.u_next[ij] = f.u[r, c] + k * lu
            f.v_next[ij] = f.v[r, c] + k * lv
            f.div[ij] = 0.5 * (f.u[r, c + 1] - f.u[r, c - 1] + f.v[r + 1, c] - f.v[r - 1, c])
        else:
            f.u_next[ij] = f.u[r, c]
            f.v_next[ij] = f.v[r, c]
            f.div[ij] = 0.0


def reference(u: np.ndarray, v: np.ndarray, k: np.float32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    un, vn, div = u.copy(), v.copy(), np.zeros_like(u)
    for a, out in ((u, un), (v, vn)):
        lap = a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:] - np.float32(4.0) * a[1:-1, 1:-1]
        out[1:-1, 1:-1] = a[1:-1, 1:-1] + k * lap
    div[1:-1, 1:-1] = np.float32(0.5) * (u[1:-1, 2:] - u[1:-1, :-2] + v[2:, 1:-1] - v[:-2, 1:-1])
    return un, vn, div


def main(rows: int = 1024, cols: int = 1024, steps: int = 4) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(11)
    u_h = rng.standard_normal((rows, cols), dtype=np.float32)
    v_h = rng.standard_normal((rows, cols), dtype=np.float32)
    k = np.float32(0.2)
    cur = (dev.to_device(u_h), dev.to_device(v_h))
    nxt = (dev.empty((rows, cols), az.f32), dev.empty((rows, cols), az.f32))
    div = dev.empty((rows, cols), az.f32)
    cfg = az.LaunchConfig.for_shape((rows, cols), block=(32, 8))
    ref_u, ref_v = u_h, v_h
    for _ in range(steps):
        fluid_step[cfg](Flow(u=cur[0], v=cur[1], u_next=nxt[0], v_next=nxt[1], div=div), k)
        cur, nxt = nxt, cur
        ref_u, ref_v, ref_div = reference(ref_u, ref_v, k)
    np.testing.assert_allclose(cur[0].to_host(), ref_u, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(cur[1].to_host(), ref_v, rtol=1e-5, atol=1e-5)
    res = div.to_host()
    np.testing.assert_allclose(res, ref_div, rtol=1e-5, atol=1e-5)
    print(f"fluid2d on {dev.describe()}: {rows}x{cols}, {steps} steps, one bundle parameter, matches NumPy")
    return res


if __name__ == "__main__":
    main()
