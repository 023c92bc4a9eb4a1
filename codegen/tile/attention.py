"""The fused attention form of a tile kernel, recognised in one place (docs/tiles.md, "The
attention form").

A tile kernel whose whole body is, up to the names of its parameters and locals, the body of
`REFERENCE` below (examples/tile_attention.py's kernel: flash-attention forward, online softmax
over BN-row tiles of K and V, f16 in, f32 accumulate) is lowered, on a GPU with tensor cores,
to one `TileAttention` statement (codegen/tensorcore/attention.py: mma.sync, ldmatrix, cp.async, the
scores and probabilities kept in registers).  The recogniser is exact: the kernel's typed body
is compared node by node with the reference's typed body for the same (BM, BN, D) -- every
operator, constant, type, shape and offset -- with only local and parameter names free (one
consistent renaming).  Anything else, and the CPU backend and the debug device, keep the
generic tile lowering (codegen/tile/plain.py), which computes the same thing with FP32 FMAs.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from anodize.language.attention_config import attention_choice
from anodize.language.records import dataclass
from anodize.language.types import F32, I32, I64, SharedTy

from anodize.language import ir
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, attention_tiles_in_registers, static_shared_bytes

__all__ = ["REFERENCE", "TileAttention", "match_attention", "lower_attention"]

from anodize.language.tile_forms import M_INIT, REFERENCE, AttentionForm, match_attention  # noqa: F401  (the form lives in the language)


@dataclass(frozen=True)
class TileAttention:
    """The tensor-core attention statement (plain IR, GPU only): the program's (BM, D) tile of
    O = softmax(Q[tile] K[base : base + ceil(seq / BN) BN].T * scale) V[same rows], each
    operand read as zero past its own extents, stored as f16 masked at O's edges.  Lowered
    by codegen/tensorcore/attention.py."""

    q: ir.SliceRef
    k: ir.SliceRef
    v: ir.SliceRef
    o: ir.SliceRef
    seq: ir.Expr  # the key loop's stop (i64)
    scale: ir.Expr  # f32
    base: ir.Expr  # the first K / V row (i64)
    tile: tuple[int, int, int]  # (BM, BN, D)
    num_warps: int
    smem: str  # the shared array the emitter stages through
    separate_q: bool  # Q's staging beside the K and V buffers (else over them)
    stages: int  # K/V buffers (tensorcore.attention.AttnConfig.stages)
    site: int  # fault site: sizes too large for 32-bit indices
    span: Any = None
    q_regs: bool = True  # Q's fragments in registers (else read from shared every key tile)
    dynamic_smem: int = 0  # the bytes of the compiler's dynamic shared buffer it stages through (smem "")
    groups: int = 1  # warp groups splitting the key tiles (tensorcore.attention.AttnConfig.groups)
    lazy: bool = True  # rescale O only when a row of the warp has a new maximum (AttnConfig.lazy)


STATIC_SHARED = STATIC_SHARED_MAX_BYTES


def _knob(name: str, allowed: tuple[str, ...]) -> str:
    v = os.environ.get(name, "")  # (benchmarking: bench/tile_attention_sweep.py; not in the cache key)
    return v if v in allowed else ""


def _knobs_set() -> bool:
    return any(os.environ.get(n) for n in ("ANODIZE_ATTN_QREGS", "ANODIZE_ATTN_STAGES", "ANODIZE_ATTN_GROUPS",
                                            "ANODIZE_ATTN_LAZY", "ANODIZE_ATTN_DYNAMIC", "ANODIZE_ATTN_FORM"))


def form_off() -> bool:
    """`ANODIZE_ATTN_FORM=off` (a benchmarking switch): the attention form is not recognised, so
    its kernel compiles by operations (the layout plan: language/tile_plan.py) like any other."""
    return os.environ.get("ANODIZE_ATTN_FORM", "") == "off"


def choose_config(bm: int, bn: int, d: int, warps: int, used: int, limit: int, own_dynamic: bool) -> tuple[Any, int, bool] | None:
    """(the emitter's AttnConfig, its shared bytes, whether they are the compiler's dynamic
    buffer) for a (BM, BN, D) tile over `warps` warps, or None (then the generic lowering).
    `used`: the kernel's static shared bytes; `limit`: a block's opt-in shared limit on the
    arch.  Q's fragments stay in registers when the register budget holds them (else Q is read
    from shared every key tile, FlashAttention-2's choice); K/V take a two-stage ring when it
    fits, else one stage; the buffers are static shared memory up to 48 KiB, else the
    compiler's dynamic buffer -- when the kernel has no dynamic array of its own and the SM
    holds the blocks the registers allow (`AttnConfig.min_blocks`)."""
    q_knob, s_knob = _knob("ANODIZE_ATTN_QREGS", ("0", "1")), _knob("ANODIZE_ATTN_STAGES", ("1", "2"))
    g_knob = _knob("ANODIZE_ATTN_GROUPS", ("1", "2"))
    lazy = _knob("ANODIZE_ATTN_LAZY", ("0", "1")) != "0"
    return attention_choice(bm, bn, d, warps, used, limit, own_dynamic,
                            groups=(int(g_knob),) if g_knob else (1,),
                            q_regs=(q_knob == "1",) if q_knob else (True, False),
                            stages=(int(s_knob),) if s_knob else (2, 1), lazy=lazy,
                            dynamic=_knob("ANODIZE_ATTN_DYNAMIC", ("0",)) == "")


def lower_attention(lowering: Any, body: tuple[ir.Stmt, ...]) -> list[ir.Stmt] | None:
    """The statements of the attention form for `lowering` (codegen/tile/plain.py's pass) when
    `body` is the kernel's whole body and the form takes the tensor-core path, else None."""
    if not (lowering.T > 1 and getattr(lowering, "tensor_cores", False) and body is lowering.k.body) or form_off():
        return None
    k = getattr(lowering, "typed", None) or lowering.k  # (the kernel as typed: the layout plan's view hoists matmuls)
    body = k.body
    form = match_attention(k)
    if form is None:
        return None
    bm, bn, d = form.tile
    warps = lowering.T // 32
    used = static_shared_bytes(lowering.shared)
    limit = max(STATIC_SHARED, getattr(lowering, "shared_limit", STATIC_SHARED))
    chosen = choose_config(bm, bn, d, warps, used, limit, any(t.dynamic for t in lowering.shared.values()))
    if chosen is None:
        # the typer left the form's tiles out of the on-chip bound only when the language's choice
        # takes it on every GPU with tensor cores: declining it there (no benchmarking knob set)
        # would leave a kernel over the bound
        if not _knobs_set() and attention_tiles_in_registers(k):
            raise AssertionError(f"the attention form of `{k.name}` was not lowered onto tensor cores")
        return None
    cfg, nbytes, dynamic = chosen
    smem = ""
    if not dynamic:
        smem = lowering.fresh("attn_smem")
        lowering.shared[smem] = SharedTy(I32, (nbytes // 4,))
    site = len(k.fault_sites)
    loop = body[6]
    span = loop.span
    lowering.k = replace(k, fault_sites=(*k.fault_sites, ir.FaultSite(
        k.path, span.line if span is not None else k.line, 1,
        "attention: a tile attention on tensor cores takes matrices of fewer than 2**31 - 4096 rows and columns", "")))
    out = lowering.stmt(body[0]) + lowering.stmt(form.base_stmt)
    n = form.names
    lowering.uses_barrier = True
    lowering.pending = {"global " + form.slices["o"].name: {(True, False)}}
    att = TileAttention(
        form.slices["q"], form.slices["k"], form.slices["v"], form.slices["o"],
        lowering.scalar(ir.Local(n["seq"], I64)), lowering.scalar(ir.Local(n["scale"], F32)),
        lowering.scalar(ir.Local(n["base"], I64)), (bm, bn, d), warps, smem,
        nbytes >= cfg.stages * cfg.kv_bytes() + cfg.q_bytes(), cfg.stages, site, span, cfg.q_regs,
        nbytes if dynamic else 0, cfg.groups, cfg.lazy)
    return [*out, att]  # type: ignore[list-item]  # a codegen-only statement (the LLVM lowering's s_TileAttention)
