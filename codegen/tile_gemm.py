"""The canonical GEMM form of a tile kernel, recognised in one place.

    acc = tile.zeros((BM, BN), f32)                       # (optional: any tile of f32)
    for k in range(k0, k1, BK):
        acc = tile.matmul(tile.load(a, (r, k), (BM, BK)), tile.load(b, (k, c), (BK, BN)), acc)
    tile.store(out, pid, acc)                             # or acc.astype(f16 / bf16)

`match_gemm` finds it in a statement list; `lower_gemm_at` / `lower_gemm` lower it.  On a
GPU with tensor cores (the lowering's `tensor_cores`, from sm_80) a form with f16/bf16 inputs
and a zero-initialised accumulator becomes one `TileGemm` statement (lowered by
codegen/tile_gemm_llvm.py): on sm_90 (the lowering's `wgmma`) with wgmma where
`tc_wgmma_asm.AsmGemmConfig` takes the user's (BM, BN) (the compiler picks BK = 64, the
stages and the tile order; its ring is dynamic shared memory), else with mma.sync
(`tc_gemm.emit_gemm_tile`, its ring static up to 48 KiB, dynamic past that).  Everything else -- the CPU backend, the debug device, f32 inputs,
other initial accumulators, unsupported tile shapes -- returns None, and the generic tile
lowering (codegen/tile_lower.py: shared staging, a register block per thread, f32
accumulation) handles it.  docs/tiles.md ("On tensor cores") lists the conditions.
"""

from __future__ import annotations

from anodize.language.records import dataclass
from typing import Any

from anodize.language import ir
from anodize.language.gemm_form import GemmForm, gemm_staging_bytes, match_gemm, tensor_core_gemm_at
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, gemm_accumulators, static_shared_bytes

__all__ = ["GemmForm", "TileGemm", "match_gemm", "lower_gemm", "lower_gemm_at"]


@dataclass(frozen=True)
class TileGemm:
    """The tensor-core GEMM statement (plain IR, GPU only): C's tile (ctaid.y, ctaid.x) of
    `a @ b`, f32 accumulation from zero, stored masked at C's edges as C's element type.
    Operands read as zero past their own extents and past `k_stop` rounded up to BK (what the
    generic lowering's masked loads sum).  Lowered by codegen/tile_gemm_llvm.py."""

    a: ir.SliceRef
    b: ir.SliceRef
    c: ir.SliceRef
    k_stop: ir.Expr  # the K loop's stop (an int)
    tile: tuple[int, int, int]  # (BM, BN, BK)
    num_warps: int
    stages: int
    in_dtype: str
    out_dtype: str
    smem: str  # the shared array (gemm_smem_bytes of it) the emitter stages through ("" for wgmma)
    site: int  # fault site: a dimension too large for the tensor-core routine's 32-bit indices
    span: Any = None
    engine: str = "mma"  # "mma": mma.sync (tc_gemm.py); "wgmma": Hopper's wgmma (tc_wgmma_asm.py)
    dynamic_smem: int = 0  # wgmma: the bytes of dynamic shared memory the compiler owns
    grouped: bool = False  # tiles in grouped order (GROUP_M tile rows sweep N together, for L2)


STATIC_SHARED = STATIC_SHARED_MAX_BYTES  # a kernel's static shared memory, at most


def lower_gemm_at(lowering: Any, body: tuple[ir.Stmt, ...], i: int) -> tuple[list[ir.Stmt], int] | None:
    """The tensor-core statements of the GEMM form starting at `body[i]` (`acc = tile.zeros(...)`
    then the K loop and the store) and the index past it, or None for the generic lowering.
    The form is the language's (language/gemm_form.py): on a GPU with tensor cores, a form whose
    accumulator the on-chip bound left out must lower here (else the bound would not hold)."""
    k = lowering.k
    if body is not k.body:
        return None
    form = tensor_core_gemm_at(k, i)
    if form is None:
        return None
    done = lower_gemm(lowering, form, body=body, zero_init=True)
    if done is None and lowering.T > 1 and getattr(lowering, "tensor_cores", False) and form.acc in gemm_accumulators(k):
        raise AssertionError(f"the tensor-core GEMM form of `{k.name}` (accumulator `{form.acc}`) was not lowered onto tensor cores")
    return None if done is None else (done, form.end)


