"""transpose: matrix transpose through a 32x32 shared-memory tile, in the safe tier.

Each block reads one 32x32 tile of `m` with coalesced reads (consecutive threads,
consecutive columns) into shared memory, each thread at its own slot of the tile
(`thread.index_in_block_2d()`), meets the others at a barrier, then writes its own
element of `out` (its `index_2d` witness), coalesced too, from the transposed slot of
the tile.  Reading another thread's slot is safe once nothing writes the tile any
more.  The tile is padded to 33 columns so the transposed reads hit 32 different
shared-memory banks.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

TILE = 32


@launch_contract(
    domain=2,
    block=(TILE, TILE),
    requires=lambda m, out: m.shape[0] == out.shape[1] and m.shape[1] == out.shape[0],
)
@kernel
def transpose(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()  # this thread's element of `out`
    w = thread.index_in_block_2d()  # its slot of the tile: (tid.y, tid.x)
    tile = az.shared.array((TILE, TILE + 1), f32)
    r0 = ij.row - w.row  # the block's first row and column of `out`
    c0 = ij.col - w.col
    r = c0 + w.row  # the block's tile of `m` is its tile of `out`, transposed
    c = r0 + w.col
    tile[w] = m[r, c] if r < m.shape[0] and c < m.shape[1] else 0.0
    az.syncthreads()  # the whole tile is written before any thread reads another's slot
    if ij in out:
        out[ij] = tile[w.col, w.row]


# small sizes for tools/sanitize.py (racecheck and synccheck run instrumented builds)
SANITIZE_KWARGS = {"rows": 100, "cols": 70}


def main(rows: int = 300, cols: int = 200) -> np.ndarray:
    dev = az.device()
    m_h = np.random.default_rng(5).random((rows, cols), dtype=np.float32)
    m = dev.to_device(m_h)
    out = dev.empty((cols, rows), az.f32)
    transpose[az.LaunchConfig.for_shape((cols, rows), block=(TILE, TILE))](m, out)
    res = out.to_host()
    np.testing.assert_array_equal(res, m_h.T)
    print(f"transpose on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()
