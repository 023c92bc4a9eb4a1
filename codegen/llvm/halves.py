"""The narrow float types (f16, bf16, f8e4m3, f8e5m2) in LLVM IR: bit patterns in integer
registers (i16, i8), f32 arithmetic.

A half value lives in an `i16` register and in 16 bits of memory.  Arithmetic widens
both operands to f32 (exact), computes there and rounds the result back to nearest
even, once per operation.  For `+ - * /`, `sqrt` and the comparisons this gives the
correctly rounded half result (f32 has more than twice a half's precision), which is
what NumPy's float16 does; other math functions are f32's, rounded.

The conversions here are integer bit manipulation in plain IR, valid on every target:
no `bfloat` LLVM type (llvmlite has none), no compiler-rt libcalls (`__truncsfhf2`,
`__truncsfbf2`) for the CPU JIT to resolve, no dependence on the host's F16C.  The GPU
target converts f16 with `cvt` instead (`Target.native_f16_convert`; same results).  `anodize.language.halfbits.round_bits` is their Python twin (constants, the host
side), tested against NumPy's float16 and ml_dtypes' bfloat16, float8_e4m3fn and float8_e5m2.
The 8-bit types saturate to their largest finite value (the GPU's `cvt.rn.satfinite`, which
the GPU target emits from f32 on sm_90 and later: `Lowerer.half_from`).  f8 operands of
arithmetic are f16 values first (language/types.py `promote`), so `negate`/`absolute` and the
binary operations here only ever see 16-bit patterns; the helpers take any width all the same.
"""

from __future__ import annotations

import llvmlite.ir as llir

from anodize.language.halfbits import F8_MAX_BITS, F8_NAN_BITS, FORMATS, bits_to_float, round_bits, width

I8 = llir.IntType(8)
I16 = llir.IntType(16)
I32 = llir.IntType(32)
FLOAT = llir.FloatType()
DOUBLE = llir.DoubleType()

def _c(t: llir.Type, v: int) -> llir.Constant:
    return llir.Constant(t, v)


def round_to_half(b: llir.IRBuilder, x: llir.Value, fmt: str) -> llir.Value:
    """An f32 or f64 value rounded to nearest even in `fmt` (a key of `FORMATS` but f32/f64):
    its i16 (i8) pattern."""
    w = 32 if x.type == FLOAT else 64
    it = llir.IntType(w)
    se, sm = FORMATS["f32" if w == 32 else "f64"]
    de, dm = FORMATS[fmt]
    sb, db = (1 << (se - 1)) - 1, (1 << (de - 1)) - 1
    lim = sb + 1 - db
    inf = ((1 << de) - 1) << dm
    ot = llir.IntType(width(fmt))
    top = _c(it, F8_MAX_BITS.get(fmt, inf))  # the largest pattern: infinity, or the f8's largest finite value
    bits = b.bitcast(x, it)
    sign = b.shl(b.trunc(b.lshr(bits, _c(it, w - 1)), ot), _c(ot, de + dm))
    absb = b.and_(bits, _c(it, (1 << (w - 1)) - 1))
    isnan = b.icmp_unsigned(">", absb, _c(it, ((1 << se) - 1) << sm))
    expf = b.lshr(absb, _c(it, sm))
    man = b.and_(absb, _c(it, (1 << sm) - 1))
    norm = b.icmp_unsigned("!=", expf, _c(it, 0))
    full = b.select(norm, b.or_(man, _c(it, 1 << sm)), man)
    e = b.select(norm, expf, _c(it, 1))
    sub = b.icmp_unsigned("<", e, _c(it, lim))
    shift = b.add(_c(it, sm - dm), b.select(sub, b.sub(_c(it, lim), e), _c(it, 0)))
    shift = b.select(b.icmp_unsigned(">", shift, _c(it, w - 1)), _c(it, w - 1), shift)
    q = b.lshr(full, shift)
    rem = b.and_(full, b.sub(b.shl(_c(it, 1), shift), _c(it, 1)))
    half = b.shl(_c(it, 1), b.sub(shift, _c(it, 1)))
    tie = b.and_(b.icmp_unsigned("==", rem, half), b.trunc(q, llir.IntType(1)))
    up = b.or_(b.icmp_unsigned(">", rem, half), tie)
    r = b.add(q, b.zext(up, it))
    out = b.add(b.shl(b.select(sub, _c(it, 0), b.sub(e, _c(it, lim))), _c(it, dm)), r)
    out = b.select(b.icmp_unsigned(">", out, top), top, out)
    out = b.select(isnan, _c(it, F8_NAN_BITS.get(fmt, inf | (1 << (dm - 1)))), out)
    return b.or_(b.trunc(out, ot), sign)


