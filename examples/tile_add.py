"""tile_add: element-wise add as a tile kernel (one program per 1024-element tile).

Each program loads its tile of `a` and `b` (masked at the end) and stores the sum to the one
tile of `c` it owns; the compiler chooses how the block's threads share the elements.  Eight
warps give each thread one 16-byte access per operand, the shape PyTorch's add uses (on the
H200 the fastest of the 512-4096 tiles over 2-8 warps measured: bench/RESULTS.md).

    python examples/tile_add.py
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, tile

BLOCK = 1024


@az.launch_contract(domain=1, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@az.tile_kernel(num_warps=8)
def add(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    pid = tile.program_id_1d()
    tile.store(c, pid, tile.load(a, pid, BLOCK) + tile.load(b, pid, BLOCK))


def main(n: int = 1 << 20) -> np.ndarray:
    dev = az.device()
    rng = np.random.default_rng(0)
    a_h = rng.random(n, dtype=np.float32)
    b_h = rng.random(n, dtype=np.float32)
    c = dev.empty(n, az.f32)
    add[az.LaunchConfig.for_tiles((n,), (BLOCK,))](dev.to_device(a_h), dev.to_device(b_h), c)
    res = c.to_host()
    np.testing.assert_array_equal(res, a_h + b_h)
    print(f"tile_add on {dev.describe()}: {n} elements, matches NumPy")
    return res


if __name__ == "__main__":
    main()
