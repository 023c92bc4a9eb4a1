"""Device math: each function maps to libdevice or an LLVM intrinsic.

f32 arguments stay f32 (`__nv_expf`, not `__nv_exp`).  Precision is documented
in docs/language.md.
"""

from __future__ import annotations

from typing import NoReturn, TypeVar

T = TypeVar("T", bound=float)

__all__ = ["sqrt", "rsqrt", "exp", "log", "sin", "cos", "tanh", "pow", "fabs", "floor", "ceil", "fma", "fmin", "fmax"]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`math.{name}` can only be called inside an anodize kernel")


def sqrt(x: T) -> T: _device_only("sqrt")
def rsqrt(x: T) -> T: _device_only("rsqrt")
def exp(x: T) -> T: _device_only("exp")
def log(x: T) -> T: _device_only("log")
def sin(x: T) -> T: _device_only("sin")
def cos(x: T) -> T: _device_only("cos")
def tanh(x: T) -> T: _device_only("tanh")
def pow(x: T, y: T | float) -> T: _device_only("pow")  # noqa: A001
def fabs(x: T) -> T: _device_only("fabs")
def floor(x: T) -> T: _device_only("floor")
def ceil(x: T) -> T: _device_only("ceil")
def fma(x: T, y: T | float, z: T | float) -> T: _device_only("fma")
def fmin(x: T, y: T | float) -> T: _device_only("fmin")
def fmax(x: T, y: T | float) -> T: _device_only("fmax")
