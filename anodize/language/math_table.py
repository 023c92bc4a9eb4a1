"""The kernel math functions, one row each: the one table the typer (through vocab's
`MATH_FUNCS`, `MATH_PREDICATES`, `MATH_INT_EXPONENT`), the stubs (anodize/math.py, checked
against it by tests/language/test_math_table.py) and every backend read.

Callable as `math.f` (Python's module) or `az.math.f`: every function of Python's `math`
module with a libdevice (`__nv_*f` / `__nv_*`) or LLVM counterpart, plus `rsqrt`, `fmin`,
`fmax` and `fma` (anodize's own).  f32 arguments stay f32; an f16/bf16 one is computed in f32
and rounded once.  `floor`/`ceil`/`trunc` return the float type, not a Python int.

Adding a function: its row here, and its ulp bound in tests/codegen/math_cases.py."""

from __future__ import annotations

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

    @property
    def libm(self) -> str:
        """The host C library's function (`expf` / `exp` add the type's suffix to it)."""
        return self.c_name or self.name

    @property
    def libdevice(self) -> str:
        """libdevice's function: `__nv_<libdevice>f` (f32) / `__nv_<libdevice>` (f64)."""
        return self.c_name or self.name


def _rows(*rows: MathFunc) -> dict[str, MathFunc]:
    return {r.name: r for r in rows}


MATH: dict[str, MathFunc] = _rows(
    # one float argument, one float result
    MathFunc("sqrt", 1, llvm="sqrt"),
    MathFunc("rsqrt", 1, python=False),
    MathFunc("cbrt", 1),
    MathFunc("exp", 1),
    MathFunc("exp2", 1),
    MathFunc("expm1", 1),
    MathFunc("log", 1),
    MathFunc("log2", 1),
    MathFunc("log10", 1),
    MathFunc("log1p", 1),
    MathFunc("sin", 1),
    MathFunc("cos", 1),
    MathFunc("tan", 1),
    MathFunc("asin", 1),
    MathFunc("acos", 1),
    MathFunc("atan", 1),
    MathFunc("sinh", 1),
    MathFunc("cosh", 1),
    MathFunc("tanh", 1),
    MathFunc("asinh", 1),
    MathFunc("acosh", 1),
    MathFunc("atanh", 1),
    MathFunc("erf", 1),
    MathFunc("erfc", 1),
    MathFunc("gamma", 1, c_name="tgamma"),
    MathFunc("lgamma", 1),
    MathFunc("fabs", 1, llvm="fabs"),
    MathFunc("floor", 1, llvm="floor"),
    MathFunc("ceil", 1, llvm="ceil"),
    MathFunc("trunc", 1, llvm="trunc"),
    # two float arguments
    MathFunc("pow", 2),
    MathFunc("atan2", 2),
    MathFunc("hypot", 2),
    MathFunc("copysign", 2, llvm="copysign"),
    MathFunc("fmod", 2),
    MathFunc("remainder", 2),
    MathFunc("nextafter", 2),
    MathFunc("fmin", 2, llvm="minnum", python=False),
    MathFunc("fmax", 2, llvm="maxnum", python=False),
    MathFunc("fma", 3, llvm="fma"),
    # a float and an integer exponent: ldexp(x, n) = x * 2**n
    MathFunc("ldexp", 2, int_exponent=True),
    # a float argument, a `bool_` result
    MathFunc("isnan", 1, predicate=True),
    MathFunc("isinf", 1, predicate=True),
    MathFunc("isfinite", 1, predicate=True),
)
