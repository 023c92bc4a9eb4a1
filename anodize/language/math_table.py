"""The kernel math functions, one row each: the one table the typer (through vocab's
`MATH_FUNCS`, `MATH_PREDICATES`, `MATH_INT_EXPONENT`), the intrinsic declarations, the mypy
plugin and every backend read.  The rows are declared by the stubs themselves
(language/math_fns.py, re-exported as `anodize.math`): each `def` carries its row in a
`@declare(...)`, so a function and its stub cannot drift apart.

Callable as `math.f` (Python's module) or `az.math.f`: every function of Python's `math`
module with a libdevice (`__nv_*f` / `__nv_*`) or LLVM counterpart, plus `rsqrt`, `fmin`,
`fmax` and `fma` (anodize's own).  f32 arguments stay f32; an f16/bf16 one is computed in f32
and rounded once.  `floor`/`ceil`/`trunc` return the float type, not a Python int.

Adding a function: its stub with its `@declare` row in math_fns.py, and its reference in
tests/codegen/math_cases.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from anodize.language.records import dataclass

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")


@dataclass(frozen=True)
class MathFunc:
    name: str  # the Python spelling: `math.<name>` / `az.math.<name>`
    arity: int  # positional arguments (the only ones)
    predicate: bool = False  # the result is `bool_` (a classification, lowered to an `fcmp`)
    int_exponent: bool = False  # the last argument is an integer exponent (`ldexp(x, n)`)
    llvm: str | None = None  # the exact LLVM intrinsic `llvm.<llvm>.f32/f64` of every backend, if any
    c_name: str = ""  # the C library's and libdevice's name (`tgamma` for `gamma`); "" is `name`
    types: tuple[str, ...] = FLOAT_TYPES  # the float types it computes in
    python: bool = True  # also a function of Python's `math` (anodize's own: only `az.math.<name>`)
    ulp: tuple[int, int] = (0, 0)  # CUDA's maximum error (f32, f64) in ulps over the full range, which the backends keep

    @property
    def libm(self) -> str:
        """The host C library's function (`expf` / `exp` add the type's suffix to it)."""
        return self.c_name or self.name

    @property
    def libdevice(self) -> str:
        """libdevice's function: `__nv_<libdevice>f` (f32) / `__nv_<libdevice>` (f64)."""
        return self.c_name or self.name


MATH: dict[str, MathFunc] = {}  # filled by `declare`, one row per function of math_fns.py, in its order

_F = TypeVar("_F", bound=Callable[..., Any])


def declare(*, predicate: bool = False, int_exponent: bool = False, llvm: str | None = None, c_name: str = "",
            types: tuple[str, ...] = FLOAT_TYPES, python: bool = True, ulp: tuple[int, int] = (0, 0)) -> Callable[[_F], _F]:
    """Record the decorated stub of math_fns.py as a row of MATH (its name and, from its
    signature, its arity) and return it unchanged."""

    def record(fn: _F) -> _F:
        name = fn.__name__
        MATH[name] = MathFunc(name, fn.__code__.co_argcount, predicate, int_exponent, llvm, c_name, types, python, ulp)
        return fn

    return record


# the rows: importing the stubs runs their `declare`s (after the names above exist)
from anodize.language import math_fns as _stubs  # noqa: E402,F401
