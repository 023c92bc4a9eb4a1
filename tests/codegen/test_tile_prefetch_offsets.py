"""The cross-iteration prefetch (codegen/tile/prefetch.py, on by default since session 15)
evaluates a B tile's offsets at iterations the loop itself never runs: the next one past the
last (and the first of an empty loop, in the prologue).  Offsets built from the loop variable,
locals and constants read nothing there; an offset that reads a slice element (a block table,
`k[base + idx[j // BN]]`) would read `idx` one entry past its end at the last iteration (a
bounds fault of a correct program, or an out-of-bounds read where the index is proven for the
loop's own iterations), so such a loop is not prefetched.  A division by a non-constant
divisor likewise (a zero divisor the loop never divides by)."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from anodize.codegen.tile.entry import lower_tiles
from anodize.codegen.tile.prefetch import TileCopy, TileDrain
from anodize.language import ir
from anodize.language.front import front_for_source

sys.path.insert(0, str(Path(__file__).resolve().parent))
import attention_variants as AV  # noqa: E402

EX = AV.BODIES["example"]
HEAD = AV.HEAD.replace("WARPS", "4").replace("seq: i64, scale: f32,", "seq: i64, scale: f32, idx: Slice[i64], w: i64,").replace(
    "from anodize import DisjointSlice2D, Slice2D,", "from anodize import DisjointSlice2D, Slice, Slice2D,")
K_AT = "tile.load(k, (base + j, 0), (BN, D))"
BODIES = {
    "plain": (EX, True),
    "block table": (EX.replace(K_AT, "tile.load(k, (base + idx[j // BN], 0), (BN, D))"), False),
    "divided by a parameter": (EX.replace(K_AT, "tile.load(k, (base + j // w, 0), (BN, D))"), False),
    "divided by a constant": (EX.replace(K_AT, "tile.load(k, (base + (j // BN) * BN, 0), (BN, D))"), True),
    # (the rules before: a jump out of the body; an offset reading a local the body assigns)
    "break": (EX.replace("        m = m_new\n", "        m = m_new\n        if j + BN >= seq:\n            break\n"), False),
    "assigned local": (EX.replace("    for j in range(0, seq, BN):\n", "    kb = base\n    for j in range(0, seq, BN):\n")
                       .replace(K_AT, "tile.load(k, (kb, 0), (BN, D))").replace("        m = m_new\n", "        m = m_new\n        kb = kb + BN\n"),
                       False),
}


@pytest.mark.parametrize("name", list(BODIES))
def test_a_b_offset_that_may_fault_ahead_of_the_loop_is_not_prefetched(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_ATTN_FORM", "off")
    monkeypatch.delenv("ANODIZE_TILE_PREFETCH", raising=False)  # (the default: on)
    body, prefetched = BODIES[name]
    assert body != EX or name == "plain"
    front = front_for_source(HEAD + body, f"<prefetch-{name}>")
    fdef = next(f for f in front.kernels() if f.name == "attention")
    t = front.typed(fdef, (("BM", 128), ("BN", 64), ("D", 64)))
    assert t.ir is not None, [x.message for x in t.diagnostics]
    guard = lower_tiles(replace(t.ir, tile_warps=4), 128, tensor_cores=True, shared_limit=99 * 1024)
    copies = [s for s in ir.walk_stmts(guard.body) if isinstance(s, (TileCopy, TileDrain))]
    assert bool(copies) == prefetched, copies
