# barrier mutant of examples/transpose.py: move_down of the barrier on line 38
"""transpose: matrix transpose through 32x32 shared-memory tiles.

Why unsafe: the coalesced version reads a tile into shared memory, meets at a
barrier, and writes the *transposed* element, which is another thread's output
position; no witness can express that ownership, so the write uses
`write_unchecked` inside `with az.unsafe():`.  (The safe one-liner
`out[ij] = m[ij.col, ij.row]` is correct too, but reads uncoalesced.)
The tile is padded to 33 columns to avoid shared-memory bank conflicts.
"""

import numpy as np

import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, kernel, launch_contract, thread

TILE = 32


@launch_contract(
    domain=2,
    block=(32, 32),
    requires=lambda m, out: m.shape[0] == out.shape[1] and m.shape[1] == out.shape[0],
)
@kernel
def transpose(m: Slice2D[f32], out: DisjointSlice2D[f32]) -> None:
    rows = m.shape[0]
    cols = m.shape[1]
    with az.unsafe():
        tile = az.shared.array((32, 33), f32)
        tx = thread.tid_x()
        ty = thread.tid_y()
        bx = thread.block_idx_x() * 32
        by = thread.block_idx_y() * 32
        r = by + ty
        c = bx + tx
        if r < rows and c < cols:
            tile[ty, tx] = m[r, c]
        orow = bx + ty
        az.syncthreads()
        ocol = by + tx
        if orow < cols and ocol < rows:
            out.write_unchecked((orow, ocol), tile[tx, ty])


def main(rows: int = 300, cols: int = 200) -> np.ndarray:
    dev = az.device()
    m_h = np.random.default_rng(5).random((rows, cols), dtype=np.float32)
    m = dev.to_device(m_h)
    out = dev.empty((cols, rows), az.f32)
    transpose[az.LaunchConfig.for_shape((rows, cols), block=(32, 32))](m, out)
    res = out.to_host()
    np.testing.assert_array_equal(res, m_h.T)
    print(f"transpose on {dev.describe()}: {rows}x{cols}, matches NumPy")
    return res


if __name__ == "__main__":
    main()
