"""What each `tile.matmul` of a tile kernel became on a GPU, and why not a faster instruction:
the lines `anodize compile -v` prints (`CompiledKernel.matmuls`) and the `az-fma-matmul`
warnings of the compile (a matmul on FP32 FMAs on a GPU with tensor cores)."""

from __future__ import annotations

from typing import Any

from anodize.language import ir, messages
from anodize.language.tile_plan import plan_tiles

from .layout import stacked_enabled, wgmma_shape_ok, wgmma_stacked_ok
from .mma import TileMma

__all__ = ["matmul_report"]


def matmul_report(typed: ir.KernelIR, lowered: ir.KernelIR, arch: str, engine: str) -> tuple[list[str], list[Any]]:
    """(one line per matmul, the warnings) for tile kernel `typed` lowered to `lowered` for `arch`
    (`engine`: toolchain.tc_gemm_engine's "wgmma" / "mma" / "" below sm_80)."""
    lines: list[tuple[int, str]] = []
    warps = max(typed.tile_warps, 1)
    for s in ir.walk_stmts(lowered.body):
        if not isinstance(s, TileMma):
            continue
        line = s.span.line if s.span is not None else typed.line
        m, n = s.layout.m, s.layout.n
        if s.engine == "wgmma" and s.a is None:  # (codegen/tile/attn_wgmma.py)
            where = ("A from registers" if s.a_regs else
                     "A resident in shared memory, read through descriptors" if s.prefetch is not None and s.prefetch.a_ss else
                     "A resident in shared memory, read with ldmatrix")
            lines.append((line, f"wgmma.m64n{n}k16 ({m}x{n}x{s.k}, {where}, B prefetched in two slots, accumulator in registers)"))
            continue
        if s.engine == "wgmma":
            blocks = f", {s.layout.mt} m64 blocks a warpgroup" if s.layout.stacked else ""
            lines.append((line, f"wgmma.m64n{n}k16 ({m}x{n}x{s.k}{blocks}, {s.stages}-stage cp.async ring, "
                                f"accumulator in registers)"))
            continue
        if s.a is None:  # A in registers (P of an attention): mma.sync's A fragments are the accumulator's
            where = "A from registers in the accumulator layout" if s.a_regs else \
                "A resident in shared memory (copied once before its loop)"
            lines.append((line, f"mma.sync.m16n8k16 ({m}x{n}x{s.k}, {where}, B staged whole, accumulator in registers)"))
            continue
        if engine != "wgmma":
            why = "wgmma is sm_90 only" if engine else ""
        elif wgmma_stacked_ok(m, n, warps) and not stacked_enabled():
            why = "ANODIZE_TILE_WGMMA_STACK=0 (two m64 blocks a warpgroup turned off)"
        elif wgmma_stacked_ok(m, n, warps) and (s.layout.wm, s.layout.wn) == (warps, 1):
            why = (f"the kernel holds whole rows in each warp (a row reduction or an A operand from registers: "
                   f"{m // warps} rows a warp), which two m64 blocks a warpgroup do not")
        elif not wgmma_shape_ok(m, n, warps) and not wgmma_stacked_ok(m, n, warps):
            why = (f"a {m}x{n} accumulator over {warps} warps is not a wgmma shape (64 rows a warpgroup and N "
                   f"64/128/256, or 128 rows and N 64/128)")
        else:
            why = "its ring does not fit the block's shared memory"
        lines.append((line, f"mma.sync.m16n8k16 ({m}x{n}x{s.k}, {s.stages}-stage cp.async ring, "
                            f"accumulator in registers)" + (f"; not wgmma: {why}" if why else "")))
    warnings = []
    plan = plan_tiles(typed)
    for span, why in plan.generic:
        line = span.line if span is not None else typed.line
        if not engine:
            why = f"{arch} has no tensor cores"
        lines.append((line, f"fma.rn.f32 (the generic lowering: tiles in shared memory): {why}"))
        if engine and span is not None:
            warnings.append(messages.fma_matmul(span, why, arch))
    return [f"line {ln}: tile.matmul -> {text}" for ln, text in sorted(lines)], warnings
