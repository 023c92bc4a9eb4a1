"""Device math: each function maps to libdevice or an LLVM intrinsic.

`math.f` (Python's module) and `az.math.f` (this one) are the same functions in a
kernel.  f32 arguments stay f32 (`__nv_expf`, not `__nv_exp`); integer arguments and
lone literals use f64.  The functions are every one of Python's `math` module that
has a libdevice (`__nv_*f` / `__nv_*`) or LLVM counterpart, plus `rsqrt`, `fma`,
`fmin` and `fmax`.  Unlike Python's, `floor`/`ceil`/`trunc` return the float type and
domain errors give NaN or an infinity (as in C), never an exception.  The error
bounds (ulp) each function keeps are in docs/language.md.

Outside a kernel these functions raise TypeError.
"""

from __future__ import annotations

from typing import NoReturn, TypeVar

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
def sqrt(x: T) -> T:
    """Square root, correctly rounded (`llvm.sqrt`, PTX `sqrt.rn`)."""
    _device_only("sqrt")


def rsqrt(x: T) -> T:
    """1 / sqrt(x) (`__nv_rsqrtf`; the CPU backend computes `1 / sqrt(x)`)."""
    _device_only("rsqrt")


def cbrt(x: T) -> T:
    """Cube root, real for negative x (`__nv_cbrtf`)."""
    _device_only("cbrt")


def exp(x: T) -> T:
    """e**x (`__nv_expf`)."""
    _device_only("exp")


def exp2(x: T) -> T:
    """2**x (`__nv_exp2f`)."""
    _device_only("exp2")


def expm1(x: T) -> T:
    """e**x - 1, accurate near 0 (`__nv_expm1f`)."""
    _device_only("expm1")


def log(x: T) -> T:
    """Natural logarithm; one argument only (`__nv_logf`).  NaN below 0, -inf at 0."""
    _device_only("log")


def log2(x: T) -> T:
    """Base-2 logarithm (`__nv_log2f`)."""
    _device_only("log2")


def log10(x: T) -> T:
    """Base-10 logarithm (`__nv_log10f`)."""
    _device_only("log10")


def log1p(x: T) -> T:
    """log(1 + x), accurate near 0 (`__nv_log1pf`)."""
    _device_only("log1p")


def pow(x: T, y: T | float) -> T:  # noqa: A001 - the language's name
    """x**y (`__nv_powf`); C's rules for negative bases and zeros."""
    _device_only("pow")


# -- trigonometric and hyperbolic --------------------------------------------------------------
def sin(x: T) -> T:
    """Sine of x radians (`__nv_sinf`)."""
    _device_only("sin")


def cos(x: T) -> T:
    """Cosine of x radians (`__nv_cosf`)."""
    _device_only("cos")


def tan(x: T) -> T:
    """Tangent of x radians (`__nv_tanf`)."""
    _device_only("tan")


def asin(x: T) -> T:
    """Arc sine in [-pi/2, pi/2]; NaN outside [-1, 1] (`__nv_asinf`)."""
    _device_only("asin")


def acos(x: T) -> T:
    """Arc cosine in [0, pi]; NaN outside [-1, 1] (`__nv_acosf`)."""
    _device_only("acos")


def atan(x: T) -> T:
    """Arc tangent in [-pi/2, pi/2] (`__nv_atanf`)."""
    _device_only("atan")


def atan2(y: T, x: T | float) -> T:
    """Arc tangent of y / x in [-pi, pi], quadrant from the signs (`__nv_atan2f`)."""
    _device_only("atan2")


def sinh(x: T) -> T:
    """Hyperbolic sine (`__nv_sinhf`)."""
    _device_only("sinh")


def cosh(x: T) -> T:
    """Hyperbolic cosine (`__nv_coshf`)."""
    _device_only("cosh")


def tanh(x: T) -> T:
    """Hyperbolic tangent (`__nv_tanhf`)."""
    _device_only("tanh")


def asinh(x: T) -> T:
    """Inverse hyperbolic sine (`__nv_asinhf`)."""
    _device_only("asinh")


def acosh(x: T) -> T:
    """Inverse hyperbolic cosine; NaN below 1 (`__nv_acoshf`)."""
    _device_only("acosh")


def atanh(x: T) -> T:
    """Inverse hyperbolic tangent; +-inf at +-1, NaN outside [-1, 1] (`__nv_atanhf`)."""
    _device_only("atanh")


# -- special functions -----------------------------------------------------------------------
def erf(x: T) -> T:
    """Error function (`__nv_erff`)."""
    _device_only("erf")


def erfc(x: T) -> T:
    """Complementary error function 1 - erf(x), accurate for large x (`__nv_erfcf`)."""
    _device_only("erfc")


def gamma(x: T) -> T:
    """The gamma function (C's `tgamma`, `__nv_tgammaf`); NaN at negative integers."""
    _device_only("gamma")


def lgamma(x: T) -> T:
    """`log(abs(gamma(x)))` (`__nv_lgammaf`); +inf at the poles."""
    _device_only("lgamma")


# -- rounding, sign, remainders, neighbours ---------------------------------------------------
def fabs(x: T) -> T:
    """`abs(x)` (`llvm.fabs`)."""
    _device_only("fabs")


def floor(x: T) -> T:
    """Largest integral value <= x, as a float (`llvm.floor`)."""
    _device_only("floor")


def ceil(x: T) -> T:
    """Smallest integral value >= x, as a float (`llvm.ceil`)."""
    _device_only("ceil")


def trunc(x: T) -> T:
    """x rounded toward zero, as a float (`llvm.trunc`)."""
    _device_only("trunc")


def copysign(x: T, y: T | float) -> T:
    """`abs(x)` with the sign of `y` (`llvm.copysign`)."""
    _device_only("copysign")


def fmod(x: T, y: T | float) -> T:
    """x - n*y with n = trunc(x / y), exact; the sign of x (`__nv_fmodf`)."""
    _device_only("fmod")


def remainder(x: T, y: T | float) -> T:
    """IEEE remainder x - n*y with n = x / y rounded to nearest even, exact (`__nv_remainderf`)."""
    _device_only("remainder")


def nextafter(x: T, y: T | float) -> T:
    """The next float after x toward y (`__nv_nextafterf`)."""
    _device_only("nextafter")


def ldexp(x: T, n: int) -> T:
    """x * 2**n, exact unless it overflows or underflows (`__nv_ldexpf`); n is any integer."""
    _device_only("ldexp")


def hypot(x: T, y: T | float) -> T:
    """sqrt(x*x + y*y) without undue overflow; two arguments (`__nv_hypotf`)."""
    _device_only("hypot")


def fma(x: T, y: T | float, z: T | float) -> T:
    """x*y + z with one rounding (`llvm.fma`)."""
    _device_only("fma")


def fmin(x: T, y: T | float) -> T:
    """The smaller of x and y; a NaN operand is ignored (`llvm.minnum`)."""
    _device_only("fmin")


def fmax(x: T, y: T | float) -> T:
    """The larger of x and y; a NaN operand is ignored (`llvm.maxnum`)."""
    _device_only("fmax")


# -- classification (a `bool_` result) ------------------------------------------------------------
def isnan(x: float) -> bool:
    """Is x a NaN? (an `fcmp uno`)."""
    _device_only("isnan")


def isinf(x: float) -> bool:
    """Is x +inf or -inf?"""
    _device_only("isinf")


def isfinite(x: float) -> bool:
    """Is x neither an infinity nor a NaN?"""
    _device_only("isfinite")