def widen_half(b: llir.IRBuilder, h: llir.Value, fmt: str) -> llir.Value:
    """The i16 (i8) pattern `h` of `fmt` as the f32 of the same value (exact)."""
    if fmt == "f8e5m2":  # the upper byte of an f16
        return widen_half(b, b.shl(b.zext(h, I16), _c(I16, 8)), "f16")
    if fmt == "f8e4m3":
        return widen_e4m3(b, h)
    if fmt == "bf16":
        return b.bitcast(b.shl(b.zext(h, I32), _c(I32, 16)), FLOAT)
    x = b.zext(h, I32)
    sign = b.shl(b.and_(x, _c(I32, 0x8000)), _c(I32, 16))
    e = b.and_(b.lshr(x, _c(I32, 10)), _c(I32, 0x1F))
    m = b.and_(x, _c(I32, 0x3FF))
    normal = b.or_(b.shl(b.add(e, _c(I32, 112)), _c(I32, 23)), b.shl(m, _c(I32, 13)))
    special = b.or_(_c(I32, 0x7F800000), b.shl(m, _c(I32, 13)))  # inf, NaN
    tiny = b.bitcast(b.fmul(b.uitofp(m, FLOAT), llir.Constant(FLOAT, 2.0**-24)), I32)  # subnormal, 0
    mag = b.select(b.icmp_unsigned("==", e, _c(I32, 0)), tiny, b.select(b.icmp_unsigned("==", e, _c(I32, 31)), special, normal))
    return b.bitcast(b.or_(mag, sign), FLOAT)


def widen_e4m3(b: llir.IRBuilder, h: llir.Value) -> llir.Value:
    """The i8 pattern `h` of E4M3 as an f32: S.1111.111 is NaN, there is no infinity."""
    x = b.zext(h, I32)
    sign = b.shl(b.and_(x, _c(I32, 0x80)), _c(I32, 24))
    e = b.and_(b.lshr(x, _c(I32, 3)), _c(I32, 0xF))
    m = b.and_(x, _c(I32, 7))
    normal = b.or_(b.shl(b.add(e, _c(I32, 120)), _c(I32, 23)), b.shl(m, _c(I32, 20)))
    tiny = b.bitcast(b.fmul(b.uitofp(m, FLOAT), llir.Constant(FLOAT, 2.0**-9)), I32)  # subnormal, 0
    mag = b.select(b.icmp_unsigned("==", e, _c(I32, 0)), tiny, normal)
    mag = b.select(b.icmp_unsigned("==", b.and_(x, _c(I32, 0x7F)), _c(I32, 0x7F)), _c(I32, 0x7FC00000), mag)
    return b.bitcast(b.or_(mag, sign), FLOAT)


def _sign_bit(h: llir.Value) -> int:
    return 1 << (h.type.width - 1)  # type: ignore[attr-defined]


def negate(b: llir.IRBuilder, h: llir.Value) -> llir.Value:
    return b.xor(h, _c(h.type, _sign_bit(h)))


def absolute(b: llir.IRBuilder, h: llir.Value) -> llir.Value:
    return b.and_(h, _c(h.type, _sign_bit(h) - 1))


def nonzero(b: llir.IRBuilder, h: llir.Value) -> llir.Value:
    """A half's truth: not ±0 (NaN is true, as `fcmp une x, 0` says for the other floats)."""
    return b.icmp_unsigned("!=", absolute(b, h), _c(h.type, 0))


__all__ = ["FORMATS", "I8", "absolute", "bits_to_float", "negate", "nonzero", "round_bits", "round_to_half", "widen_half"]
