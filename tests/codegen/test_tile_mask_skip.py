"""`ANODIZE_TILE_MASK_SKIP=1` (codegen/tile/mask_skip.py): `x = tile.where(cond, x, other)` with an
affine integer `cond` is skipped by one uniform branch where `cond` holds at every element.  The
skip condition the compiler builds is evaluated here against the brute-force mask over the tile
(sound: never skips a tile with a masked element; exact while the scalars are small), its shape
rules are pinned (other spellings keep the plain fragment loop), and the causal attention's PTX
has the branch and passes ptxas."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anodize.codegen.tile.mask_skip import LEAF_LIMIT, skip_condition
from anodize.language import ir
from anodize.language.front import front_for_source
from anodize.language.ir_walk import walk
from anodize.language.tile_ir import TileElem

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "codegen"))
import attention_variants as AV  # noqa: E402

SOURCE = '''
import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, i32, i64, tile


@az.tile_kernel(num_warps=4)
def masked(x: Slice2D[f32], o: DisjointSlice2D[f32], a: i64, b: i64, c: i32) -> None:
    pid = tile.program_id_2d()
    s = tile.load(x, pid, (16, 32))
    s = tile.where(tile.arange(16)[:, None] + a >= tile.arange(32)[None, :] + b, s, -1.0e30)
    s = tile.where(tile.arange(16)[:, None] * 2 - a < 3 * tile.arange(32)[None, :] + b - 5, s, 0.0)
    s = tile.where(tile.arange(16)[:, None] + a >= tile.arange(32)[None, :] + b, 0.0, s)
    s = tile.where(tile.arange(16)[:, None] * tile.arange(32)[None, :] >= a, s, 0.0)
    s = tile.where(tile.arange(16)[:, None] + c >= tile.arange(32)[None, :], s, 0.0)
    s = tile.where(tile.arange(16)[:, None] + a >= tile.arange(32)[None, :] + b, s, tile.load(x, pid, (16, 32)))
    tile.store(o, pid, s)
'''


class _Low:
    def scalar(self, e: Any) -> Any:
        return e


def _statements(src: str, name: str, consts: tuple[tuple[str, int], ...] = ()) -> list[ir.Assign]:
    front = front_for_source(src, f"<mask-skip-{name}>")
    fdef = next(f for f in front.kernels() if f.name == name)
    t = front.typed(fdef, consts)
    assert t.ir is not None, [d.message for d in t.diagnostics]
    return [n for n in walk(t.ir.body) if isinstance(n, ir.Assign) and n.name == "s" and isinstance(n.value, TileElem)]


def _eval(e: Any, env: dict[str, int]) -> Any:
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.Local):
        return env[e.name]
    if isinstance(e, ir.Cast):
        return _eval(e.value, env)
    if isinstance(e, ir.BinOp):
        a, b = _eval(e.left, env), _eval(e.right, env)
        return {"+": a + b, "-": a - b, "*": a * b}[e.op]
    if isinstance(e, ir.Compare):
        a, b = (_eval(o, env) for o in e.operands)
        return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[e.ops[0]]
    if isinstance(e, ir.BoolOp):
        vals = [_eval(v, env) for v in e.values]
        return any(vals) if e.op == "or" else all(vals)
    raise AssertionError(type(e).__name__)


def test_only_affine_masks_that_keep_the_target_get_a_skip() -> None:
    first, second, swapped, product, narrow, loaded = (skip_condition(_Low(), s) for s in _statements(SOURCE, "masked"))
    assert first is not None and second is not None
    assert swapped is None  # `where(cond, 0, s)`: s is replaced where cond holds
    assert product is None  # not affine in the coordinates
    assert narrow is None  # i32 arithmetic with a scalar may wrap: not covered, the loop runs as written
    assert loaded is None  # `other` reads memory: the statement stays as written (its loads, any barrier)


@pytest.mark.parametrize("which", [0, 1])
def test_the_skip_condition_is_the_brute_force_mask(which: int) -> None:
    run = skip_condition(_Low(), _statements(SOURCE, "masked")[which])
    assert run is not None
    i = np.arange(16)[:, None]
    k = np.arange(32)[None, :]
    rng = np.random.default_rng(which)
    pairs = [(int(x), int(y)) for x, y in rng.integers(-80, 80, (400, 2))] + [(LEAF_LIMIT + 5, 0), (0, -LEAF_LIMIT - 5)]
    skipped = 0
    for a, b in pairs:
        mask = (i + a >= k + b) if which == 0 else (i * 2 - a < 3 * k + b - 5)
        must_run = bool(_eval(run, {"a": a, "b": b}))
        if abs(a) < LEAF_LIMIT and abs(b) < LEAF_LIMIT:
            assert must_run == (not mask.all()), (a, b)  # exact for small scalars
        else:
            assert must_run  # outside the covered range: the loop runs as written
        skipped += not must_run
    assert 0 < skipped < len(pairs)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_causal_attention_branches_around_its_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_TILE_ATTN_WGMMA", "0")  # (the mma.sync loop's mix: test_tile_attention_wgmma.py pins wgmma's)
    sys.path.insert(0, str(ROOT / "tools"))
    from ptx_mix import analyse, attention_ptx

    stmt = next(s for s in _statements(AV.source("causal_diag", 4), "attention", (("BM", 128), ("BN", 64), ("D", 64)))
                if isinstance(s.value.template, ir.IfExp))
    assert skip_condition(_Low(), stmt) is not None
    ptx = attention_ptx("causal_diag", 4, 64, "ops+p+h+f+e+g+x+m")
    assert ptx is not None
    plain = attention_ptx("causal_diag", 4, 64, "ops+p+h+f+e+g+x")
    assert plain is not None
    skip, base = analyse(ptx), analyse(plain)
    assert skip.resources["spill_st"] == 0
    main, main0 = skip.main_loop(), base.main_loop()
    assert main is not None and main0 is not None
    assert len(main.blocks) > len(main0.blocks)  # the mask's fragment loop is a block of its own
    assert main.mix["mma.m16n8k16"] == main0.mix["mma.m16n8k16"] == 128


RESCALE = '''
import anodize as az
from anodize import DisjointSlice2D, Slice2D, f16, f32, tile


@az.tile_kernel(num_warps=4)
def rescale(w: Slice2D[f16], o: DisjointSlice2D[f32]) -> None:
    pid = tile.program_id_2d()
    acc = tile.zeros((64, 32), f32)
    other = tile.zeros((64, 32), f32)
    alpha = tile.full((64, 1), 0.5, f32)
    acc = tile.matmul(tile.load(w, pid, (64, 16)), tile.load(w, pid, (16, 32)), acc * alpha)
    acc = tile.matmul(tile.load(w, pid, (64, 16)), tile.load(w, pid, (16, 32)), alpha * acc)
    acc = tile.matmul(tile.load(w, pid, (64, 16)), tile.load(w, pid, (16, 32)), other * alpha)
    acc = tile.matmul(tile.load(w, pid, (64, 16)), tile.load(w, pid, (16, 32)), acc * acc)
    acc = tile.matmul(tile.load(w, pid, (64, 16)), tile.load(w, pid, (16, 32)), acc + alpha)
    tile.store(o, pid, acc + other)
'''


def test_lazy_rescale_takes_target_times_a_row_tile_only() -> None:
    from anodize.codegen.tile.mask_skip import rescale_condition
    from anodize.language.tile_ir import TileMatmul

    front = front_for_source(RESCALE, "<lazy-rescale>")
    t = front.typed(next(f for f in front.kernels() if f.name == "rescale"), ())
    assert t.ir is not None
    accs = [n.value.acc for n in walk(t.ir.body) if isinstance(n, ir.Assign) and isinstance(n.value, TileMatmul)]
    got = [rescale_condition("acc", a, lambda n, ty: [f"r_{n}_{i}" for i in range(2)]) for a in accs]
    assert [g is not None for g in got] == [True, True, False, False, False]
    cond = got[0]
    assert isinstance(cond, ir.WarpOp) and cond.op == "any"  # warp-uniform: every lane takes the same branch
    assert {x.name for x in walk(cond) if isinstance(x, ir.Local)} == {"r_alpha_0", "r_alpha_1"}
    assert rescale_condition("acc", accs[0], lambda n, ty: None) is None  # alpha not in registers


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")
def test_attention_rescale_is_a_block_behind_one_vote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_TILE_ATTN_WGMMA", "0")  # (the mma.sync loop's mix: test_tile_attention_wgmma.py pins wgmma's)
    sys.path.insert(0, str(ROOT / "tools"))
    from ptx_mix import analyse, attention_ptx

    ptx = attention_ptx("example", 4, 64, "ops+p+h+f+e+g+x+l")
    assert ptx is not None
    rep = analyse(ptx)
    main = rep.main_loop()
    assert main is not None and rep.resources["spill_st"] == 0
    body = [ln for ln in ptx.splitlines() if "vote.sync.any" in ln]
    assert len(body) == 1  # one vote a loop (the accumulator's rescale)
    assert main.mix["mma.m16n8k16"] == 128
