"""transpose_32x8: the 32x8 shared-memory transpose, each thread moving four elements, safe tier.

A block of 32x8 threads transposes one 32x32 tile of `m`: thread (ty, tx) reads the four
rows ty, ty + 8, ty + 16, ty + 24 of the tile (coalesced: consecutive threads, consecutive
columns) into shared memory, meets the others at a barrier, then writes four elements of
`out` from the transposed tile.  The four slots `tile[w.row + j * 8, w.col]` for
`j in range(4)` are the thread's own: the checker proves that no two threads of the
contract's (32, 8) block reach one slot of the (32, 33) array (multi-slot ownership,
docs/language.md "Safe shared memory"), so no `unsafe` is needed.  Fewer threads per tile
than the 32x32 version (transpose.py) leave each with more independent loads in flight.
The tile is padded to 33 columns so the transposed reads hit 32 different banks.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

TILE = 32
ROWS = 8  # block rows
PER = TILE // ROWS  # the elements each thread moves


@launch_contract(
    domain=2,
    block=(TILE, ROWS),
    requires=lambda m, out: m.shape[0] == out.shape[1] and m.shape[1] == out.shape[0],
)
@kernel
def transpose_32x8(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    t = thread.tile_2d(PER, 1)  # this thread's elements of `out`: rows ty + 8 * j of its block tile
    w = thread.index_in_block_2d()  # (tid.y, tid.x): its slots of the tile are rows w.row + 8 * j
    tile = az.shared.array((TILE, TILE + 1), f32)
    o = t.at(0, 0)
    r0 = o.row - w.row  # the block tile's first row of `out` (its first column of `m`)
    c0 = o.col - w.col  # its first column of `out` (its first row of `m`)
    for j in range(PER):
        r = c0 + w.row + j * ROWS
        c = r0 + w.col
        tile[w.row + j * ROWS, w.col] = m[r, c] if r < m.shape[0] and c < m.shape[1] else 0.0
    az.syncthreads()  # the whole tile is written before any thread reads another's slots
    for j in range(PER):
        ij = t.at(j, 0)
        if ij in out:
            out[ij] = tile[w.col, w.row + j * ROWS]


def config(rows: int, cols: int) -> az.LaunchConfig:
    """The launch for a `rows` x `cols` matrix `m`: one block per 32x32 tile of `out`."""
    return az.LaunchConfig(grid=(-(-rows // TILE), -(-cols // TILE)), block=(TILE, ROWS))


def main(rows: int = 300, cols: int = 200) -> np.ndarray:
    dev = az.device()
    m_h = np.random.default_rng(7).random((rows, cols), dtype=np.float32)
    m = dev.to_device(m_h)
    out = dev.empty((cols, rows), az.f32)
    transpose_32x8[config(rows, cols)](m, out)
    res = out.to_host()
    np.testing.assert_array_equal(res, m_h.T)
    print(f"transpose_32x8 on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()
