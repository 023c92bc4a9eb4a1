"""The tensor-core matmul statement of the tile lowering (`TileMma`) and its operands, as plain
IR nodes: made by codegen/tile/lower.py, lowered to LLVM by codegen/tile/mma.py (and mma_regs.py
for an A operand in registers)."""

from __future__ import annotations

from typing import Any

from anodize.language import ir
from anodize.language.records import dataclass

from .layout import MmaLayout

__all__ = ["MmaOperandIR", "TileMma"]


@dataclass(frozen=True)
class MmaOperandIR:
    slice: ir.SliceRef
    offset: tuple[Any, ...]  # (row, col) of the tile at the first K step (i64 plain-IR expressions)
    shape: tuple[int, int]  # the tile as loaded
    trans: bool  # the matmul reads it transposed

    def k_axis(self, is_a: bool) -> int:
        """The axis of the loaded tile along which K runs."""
        return (0 if self.trans else 1) if is_a else (1 if self.trans else 0)


@dataclass(frozen=True)
class TileMma:
    acc: tuple[str, ...]  # the accumulator's registers (f32 locals, layout order)
    layout: MmaLayout
    a: MmaOperandIR | None  # None: A in registers (`a_regs`)
    b: MmaOperandIR
    k: int  # the matmul's K extent (per step)
    trips: Any  # steps (an i64 expression; 1 for a matmul outside a pipelined loop)
    k_tile: int  # the routine's K step
    elem: str  # f16 / bf16
    warps: int
    stages: int
    engine: str  # "mma" | "wgmma"
    site: int  # fault site: a dimension too large for 32-bit indices
    dynamic_smem: int  # bytes of the compiler's dynamic shared buffer the ring takes
    span: Any = None
    a_regs: tuple[str, ...] = ()  # `a` None: A's (M, K) registers in the accumulator layout (f16/bf16 locals)
    prefetch: Any = None  # a register-A matmul's part in its loop's B prefetch (codegen/tile/prefetch.py `Prefetch`)
