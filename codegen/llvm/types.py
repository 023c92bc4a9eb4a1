"""The LLVM types of the kernel model (codegen/llvm/lower.py): integer and float types, the
witness structs, `reg_type` / `mem_type` / `value_type`, the `math` functions that are LLVM
intrinsics, the lowered slice (`SliceVal`) and a function's frame (`Frame`).  lower.py
re-exports them."""

from __future__ import annotations

from dataclasses import field
from anodize.language.records import dataclass
from typing import Any

import llvmlite.ir as llir

from anodize.language.math_table import MATH
from anodize.language.types import ScalarTy, SliceTy, TupleTy, Ty, WitnessTy

from . import halves


I1 = llir.IntType(1)
I8 = llir.IntType(8)
I32T = llir.IntType(32)
I64T = llir.IntType(64)
FLOAT = llir.FloatType()
DOUBLE = llir.DoubleType()
W2 = llir.LiteralStructType([I64T, I64T])
W3 = llir.LiteralStructType([I64T, I64T, I64T])
WITNESS_LL = {1: I64T, 2: W2, 3: W3}

# `math.f` -> the LLVM intrinsic `llvm.<name>.f32/f64` on every backend (exact operations, 0 ulp);
# the other functions of language/math_table.py are the target's (`Target.math`) but the
# classifications `isnan`/`isinf`/`isfinite`, an `fcmp` (`Lowerer.e_MathCall`)
INTRINSIC_MATH = {f.name: f.llvm for f in MATH.values() if f.llvm}


def reg_type(ty: ScalarTy) -> llir.Type:
    if ty.is_half:
        return llir.IntType(ty.bits)  # the bit pattern, i16 or i8 (codegen/llvm/halves.py)
    if ty.is_float:
        return FLOAT if ty.bits == 32 else DOUBLE
    return llir.IntType(ty.bits)


def mem_type(ty: ScalarTy) -> llir.Type:
    return I8 if ty.is_bool else reg_type(ty)


def value_type(ty: Ty) -> llir.Type:
    if isinstance(ty, ScalarTy):
        return reg_type(ty)
    if isinstance(ty, WitnessTy):
        return WITNESS_LL[ty.rank]
    if isinstance(ty, TupleTy):
        return tuple_type(ty)
    raise TypeError(f"no register type for {ty}")


def tuple_type(ty: TupleTy) -> llir.Type:
    """A tuple: an LLVM literal struct of the elements' register types."""
    return llir.LiteralStructType([reg_type(e) for e in ty.elems])


def add_attr(attrs: Any, name: str) -> None:
    """Add an attribute llvmlite's whitelist does not know (e.g. `nocapture`, or `"k"="v"`)."""
    set.add(attrs, name)


@dataclass
class SliceVal:
    name: str
    ty: SliceTy
    ptr: llir.Value
    dims: tuple[llir.Value, ...]
    # bytes the base is known aligned to beyond the element's alignment (0: nothing more): the
    # aligned copy of a kernel over record slices (codegen/llvm/record_align.py)
    base_align: int = 0


@dataclass
class Frame:
    vars: dict[str, tuple[llir.Value, Ty]] = field(default_factory=dict)
    slices: dict[str, SliceVal] = field(default_factory=dict)
    loops: list[tuple[llir.Block, llir.Block]] = field(default_factory=list)  # (continue, break)
    exit: llir.Block | None = None
    ret_slot: llir.Value | None = None


_DIM_NAMES = {1: ("len",), 2: ("rows", "cols"), 3: ("layers", "rows", "cols")}


def _fs(ty: ScalarTy) -> str:
    return "f32" if ty.bits == 32 else "f64"


def _align(ty: ScalarTy) -> int:
    return max(1, ty.info.mem_bits // 8)
