"""Rounding to the narrow float types (f16, bf16, f8e4m3, f8e5m2) in Python: the reference
the generated code (codegen/llvm/halves.py, the same algorithm in LLVM IR) and the typer's
constant folding use.

Round to nearest, ties to even, from an f64, with subnormals.  f16 and bf16 overflow to
infinity and give quiet NaNs (NumPy's float16, ml_dtypes' bfloat16).  The 8-bit types are
OCP FP8's E4M3 (no infinity: S.1111.111 is NaN, 448 the largest value; ml_dtypes'
`float8_e4m3fn`) and E5M2 (`float8_e5m2`, IEEE-like), converted as the GPU's
`cvt.rn.satfinite` does: a value beyond the largest finite one, infinities included,
saturates to it (keeping its sign), and NaN stays NaN (S.1111.111 for E4M3, S.11111.10 for
E5M2, the sign kept, as ml_dtypes writes them).
"""

from __future__ import annotations

import math
import struct

# name -> (exponent bits, fraction bits)
FORMATS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52), "f8e4m3": (4, 3), "f8e5m2": (5, 2)}
# the 8-bit formats: their largest finite pattern (conversions saturate to it) and their NaN
F8_MAX_BITS = {"f8e4m3": 0x7E, "f8e5m2": 0x7B}
F8_NAN_BITS = {"f8e4m3": 0x7F, "f8e5m2": 0x7E}


def width(fmt: str) -> int:
    """The bits of a pattern of `fmt` (sign, exponent and fraction)."""
    de, dm = FORMATS[fmt]
    return 1 + de + dm


def round_bits(x: float, fmt: str) -> int:
    """The bit pattern of `x` (a Python float, i.e. f64) rounded to nearest even in `fmt`."""
    bits = struct.unpack("<Q", struct.pack("<d", float(x)))[0]
    return _round_int(bits, 64, *FORMATS["f64"], fmt)


def bits_to_float(h: int, fmt: str) -> float:
    """The exact value of the bit pattern `h` of `fmt`."""
    if fmt == "bf16":
        return float(struct.unpack("<f", struct.pack("<I", (h & 0xFFFF) << 16))[0])
    if fmt == "f16":
        return float(struct.unpack("<e", struct.pack("<H", h & 0xFFFF))[0])
    h &= 0xFF
    if fmt == "f8e5m2":  # the upper byte of an f16
        return float(struct.unpack("<e", struct.pack("<H", h << 8))[0])
    sign = -1.0 if h & 0x80 else 1.0
    if h & 0x7F == 0x7F:
        return math.copysign(math.nan, sign)  # (the sign kept, as for the other formats' NaNs)
    e, m = (h >> 3) & 0xF, h & 7
    return sign * (m * 2.0**-9 if e == 0 else (8 + m) * 2.0 ** (e - 10))


def _round_int(bits: int, w: int, se: int, sm: int, fmt: str) -> int:
    de, dm = FORMATS[fmt]
    sb, db = (1 << (se - 1)) - 1, (1 << (de - 1)) - 1
    sign = (bits >> (w - 1)) << (de + dm)
    absb = bits & ((1 << (w - 1)) - 1)
    inf = ((1 << de) - 1) << dm
    if absb > ((1 << se) - 1) << sm:
        return sign | F8_NAN_BITS.get(fmt, inf | (1 << (dm - 1)))  # a quiet NaN
    expf, man = absb >> sm, absb & ((1 << sm) - 1)
    full, e = (man | (1 << sm), expf) if expf else (man, 1)
    lim = sb + 1 - db
    shift = min(sm - dm + (lim - e if e < lim else 0), w - 1)
    q, rem, half = full >> shift, full & ((1 << shift) - 1), 1 << (shift - 1)
    r = q + (1 if rem > half or (rem == half and q & 1) else 0)
    out = ((e - lim if e >= lim else 0) << dm) + r
    return sign | min(out, F8_MAX_BITS.get(fmt, inf))


def round_half(x: float, fmt: str) -> float:
    """`x` rounded to the narrow float type `fmt`, as a Python float (exact)."""
    return bits_to_float(round_bits(x, fmt), fmt)
