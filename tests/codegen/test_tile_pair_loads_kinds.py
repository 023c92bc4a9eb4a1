"""Paired epilogue loads (codegen/tile/pair_loads.py) of the element kinds and offsets the GEMM
variants do not take: a bf16 residual read twice at a column offset only known at run time
(`+ off`), an i32 tile at a negative row and column offset (`- 3`, `- off`), and an f32 bias row
at `+ boff`.  Each fragment loop's fast copy pairs its loads (b32 for bf16, v2.b32 for i32,
v2.f32 for f32), one load a pair however often the tile is read, and is taken only where that
loop's load has an even column offset at run time, every slice aligned for pairs and every tile
inside (a per-element copy otherwise); ptxas takes the PTX."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile.entry import lower_tiles
from anodize.codegen.tile.epilogue import TilePredLoad
from anodize.codegen.tile.pair_loads import TilePairLoad
from anodize.codegen.tile.rows_plan import TileVecAligned
from anodize.language import ir
from anodize.language.ir_walk import walk

sys.path.insert(0, str(Path(__file__).parent))
from test_tile_mma import kernel_ir  # noqa: E402

SRC = """
import anodize as az
from anodize import DisjointSlice2D, Slice, Slice2D, bf16, f32, i32, i64, tile

@az.launch_contract(domain=2)
@az.tile_kernel(num_warps=4)
def k(a: Slice2D[bf16], b: Slice2D[bf16], res: Slice2D[bf16], bias: Slice[f32], ires: Slice2D[i32],
      c: DisjointSlice2D[f32], kdim: i64, off: i64, boff: i64) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros((64, 64), f32)
    for kk in range(0, kdim, 32):
        acc = tile.matmul(tile.load(a, (pid.row * 64, kk), (64, 32)), tile.load(b, (kk, pid.col * 64), (32, 64)), acc)
    r = tile.load(res, (pid.row * 64, pid.col * 64 + off), (64, 64)).astype(f32)
    t = tile.load(ires, (pid.row * 64 - 3, pid.col * 64 - off), (64, 64)).astype(f32)
    tile.store(c, pid, acc + r * r + tile.load(bias, (pid.col * 64 + boff,), (64,))[None, :] + t)
"""


def _names(e: object) -> set[str]:
    return {n.name for n in walk(e) if isinstance(n, ir.Local)}


def test_each_kind_pairs_behind_its_own_run_time_parity_test() -> None:
    k = kernel_ir(SRC)
    body = lower_tiles(k, 128, tensor_cores=True, wgmma=False, shared_limit=99 * 1024).body
    fast = {}
    for s in walk(body):
        if isinstance(s, ir.If) and any(isinstance(x, TileVecAligned) and x.lanes == 2 for x in walk(s.cond)):
            pairs = [x for x in walk(s.body) if isinstance(x, TilePairLoad)]
            (name,) = {p.slice.name for p in pairs}
            slow = [x for x in walk(s.orelse) if isinstance(x, TilePredLoad)]
            assert len(slow) == 2 * len(pairs) > 0 and not any(isinstance(x, TilePredLoad) for x in walk(s.body))
            parity = [x for x in walk(s.cond) if isinstance(x, ir.BinOp) and x.op == "%"]
            assert len(parity) == 1 and isinstance(parity[0].right, ir.Const) and parity[0].right.value == 2
            fast[name] = _names(parity[0].left)
    assert fast["res"] >= {"off"} and fast["ires"] >= {"off"} and fast["bias"] >= {"boff"}, fast
    ptx = compile_gpu(k, "sm_80", ptxas=None).ptx
    count = {op: len(re.findall(re.escape(op) + r"\s", ptx)) for op in ("ld.global.nc.v2.b32", "ld.global.nc.v2.f32", "ld.global.nc.b16")}
    assert count == {"ld.global.nc.v2.b32": 16, "ld.global.nc.v2.f32": 4, "ld.global.nc.b16": 32}, count
