"""async_fanout: one upload and normalisation, shared by three consumers. `anodize run examples/async_fanout.py`.

    base = dev.copy_op(d, host).and_then(lambda d: center[cfg].call_op(d, mean)).shared()
    az.zip(base.and_then(scale ...), base.and_then(square ...), base.and_then(clip ...))

`op.shared()` runs once however many ops use it: each consumer is ordered after it (an
event where it runs on another stream), and the three consumers, which only read its
output, may run at the same time (`az.zip`, on a pool).  A consumer that wrote the shared
output would be refused when the zip is built (`az.AliasingError`): the branches could race.
Each consumer ends with a `map`, a host function of its downloaded result (run after
completion, in a helper thread), and the zip's result is a tuple of the three.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda x, out: len(x) == len(out),
                 outputs=lambda x, k, d: {"out": ((len(x),), f32)})
@kernel
def affine(x: Slice[f32], out: DisjointSlice[f32], k: f32, d: f32) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * k + d


@launch_contract(domain=1, block=256, requires=lambda x, out: len(x) == len(out),
                 outputs=lambda x: {"out": ((len(x),), f32)})
@kernel
def square(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * x[i]


@launch_contract(domain=1, block=256, requires=lambda x, out: len(x) == len(out),
                 outputs=lambda x, lo, hi: {"out": ((len(x),), f32)})
@kernel
def clip(x: Slice[f32], out: DisjointSlice[f32], lo: f32, hi: f32) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = min(max(x[i], lo), hi)


def main(n: int = 1 << 20) -> tuple[float, float, float]:
    dev = az.device()
    host = np.random.default_rng(5).random(n, dtype=np.float32) * 2
    mean = float(host.mean())
    cfg = az.LaunchConfig.for_num_elems(n)
    d = dev.empty(n, az.f32)
    base = dev.copy_op(d, host).and_then(lambda x: affine[cfg].call_op(x, 1.0, -mean)).shared()

    def total(op: az.Op) -> az.Op:
        return op.and_then(lambda out: out.to_host_op()).map(lambda h: float(h.astype(np.float64).sum()))

    fan = az.zip(
        total(base.and_then(lambda c: affine[cfg].call_op(c, 3.0, 0.0))),
        total(base.and_then(lambda c: square[cfg].call_op(c))),
        total(base.and_then(lambda c: clip[cfg].call_op(c, -0.5, 0.5))),
    )
    with az.StreamPool(dev, 3) as pool:
        scaled, squares, clipped = fan.submit(pool).wait()
    c = host - np.float32(mean)
    wide = c.astype(np.float64)
    np.testing.assert_allclose(scaled, 3 * wide.sum(), rtol=1e-3, atol=1e-2)
    np.testing.assert_allclose(squares, np.square(wide).sum(), rtol=1e-4)
    np.testing.assert_allclose(clipped, np.clip(wide, -0.5, 0.5).sum(), rtol=1e-3, atol=1e-2)
    print(f"async_fanout on {dev.describe()}: n={n}, one shared upload + centring, three consumers; matches NumPy")
    return scaled, squares, clipped


if __name__ == "__main__":
    main()
