"""Bit reinterpretation in kernels: `az.bitcast(x, T)` (docs/language.md, "Bits")."""

from __future__ import annotations

from typing import NoReturn, TypeVar

from anodize.types import bf16, f8e4m3, f8e5m2, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

_S = TypeVar("_S", f32, f64, i32, i64, u32, u64, f16, bf16, i8, i16, u8, u16, f8e4m3, f8e5m2)


def bitcast(x: float | int, ty: type[_S]) -> _S:
    """The bits of the scalar `x` read as the scalar type `ty` of the same size (`f32` and
    `i32`/`u32`, `f64` and `i64`/`u64`, `f16`/`bf16` and `i16`/`u16`, `f8e4m3`/`f8e5m2` and `i8`/`u8`); LLVM's `bitcast`.
    In kernels only; a weak literal takes its default type first (`1.0` is an f64)."""
    _device_only()


def _device_only() -> NoReturn:
    raise TypeError("`az.bitcast(x, T)` can only be called inside an anodize kernel")
