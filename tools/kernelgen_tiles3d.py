"""Random batched (3-D) tile-kernel modules for the agreement run (tools/kernelgen_tiles.py
calls it for one accepted-side tile module in five, and for some refused ones).

    gen_batched_module(ch, outside=False) -> str

A module holds one `@az.tile_kernel` with `@az.launch_contract(domain=3)` over `Slice3D` inputs
and a `DisjointSlice3D` output: `tile.program_id_3d()`, loads of the program's own `(1, BM,
BN)` tile or at `(pid.layer, row, col)` offsets squeezed with `.reshape`, element-wise work,
reductions with and without `keepdims`, a causal mask from `tile.arange`, optionally a K loop of
`tile.matmul` (a batched GEMM), and a store of the program's tile brought back to 3-D with
`tile.expand_dims` or `.reshape`.  `outside=True` makes one mistake such kernels are refused
for (a store at another layer, a load of another program's output tile, a 2-D id, a 3-D tile
transposed, a 2-D tile stored into the 3-D output, a reshape to another size).
"""

from __future__ import annotations

from typing import Any

__all__ = ["gen_batched_module", "BATCHED_OUTSIDE_KINDS"]

HEADER = (
    "import math\n"
    "import anodize as az\n"
    "from anodize import DisjointSlice3D, Slice3D, bf16, f16, f32, i32, i64, tile\n"
)
BATCHED_OUTSIDE_KINDS = ("store_layer", "load_output", "pid_2d", "transpose_3d", "store_2d", "bad_reshape")


def gen_batched_module(ch: Any, outside: bool = False) -> str:
    bm, bn = ch.choice((1, 2, 4, 8, 16, 32)), ch.choice((2, 4, 8, 16, 32, 64))
    t = ch.choice(("f32", "f32", "f16", "bf16"))
    out_t = ch.choice(("f32", "f32", "f16"))
    lines = [HEADER, "", "@az.launch_contract(domain=3)", f"@az.tile_kernel(num_warps={ch.choice((1, 2, 4, 8))})",
             f"def kern(a: Slice3D[{t}], b: Slice3D[{t}], c: DisjointSlice3D[{out_t}], s: f32, k: i64) -> None:",
             "    pid = tile.program_id_3d()"]
    own = ch.coin(0.4)
    if own:
        lines.append(f"    x = tile.load(a, pid, (1, {bm}, {bn})).reshape(({bm}, {bn}))")
    else:
        row = ch.choice((f"pid.row * {bm}", "k", f"pid.row * {bm} - 1", "a.shape[1] - {bm}".format(bm=bm)))
        lines.append(f"    x = tile.load(a, (pid.layer, {row}, pid.col * {bn}), (1, {bm}, {bn}), other=0.5).reshape(({bm}, -1))")
    lines.append("    y = x.astype(f32)")
    for _ in range(ch.integer(1, 4)):
        step = ch.choice(("scale", "rowmax", "colsum", "mask", "matmul", "total"))
        if step == "scale":
            lines.append(f"    y = y * s + {ch.choice(('1.0', '0.5', '2.0'))}")
        elif step == "rowmax":
            if ch.coin():
                lines.append("    m = tile.max(y, axis=1)")
                lines.append("    y = az.math.exp(y - m[:, None])")
            else:
                lines.append("    y = y - tile.max(y, axis=1, keepdims=True)")
        elif step == "colsum":
            lines.append("    y = y + tile.sum(y, axis=0) * 0.25")
        elif step == "mask":
            lines.append(f"    y = tile.where((pid.row * {bm} + tile.arange({bm}))[:, None] >= tile.arange({bn})[None, :], y, 0.0)")
        elif step == "matmul" and t in ("f16", "bf16") and bm >= 2:
            bk = ch.choice((8, 16, 32))
            lines.append(f"    acc = tile.zeros(({bm}, {bn}), f32)")
            lines.append(f"    for kk in range(0, a.shape[2], {bk}):")
            lines.append(f"        p = tile.load(a, (pid.layer, pid.row * {bm}, kk), (1, {bm}, {bk})).reshape(({bm}, {bk}))")
            lines.append(f"        q = tile.load(b, (pid.layer, kk, pid.col * {bn}), (1, {bk}, {bn})).reshape(({bk}, {bn}))")
            lines.append("        acc = tile.matmul(p, q, acc)")
            lines.append("    y = y + acc")
        else:
            lines.append("    y = y + tile.sum(y) * 0.0")
    value = "y" if out_t == "f32" else f"y.astype({out_t})"
    back = ch.choice((f"tile.expand_dims({value}, 0)", f"{value}.reshape((1, {bm}, {bn}))", f"({value})[None, :, :]"))
    lines.append(f"    tile.store(c, pid, {back})")
    if outside:
        kind = ch.choice(BATCHED_OUTSIDE_KINDS)
        bad = {
            "store_layer": f"    tile.store(c, (pid.layer + 1, pid.row, pid.col), tile.zeros((1, {bm}, {bn}), {out_t}))",
            "load_output": f"    z = tile.load(c, (pid.layer, 0, 0), (1, {bm}, {bn}))",
            "pid_2d": "    q2 = tile.program_id_2d()",
            "transpose_3d": f"    z = tile.zeros((1, {bm}, {bn}), f32).T",
            "store_2d": f"    tile.store(c, pid, tile.zeros(({bm}, {bn}), {out_t}))",
            "bad_reshape": f"    z = x.reshape(({bm} + 1, {bn}))",
        }[kind]
        lines.insert(ch.integer(len(lines) - 1, len(lines)), bad)
    return "\n".join(lines) + "\n"
