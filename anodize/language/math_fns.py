"""The kernel math functions, declared once each: the stub users and mypy see (re-exported as
`anodize.math`), with the row of language/math_table.py its decorator records -- what every
front end and backend reads (arity from the signature, the LLVM intrinsic, the C library's
and libdevice's name, the float types, CUDA's ulp bounds).

Adding a function is its `def` here (with its `@declare(...)` row, its docstring and its name
in `__all__`) and its reference in tests/codegen/math_cases.py (what the ulp harness compares
with).  Outside a kernel these functions raise TypeError.
"""

from __future__ import annotations

from typing import NoReturn, TypeVar

from anodize.language.math_table import declare as _declare

T = TypeVar("T", bound=float)

__all__ = [
    "sqrt", "rsqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh",
    "erf", "erfc", "gamma", "lgamma", "pow", "hypot", "copysign", "fmod", "remainder", "nextafter",
    "fabs", "floor", "ceil", "trunc", "fma", "fmin", "fmax", "ldexp", "isnan", "isinf", "isfinite",
]  # fmt: skip


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`math.{name}` can only be called inside an anodize kernel")


# -- roots, exponentials, logarithms ---------------------------------------------------------
@_declare(llvm="sqrt", ulp=(0, 0))
def sqrt(x: T) -> T:
    """Square root, correctly rounded (`llvm.sqrt`, PTX `sqrt.rn`)."""
    _device_only("sqrt")


@_declare(python=False, ulp=(2, 1))
def rsqrt(x: T) -> T:
    """1 / sqrt(x) (`__nv_rsqrtf`; the CPU backend computes `1 / sqrt(x)`)."""
    _device_only("rsqrt")


@_declare(ulp=(1, 1))
def cbrt(x: T) -> T:
    """Cube root, real for negative x (`__nv_cbrtf`)."""
    _device_only("cbrt")


@_declare(ulp=(2, 1))
def exp(x: T) -> T:
    """e**x (`__nv_expf`)."""
    _device_only("exp")


@_declare(ulp=(2, 1))
def exp2(x: T) -> T:
    """2**x (`__nv_exp2f`)."""
    _device_only("exp2")


@_declare(ulp=(1, 1))
def expm1(x: T) -> T:
    """e**x - 1, accurate near 0 (`__nv_expm1f`)."""
    _device_only("expm1")


@_declare(ulp=(1, 1))
def log(x: T) -> T:
    """Natural logarithm; one argument only (`__nv_logf`).  NaN below 0, -inf at 0."""
    _device_only("log")


@_declare(ulp=(1, 1))
def log2(x: T) -> T:
    """Base-2 logarithm (`__nv_log2f`)."""
    _device_only("log2")


@_declare(ulp=(2, 1))
def log10(x: T) -> T:
    """Base-10 logarithm (`__nv_log10f`)."""
    _device_only("log10")


@_declare(ulp=(1, 1))
def log1p(x: T) -> T:
    """log(1 + x), accurate near 0 (`__nv_log1pf`)."""
    _device_only("log1p")


@_declare(ulp=(4, 2))
def pow(x: T, y: T | float) -> T:  # noqa: A001 - the language's name
    """x**y (`__nv_powf`); C's rules for negative bases and zeros."""
    _device_only("pow")


# -- trigonometric and hyperbolic --------------------------------------------------------------
@_declare(ulp=(2, 2))
def sin(x: T) -> T:
    """Sine of x radians (`__nv_sinf`)."""
    _device_only("sin")


@_declare(ulp=(2, 2))
def cos(x: T) -> T:
    """Cosine of x radians (`__nv_cosf`)."""
    _device_only("cos")


@_declare(ulp=(4, 2))
def tan(x: T) -> T:
    """Tangent of x radians (`__nv_tanf`)."""
    _device_only("tan")


@_declare(ulp=(2, 2))
def asin(x: T) -> T:
    """Arc sine in [-pi/2, pi/2]; NaN outside [-1, 1] (`__nv_asinf`)."""
    _device_only("asin")


@_declare(ulp=(2, 2))
def acos(x: T) -> T:
    """Arc cosine in [0, pi]; NaN outside [-1, 1] (`__nv_acosf`)."""
    _device_only("acos")


@_declare(ulp=(2, 2))
def atan(x: T) -> T:
    """Arc tangent in [-pi/2, pi/2] (`__nv_atanf`)."""
    _device_only("atan")


@_declare(ulp=(3, 2))
def atan2(y: T, x: T | float) -> T:
    """Arc tangent of y / x in [-pi, pi], quadrant from the signs (`__nv_atan2f`)."""
    _device_only("atan2")


@_declare(ulp=(3, 2))
def sinh(x: T) -> T:
    """Hyperbolic sine (`__nv_sinhf`)."""
    _device_only("sinh")


@_declare(ulp=(2, 1))
def cosh(x: T) -> T:
    """Hyperbolic cosine (`__nv_coshf`)."""
    _device_only("cosh")


