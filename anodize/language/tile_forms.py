"""The fused attention form of a tile kernel, recognised in one place (docs/tiles.md, "The
attention form"): part of the language because what it recognises decides where the tiles
live (registers on tensor cores: language/tile_storage.py does not count them).

A tile kernel whose whole body is, up to the names of its parameters and locals, the body of
`REFERENCE` below (examples/tile_attention.py's kernel: flash-attention forward, online softmax
over BN-row tiles of K and V, f16 in, f32 accumulate) is lowered, on a GPU with tensor cores,
to one `TileAttention` statement (codegen/tile/attention.py, codegen/tensorcore/attention.py).  The
recogniser is exact: the kernel's typed body is compared node by node with the reference's
typed body for the same (BM, BN, D) -- every operator, constant, type, shape and offset --
with only local and parameter names free (one consistent renaming).
"""

from __future__ import annotations

from dataclasses import is_dataclass
from anodize.language.records import dataclass
from typing import Any

from anodize.language import ir
from anodize.language.ir_walk import same, walk
from anodize.language.front import front_for_source  # (light: the typer it calls is loaded on first use)
from anodize.language.tile_ir import TileLoad, TileStore

__all__ = ["REFERENCE", "REFERENCE_PATH", "AttentionForm", "match_attention"]

REFERENCE_PATH = "<anodize attention form>"

# the form, as source: typed by the one front end for the candidate's (BM, BN, D)
REFERENCE = '''
import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, i64, tile


@az.tile_kernel(num_warps=4)
def attention(
    q: Slice2D[f16], k: Slice2D[f16], v: Slice2D[f16], o: DisjointSlice2D[f16], seq: i64, scale: f32,
    BM: az.Constant[int], BN: az.Constant[int], D: az.Constant[int],
) -> None:
    pid = tile.program_id_2d()
    qt = tile.load(q, pid, (BM, D))
    base = (pid.row * BM // seq) * seq
    m = tile.full((BM, 1), -1.0e30, f32)
    l = tile.zeros((BM, 1), f32)
    acc = tile.zeros((BM, D), f32)
    for j in range(0, seq, BN):
        s = tile.matmul(qt, tile.load(k, (base + j, 0), (BN, D)).T) * scale
        m_new = max(m, tile.max(s, axis=1, keepdims=True))
        p = az.math.exp(s - m_new)
        alpha = az.math.exp(m - m_new)
        l = l * alpha + tile.sum(p, axis=1, keepdims=True)
        acc = tile.matmul(p.astype(f16), tile.load(v, (base + j, 0), (BN, D)), acc * alpha)
        m = m_new
    result = acc / l
    tile.store(o, pid, result.astype(f16))
'''
M_INIT = -1.0e30  # the reference's initial running maximum
_NAMES = ("q", "k", "v", "o", "seq", "scale", "base", "j")
_PARAMS = ("q", "k", "v", "o", "seq", "scale")
_SKIP = ("span", "site", "weak")  # source positions, fault-table indices, literal-typing flags


@dataclass(frozen=True)
class AttentionForm:
    names: dict[str, str]  # reference name -> the kernel's name
    slices: dict[str, ir.SliceRef]  # "q", "k", "v", "o" -> the kernel's slice
    tile: tuple[int, int, int]  # (BM, BN, D)
    base_stmt: ir.Assign  # `base = ...` (a scalar statement, lowered as usual)


def _reference(bm: int, bn: int, d: int) -> tuple[ir.Stmt, ...] | None:
    front = front_for_source(REFERENCE, REFERENCE_PATH)
    fdef = next(f for f in front.kernels() if f.name == "attention")
    typed = front.typed(fdef, (("BM", bm), ("BN", bn), ("D", d)))
    return None if typed.ir is None else typed.ir.body


class _Alpha:
    """Structural equality of two typed IR trees up to one consistent renaming of locals."""

    def __init__(self) -> None:
        self.fwd: dict[str, str] = {}
        self.bwd: dict[str, str] = {}

    def name(self, a: str, b: str) -> bool:
        if self.fwd.get(a, b) != b or self.bwd.get(b, a) != a:
            return False
        self.fwd[a], self.bwd[b] = b, a
        return True

    def same(self, a: Any, b: Any) -> bool:
        return same(a, b, self.eq)

    def eq(self, node: Any, field: str, x: Any, y: Any) -> bool | None:
        """The fields `same` does not compare as they are: positions, sites and literal flags
        (skipped), a local's, parameter's or loop variable's name (renamed), a `TileElem`'s
        placeholders (renamed), and a type (equal)."""
        if field in _SKIP:
            return True
        if field == "name" and isinstance(node, (ir.Local, ir.SliceRef, ir.Assign)) or field == "var" and isinstance(node, ir.ForRange):
            return self.name(x, y)
        if field == "inputs" and isinstance(x, tuple):  # a TileElem's (placeholder, tile) pairs
            return len(x) == len(y) and all(self.name(p[0], r[0]) and self.same(p[1], r[1]) for p, r in zip(x, y))
        if field == "ty" or not is_dataclass(x) and not isinstance(x, tuple):
            return type(x) is type(y) and bool(x == y)
        if is_dataclass(x) and not hasattr(x, "span"):  # a type, a record: as it compares
            return type(x) is type(y) and bool(x == y)
        return None


def match_attention(k: ir.KernelIR) -> AttentionForm | None:
    """The attention form when `k`'s whole body is the reference's (up to names), else None."""
    body = k.body
    if k.domain != 2 or len(body) != 9:
        return None
    qt, loop = body[1], body[6]
    if not (isinstance(qt, ir.Assign) and isinstance(qt.value, TileLoad) and isinstance(loop, ir.ForRange)):
        return None
    if not (isinstance(loop.step, ir.Const) and isinstance(loop.step.value, int) and not isinstance(loop.step.value, bool)):
        return None
    if len(qt.value.ty.shape) != 2:
        return None
    (bm, d), bn = qt.value.ty.shape, loop.step.value
    if min(bm, bn, d) <= 0:
        return None
    ref = _reference(bm, bn, d)
    al = _Alpha()
    if ref is None or not al.same(ref, body):
        return None
    params = {p.name: p for p in k.params}
    names = {n: al.fwd[n] for n in _NAMES}
    if not all(names[n] in params for n in _PARAMS) or names["base"] in params or names["j"] in params:
        return None
    slices: dict[str, ir.SliceRef] = {}
    _collect(body, slices)
    store = body[8]
    assert isinstance(store, TileStore)
    base = body[2]
    assert isinstance(base, ir.Assign)
    return AttentionForm(names, {n: slices[names[n]] for n in ("q", "k", "v", "o")}, (bm, bn, d), base)


def _collect(node: Any, out: dict[str, ir.SliceRef]) -> None:
    for n in walk(node):
        if isinstance(n, ir.SliceRef):
            out.setdefault(n.name, n)


