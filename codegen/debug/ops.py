"""Scalar semantics of the typed IR for the debug device's interpreter (codegen/debug/interp.py).

Every value is a Python object: an int already wrapped to its type's range (signed
types in [-2**(b-1), 2**(b-1)), unsigned in [0, 2**b)), a float (an f32 value is a
double exactly representable in f32: every f32 operation is computed in double and
rounded once, which is exact for + - * / and sqrt), a bool, or a witness (an int for
Index1D, a (row, col) tuple for Index2D).  Each operation follows `codegen/llvm/lower.py`
exactly: wrapping integer arithmetic, Python's floor `//` and `%` (a zero divisor
faults and gives 0), shifts by at least the width give 0 (or the sign for `>>` of a
signed value), saturating float-to-int casts with NaN -> 0, and the host C library for
the math functions the CPU backend takes from it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct
import threading
from fractions import Fraction
from typing import Any

from anodize.language.math_table import MATH
from anodize.language.halfbits import FORMATS, bits_to_float, round_bits, round_half
from anodize.language.types import F32 as _F32, I64 as _I64, ScalarTy, Ty, WitnessTy

_LOCAL = threading.local()


def f32(x: float) -> float:
    """Round a double to the nearest f32 (ties to even; overflow to inf), as a double."""
    mv = getattr(_LOCAL, "mv", None)
    if mv is None:
        mv = _LOCAL.mv = memoryview(bytearray(4)).cast("f")
    mv[0] = x
    return mv[0]  # type: ignore[no-any-return]


def wrap(v: int, ty: ScalarTy) -> int:
    bits = ty.bits
    v &= (1 << bits) - 1
    if ty.signed and v >> (bits - 1):
        v -= 1 << bits
    return v


def round_float(x: float, ty: ScalarTy) -> float:
    """`x` rounded once to the float type `ty` (f16, bf16 and the f8 types as the GPU rounds
    them: to nearest even from the exact result, `anodize.language.halfbits`)."""
    if ty.bits == 32:
        return f32(x)
    if ty.is_half:
        return round_half(x, ty.name)
    return x


_PRECISION = {64: 53, 32: 24}  # significand bits; the halves' from halfbits.FORMATS


def int_to_float(v: int, ty: ScalarTy) -> float:
    """sitofp / uitofp: one rounding of the exact integer to the float type."""
    p = _PRECISION.get(ty.bits) or FORMATS[ty.name][1] + 1
    if abs(v) <= 1 << p:
        return round_float(float(v), ty)  # exact in f64, then the one rounding
    if ty.bits == 64:
        return float(v)  # (Python rounds an int to nearest even itself)
    mag = abs(v)
    shift = mag.bit_length() - p
    q, r = divmod(mag, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    out = round_float(float(q << shift), ty)  # (exact: p bits; an overflow of a half to inf)
    return -out if v < 0 else out


def zero(ty: Ty) -> Any:
    if isinstance(ty, WitnessTy):
        return 0 if ty.rank == 1 else (0, 0)
    assert isinstance(ty, ScalarTy)
    if ty.is_bool:
        return False
    return 0.0 if ty.is_float else 0


def const(value: Any, ty: ScalarTy) -> Any:
    if ty.is_bool:
        return bool(value)
    if ty.is_float:
        return round_float(float(value), ty)
    return wrap(int(value), ty)


def conv(v: Any, src: Ty, dst: Ty) -> Any:
    """`Lowerer.conv`: bool tests, int wrap, int<->float, float widths, saturating float->int."""
    if src is dst or src == dst:
        return v
    if isinstance(src, WitnessTy):
        return conv(v, _I64, dst)
    assert isinstance(src, ScalarTy) and isinstance(dst, ScalarTy), (src, dst)
    if dst.is_bool:
        return v != 0  # a NaN is true (unordered !=)
    if src.is_bool:
        return (1.0 if v else 0.0) if dst.is_float else (1 if v else 0)
    if src.is_int and dst.is_int:
        return wrap(v, dst)
    if src.is_int:
        return int_to_float(v, dst)
    if dst.is_float:
        return round_float(v, dst)
    if v != v:
        return 0
    lo, hi = (-(1 << (dst.bits - 1)), (1 << (dst.bits - 1)) - 1) if dst.signed else (0, (1 << dst.bits) - 1)
    if v == math.inf:
        return hi
    if v == -math.inf:
        return lo
    return min(max(math.trunc(v), lo), hi)




def bitcast(v: Any, src: ScalarTy, dst: ScalarTy) -> Any:
    """`Lowerer.e_Bitcast`: the bits of `v` (of `src`) read as `dst`, a type of one size."""
    bits = src.bits
    if src.is_float:
        if src.is_half:
            raw = round_bits(v, src.name)
        else:
            raw = int.from_bytes(struct.pack("<f" if bits == 32 else "<d", v), "little")
    else:
        raw = v & ((1 << bits) - 1)
    if not dst.is_float:
        return wrap(raw, dst)
    if dst.is_half:
        return bits_to_float(raw, dst.name)
    return struct.unpack("<f" if bits == 32 else "<d", raw.to_bytes(bits // 8, "little"))[0]


def fdiv(a: float, c: float) -> float:
    try:
        return a / c
    except ZeroDivisionError:
        if a != a or a == 0:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, c)


def frem(a: float, c: float) -> float:
    """LLVM `frem` (C fmod): NaN for a zero divisor or an infinite dividend."""
    if a != a or c != c or c == 0 or math.isinf(a):
        return math.nan
    if math.isinf(c):
        return a
    return math.fmod(a, c)


def float_divmod(op: str, a: float, c: float, ty: ScalarTy) -> float:
    """`Lowerer.float_divmod` step by step (each operation rounded to `ty`)."""
    r = lambda x: round_float(x, ty)  # noqa: E731
    mod = r(frem(a, c))
    nz = mod == mod and mod != 0
    fix = nz and ((c < 0) != (mod < 0))
    mod2 = r(mod + c) if fix else mod
    if op == "%":
        return mod2 if nz else math.copysign(0.0, c)
    div = r(fdiv(r(a - mod), c))
    if fix:
        div = r(div - 1.0)
    fl = math.floor(div) if math.isfinite(div) else div
    fl = float(fl)
    if math.isfinite(div) and r(div - fl) > 0.5:
        fl = r(fl + 1.0)
    plain = r(fdiv(a, c))
    res = fl if div != 0 else math.copysign(0.0, plain)  # (div NaN: `!=` ordered is false)
    if div != div:
        res = math.copysign(0.0, plain)
    return plain if c == 0 else res


def minnum(a: float, c: float, op: str) -> float:
    if a != a:
        return c
    if c != c:
        return a
    return min(a, c) if op == "min" else max(a, c)


def binop(op: str, a: Any, c: Any, ty: ScalarTy) -> Any:
    """Every BinOp but integer `//` and `%` (those fault on a zero divisor: the caller's)."""
    if ty.is_bool:
        return {"&": a and c, "|": a or c, "^": a != c}[op]
    if ty.is_float:
        if op == "+":
            v = a + c
        elif op == "-":
            v = a - c
        elif op == "*":
            v = a * c
        elif op == "/":
            v = fdiv(a, c)
        elif op in ("min", "max"):
            return minnum(a, c, op)
        else:
            return float_divmod(op, a, c, ty)
        return round_float(v, ty)
    if op == "+":
        return wrap(a + c, ty)
    if op == "-":
        return wrap(a - c, ty)
    if op == "*":
        return wrap(a * c, ty)
    if op == "&":
        return wrap(a & c, ty)
    if op == "|":
        return wrap(a | c, ty)
    if op == "^":
        return wrap(a ^ c, ty)
    if op == "min":
        return min(a, c)
    if op == "max":
        return max(a, c)
    bits = ty.bits
    big = not 0 <= c < bits  # the shift amount read unsigned
    if op == "<<":
        return 0 if big else wrap(a << c, ty)
    if op == ">>":
        if ty.signed:
            return a >> (bits - 1 if big else c)
        return 0 if big else a >> c
    raise AssertionError(op)


def int_divmod(op: str, n: int, d: int, ty: ScalarTy) -> int:
    """Python's floor `//` and `%` on the wrapped values (`n // -1` wraps); d != 0."""
    return wrap(n // d, ty) if op == "//" else wrap(n % d, ty)


def unary(op: str, v: Any, ty: ScalarTy) -> Any:
    if op == "not":
        return not v
    if op == "~":
        return wrap(~v, ty)
    if op == "-":
        return -v if ty.is_float else wrap(-v, ty)
    if op == "abs":
        if ty.is_float:
            return math.fabs(v)
        return wrap(-v, ty) if v < 0 else v
    raise AssertionError(op)


def compare(op: str, a: Any, c: Any) -> bool:
    if op == "<":
        return bool(a < c)
    if op == "<=":
        return bool(a <= c)
    if op == ">":
        return bool(a > c)
    if op == ">=":
        return bool(a >= c)
    if op == "==":
        return bool(a == c)
    return bool(a != c)  # NaN != x is true (unordered), as lowered


# ---- math ----------------------------------------------------------------------------------

_LIBM = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
_FN: dict[tuple[str, int], Any] = {}


def _libm(name: str, bits: int, nargs: int, int_last: bool = False) -> Any:
    key = (name, bits)
    f = _FN.get(key)
    if f is None:
        ct = ctypes.c_float if bits == 32 else ctypes.c_double
        f = getattr(_LIBM, MATH[name].libm + ("f" if bits == 32 else ""))
        f.restype = ct
        f.argtypes = [ct] * (nargs - 1) + [ctypes.c_int if int_last else ct]
        _FN[key] = f
    return f


def _fma(a: float, b: float, c: float, ty: ScalarTy) -> float:
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return round_float(a * b + c, ty)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return round_float(a * b + c, ty)  # the sign of a zero sum
    return round_float(float(exact), ty)


def math_call(name: str, args: list[Any], ty: ScalarTy, arg_types: list[ScalarTy]) -> Any:
    """`Lowerer.e_MathCall` with the CPU backend's `CPUTarget.math` (a half's: f32's, rounded)."""
    if ty.is_half:
        v = math_call(name, args, _F32, [_F32 if t.is_half else t for t in arg_types])
        return round_float(v, ty) if isinstance(v, float) else v
    x = args[0]
    r = lambda v: round_float(v, ty)  # noqa: E731
    if name == "isnan":
        return x != x
    if name == "isinf":
        return math.isinf(x)
    if name == "isfinite":
        return math.isfinite(x)
    if name == "sqrt":
        return r(math.sqrt(x)) if x >= 0 else (x if x != x else math.nan)
    if name == "fabs":
        return math.fabs(x)
    if name in ("floor", "ceil", "trunc"):
        if not math.isfinite(x):
            return x
        v = float(getattr(math, name)(x))
        return math.copysign(v, x) if v == 0 else v
    if name == "copysign":
        return math.copysign(x, args[1])
    if name == "fma":
        return _fma(x, args[1], args[2], ty)
    if name in ("fmin", "fmax"):
        return minnum(x, args[1], name[1:])
    if name == "rsqrt":
        if x > 0 and math.isfinite(x):
            return r(1.0 / math.sqrt(x))  # (the CPU backend refines f64 by a Newton step: <= 1 ulp apart)
        return r(fdiv(1.0, math.sqrt(x) if x >= 0 else math.nan))
    if name == "gamma" and ty.bits == 32:
        return r(_libm("gamma", 64, 1)(x))
    if name == "lgamma":
        ct = ctypes.c_float if ty.bits == 32 else ctypes.c_double
        f = getattr(_LIBM, "lgammaf_r" if ty.bits == 32 else "lgamma_r")
        f.restype = ct
        f.argtypes = [ct, ctypes.POINTER(ctypes.c_int)]
        return float(f(x, ctypes.byref(ctypes.c_int())))
    if name == "ldexp":
        n = max(-4096, min(4096, args[1]))
        return float(_libm("ldexp", ty.bits, 2, int_last=True)(x, n))
    return float(_libm(name, ty.bits, len(args))(*args))