def lower_gemm(lowering: Any, form: GemmForm, body: tuple[ir.Stmt, ...] = (), zero_init: bool = False) -> list[ir.Stmt] | None:
    """The statements of `form` for `lowering` (codegen/tile_lower.py's pass: its `T` threads,
    `lowering.T == 1` on the CPU backend), or None for the generic lowering.

    The tensor-core path (`TileGemm`: wgmma on sm_90, else mma.sync) takes a form that the
    language's `tensor_core_gemm_at` gave (language/gemm_form.py: every target-independent
    condition), on the GPU with tensor cores (`lowering.tensor_cores`), at the kernel's top
    level.  Anything else: None, and the generic lowering runs."""
    if not (zero_init and lowering.T > 1 and getattr(lowering, "tensor_cores", False)):
        return None
    k = lowering.k
    if not (form.start < len(k.body) and k.body[form.start] is form.loop and body is k.body):
        return None
    a, st = form.a, form.store
    bm, bn, bk = form.shape
    warps = lowering.T // 32
    if getattr(lowering, "wgmma", False):
        cfg = _wgmma_config(lowering, form, warps)
        if cfg is not None:
            grouped = _may_regroup(k.body, form, st.slice.name)
            return _tile_gemm(lowering, form, warps, cfg.stages, "", "wgmma", cfg.smem_bytes(), grouped)
    from .tc_gemm import GemmConfig

    used = static_shared_bytes(lowering.shared)
    # static shared memory when the ring fits in 48 KiB; else the compiler's dynamic buffer, up to
    # the block's opt-in limit on this arch (not beside a dynamic array of the kernel's own)
    limit = max(STATIC_SHARED, getattr(lowering, "shared_limit", STATIC_SHARED))
    own_dynamic = any(t.dynamic for t in lowering.shared.values())
    for stages in _stage_choices(k, (4, 3, 2)):
        nbytes = gemm_staging_bytes(tile_m=bm, tile_n=bn, tile_k=bk, stages=stages)
        if used + nbytes <= STATIC_SHARED or (not own_dynamic and used + nbytes <= limit):
            break
    else:
        return None
    try:
        GemmConfig(bm, bn, bk, warps, stages, a.slice.ty.elem.name, form.out_elem)
    except ValueError:
        return None
    if used + nbytes > STATIC_SHARED:
        return _tile_gemm(lowering, form, warps, stages, "", "mma", nbytes, False)
    from anodize.language.types import I32, SharedTy

    smem = lowering.fresh("gemm_smem")
    lowering.shared[smem] = SharedTy(I32, (nbytes // 4,))
    return _tile_gemm(lowering, form, warps, stages, smem, "mma", 0, False)


def _stage_choices(k: ir.KernelIR, choices: tuple[int, ...]) -> tuple[int, ...]:
    """The ring depths to try, deepest first: the compiler's, or exactly the kernel's `num_stages`
    (an autotuning configuration's) when it set one the routine can take."""
    want = getattr(k, "tile_stages", 0)
    return (want,) if want in choices else choices


def _wgmma_config(lowering: Any, form: GemmForm, warps: int) -> Any:
    """The wgmma tile for `form` on sm_90, or None (then mma.sync): the user's (BM, BN) -- the
    programs are theirs -- with BM = 64 per warpgroup of 4 warps, BN 64, 128 or 256 and at most
    2 * BM; the compiler's BK (64) and stages (4, else 3, in what shared memory is left).  The
    kernel must have no dynamic shared array of its own (the compiler's would alias it)."""
    from .tc_wgmma_asm import AsmGemmConfig

    if any(t.dynamic for t in lowering.shared.values()):
        return None
    bm, bn, _ = form.shape
    used = static_shared_bytes(lowering.shared)
    for stages in _stage_choices(lowering.k, (4, 3)):
        try:
            cfg = AsmGemmConfig(bm, bn, warps, stages, form.a.slice.ty.elem.name, form.out_elem)
        except ValueError:
            return None
        if used + cfg.smem_bytes() <= getattr(lowering, "shared_limit", 0):
            return cfg
    return None


def _may_regroup(body: tuple[ir.Stmt, ...], form: GemmForm, c_name: str) -> bool:
    """May the GEMM compute its tiles in grouped order (program p computing tile sigma(p), a
    bijection of the grid)?  Only when no other statement of the kernel names C: then no
    program's other work meets the tile another program stores."""
    rest = body[: form.start - 1] + body[form.end :]
    return not any(_names_slice(s, c_name) for s in rest)


def _names_slice(node: Any, name: str) -> bool:
    from dataclasses import fields, is_dataclass

    if isinstance(node, ir.SliceRef):
        return node.name == name
    if isinstance(node, tuple):
        return any(_names_slice(x, name) for x in node)
    if not is_dataclass(node):
        return False
    return any(_names_slice(getattr(node, f.name), name) for f in fields(node))


def _tile_gemm(lowering: Any, form: GemmForm, warps: int, stages: int, smem: str, engine: str,
               dynamic_smem: int, grouped: bool) -> list[ir.Stmt]:
    from dataclasses import replace

    k = lowering.k
    a, b, st = form.a, form.b, form.store
    bm, bn, _ = form.shape
    site = len(k.fault_sites)
    span = form.loop.span
    lowering.k = replace(k, fault_sites=(*k.fault_sites, ir.FaultSite(
        k.path, span.line if span is not None else k.line, 1,
        "gemm: a tile GEMM on tensor cores takes matrices of fewer than 2**31 - 4096 rows and columns", "")))
    stop = lowering.scalar(form.loop.stop)
    lowering.uses_barrier = True
    # the emitter ends with a barrier (its shared memory is free again) and then stores C's tile
    # from any thread: a later read of C's tile needs a barrier first
    lowering.pending = {"global " + st.slice.name: {(True, False)}}
    gemm = TileGemm(a.slice, b.slice, st.slice, stop, (bm, bn, form.shape[2]), warps, stages, a.slice.ty.elem.name,
                    form.out_elem, smem, site, span, engine, dynamic_smem, grouped)
    return [gemm]  # type: ignore[list-item]  # a codegen-only statement (lower_llvm's s_TileGemm)


