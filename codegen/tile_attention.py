"""The fused attention form of a tile kernel, recognised in one place (docs/tiles.md, "The
attention form").

A tile kernel whose whole body is, up to the names of its parameters and locals, the body of
`REFERENCE` below (examples/tile_attention.py's kernel: flash-attention forward, online softmax
over BN-row tiles of K and V, f16 in, f32 accumulate) is lowered, on a GPU with tensor cores,
to one `TileAttention` statement (codegen/tc_attention.py: mma.sync, ldmatrix, cp.async, the
scores and probabilities kept in registers).  The recogniser is exact: the kernel's typed body
is compared node by node with the reference's typed body for the same (BM, BN, D) -- every
operator, constant, type, shape and offset -- with only local and parameter names free (one
consistent renaming).  Anything else, and the CPU backend and the debug device, keep the
generic tile lowering (codegen/tile_lower.py), which computes the same thing with FP32 FMAs.
"""

from __future__ import annotations

from anodize.language.records import dataclass
from typing import Any

from anodize.language import ir
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, static_shared_bytes

__all__ = ["REFERENCE", "TileAttention", "match_attention", "lower_attention"]

from anodize.language.tile_forms import M_INIT, REFERENCE, AttentionForm, match_attention  # noqa: F401  (the form lives in the language)


@dataclass(frozen=True)
class TileAttention:
    """The tensor-core attention statement (plain IR, GPU only): the program's (BM, D) tile of
    O = softmax(Q[tile] K[base : base + ceil(seq / BN) BN].T * scale) V[same rows], each
    operand read as zero past its own extents, stored as f16 masked at O's edges.  Lowered
    by codegen/tc_attention.py."""

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
    stages: int  # K/V buffers (tc_attention.AttnConfig.stages)
    site: int  # fault site: sizes too large for 32-bit indices
    span: Any = None


STATIC_SHARED = STATIC_SHARED_MAX_BYTES


def _stage_choices() -> tuple[int, ...]:
    import os

    forced = os.environ.get("ANODIZE_ATTN_STAGES", "")  # (benchmarking: bench/tile_attention_sweep.py)
    return (int(forced),) if forced in ("1", "2") else (2, 1)


def lower_attention(lowering: Any, body: tuple[ir.Stmt, ...]) -> list[ir.Stmt] | None:
    """The statements of the attention form for `lowering` (codegen/tile_lower.py's pass) when
    `body` is the kernel's whole body and the form takes the tensor-core path, else None."""
    k = lowering.k
    if not (lowering.T > 1 and getattr(lowering, "tensor_cores", False) and body is k.body):
        return None
    form = match_attention(k)
    if form is None:
        return None
    from .tc_attention import AttnConfig

    bm, bn, d = form.tile
    warps = lowering.T // 32
    used = static_shared_bytes(lowering.shared)
    for stages in _stage_choices():
        try:
            cfg = AttnConfig(bm, bn, d, warps, stages)
        except ValueError:
            return None
        nbytes = cfg.smem_bytes(STATIC_SHARED - used)
        if used + nbytes <= STATIC_SHARED:
            break
    else:
        return None
    from dataclasses import replace

    from anodize.language.types import F32, I32, I64, SharedTy

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
        nbytes >= cfg.stages * cfg.kv_bytes() + cfg.q_bytes(), cfg.stages, site, span)
    return [*out, att]  # type: ignore[list-item]  # a codegen-only statement (lower_llvm's s_TileAttention)