@_declare(ulp=(2, 2))
def tanh(x: T) -> T:
    """Hyperbolic tangent (`__nv_tanhf`)."""
    _device_only("tanh")


@_declare(ulp=(3, 3))
def asinh(x: T) -> T:
    """Inverse hyperbolic sine (`__nv_asinhf`)."""
    _device_only("asinh")


@_declare(ulp=(4, 3))
def acosh(x: T) -> T:
    """Inverse hyperbolic cosine; NaN below 1 (`__nv_acoshf`)."""
    _device_only("acosh")


@_declare(ulp=(3, 2))
def atanh(x: T) -> T:
    """Inverse hyperbolic tangent; +-inf at +-1, NaN outside [-1, 1] (`__nv_atanhf`)."""
    _device_only("atanh")


# -- special functions -----------------------------------------------------------------------
@_declare(ulp=(2, 2))
def erf(x: T) -> T:
    """Error function (`__nv_erff`)."""
    _device_only("erf")


@_declare(ulp=(4, 5))
def erfc(x: T) -> T:
    """Complementary error function 1 - erf(x), accurate for large x (`__nv_erfcf`)."""
    _device_only("erfc")


@_declare(c_name="tgamma", ulp=(5, 10))
def gamma(x: T) -> T:
    """The gamma function (C's `tgamma`, `__nv_tgammaf`); NaN at negative integers."""
    _device_only("gamma")


@_declare(ulp=(6, 4))
def lgamma(x: T) -> T:
    """`log(abs(gamma(x)))` (`__nv_lgammaf`); +inf at the poles."""
    _device_only("lgamma")


# -- rounding, sign, remainders, neighbours ---------------------------------------------------
@_declare(llvm="fabs", ulp=(0, 0))
def fabs(x: T) -> T:
    """`abs(x)` (`llvm.fabs`)."""
    _device_only("fabs")


@_declare(llvm="floor", ulp=(0, 0))
def floor(x: T) -> T:
    """Largest integral value <= x, as a float (`llvm.floor`)."""
    _device_only("floor")


@_declare(llvm="ceil", ulp=(0, 0))
def ceil(x: T) -> T:
    """Smallest integral value >= x, as a float (`llvm.ceil`)."""
    _device_only("ceil")


@_declare(llvm="trunc", ulp=(0, 0))
def trunc(x: T) -> T:
    """x rounded toward zero, as a float (`llvm.trunc`)."""
    _device_only("trunc")


@_declare(llvm="copysign", ulp=(0, 0))
def copysign(x: T, y: T | float) -> T:
    """`abs(x)` with the sign of `y` (`llvm.copysign`)."""
    _device_only("copysign")


@_declare(ulp=(0, 0))
def fmod(x: T, y: T | float) -> T:
    """x - n*y with n = trunc(x / y), exact; the sign of x (`__nv_fmodf`)."""
    _device_only("fmod")


@_declare(ulp=(0, 0))
def remainder(x: T, y: T | float) -> T:
    """IEEE remainder x - n*y with n = x / y rounded to nearest even, exact (`__nv_remainderf`)."""
    _device_only("remainder")


@_declare(ulp=(0, 0))
def nextafter(x: T, y: T | float) -> T:
    """The next float after x toward y (`__nv_nextafterf`)."""
    _device_only("nextafter")


@_declare(int_exponent=True, ulp=(0, 0))
def ldexp(x: T, n: int) -> T:
    """x * 2**n, exact unless it overflows or underflows (`__nv_ldexpf`); n is any integer."""
    _device_only("ldexp")


@_declare(ulp=(3, 2))
def hypot(x: T, y: T | float) -> T:
    """sqrt(x*x + y*y) without undue overflow; two arguments (`__nv_hypotf`)."""
    _device_only("hypot")


@_declare(llvm="fma", ulp=(0, 0))
def fma(x: T, y: T | float, z: T | float) -> T:
    """x*y + z with one rounding (`llvm.fma`)."""
    _device_only("fma")


@_declare(llvm="minnum", python=False, ulp=(0, 0))
def fmin(x: T, y: T | float) -> T:
    """The smaller of x and y; a NaN operand is ignored (`llvm.minnum`)."""
    _device_only("fmin")


@_declare(llvm="maxnum", python=False, ulp=(0, 0))
def fmax(x: T, y: T | float) -> T:
    """The larger of x and y; a NaN operand is ignored (`llvm.maxnum`)."""
    _device_only("fmax")


# -- classification (a `bool_` result) ------------------------------------------------------------
@_declare(predicate=True, ulp=(0, 0))
def isnan(x: float) -> bool:
    """Is x a NaN? (an `fcmp uno`)."""
    _device_only("isnan")


@_declare(predicate=True, ulp=(0, 0))
def isinf(x: float) -> bool:
    """Is x +inf or -inf?"""
    _device_only("isinf")


@_declare(predicate=True, ulp=(0, 0))
def isfinite(x: float) -> bool:
    """Is x neither an infinity nor a NaN?"""
    _device_only("isfinite")
