"""Rounding to the half types (f16, bf16) in Python: the reference the generated code
(codegen/llvm/halves.py, the same algorithm in LLVM IR) and the typer's constant folding use.

Round to nearest, ties to even, from an f64, with subnormals, overflow to infinity and
quiet NaNs; equal to NumPy's float16 and to ml_dtypes' bfloat16 conversions.
"""

from __future__ import annotations

import struct

# name -> (exponent bits, fraction bits)
FORMATS = {"f16": (5, 10), "bf16": (8, 7), "f32": (8, 23), "f64": (11, 52)}


def round_bits(x: float, fmt: str) -> int:
    """The 16-bit pattern of `x` (a Python float, i.e. f64) rounded to nearest even in `fmt`."""
    bits = struct.unpack("<Q", struct.pack("<d", float(x)))[0]
    return _round_int(bits, 64, *FORMATS["f64"], *FORMATS[fmt])


def bits_to_float(h: int, fmt: str) -> float:
    """The exact value of the 16-bit pattern `h` of `fmt`."""
    if fmt == "bf16":
        return float(struct.unpack("<f", struct.pack("<I", (h & 0xFFFF) << 16))[0])
    return float(struct.unpack("<e", struct.pack("<H", h & 0xFFFF))[0])


def _round_int(bits: int, w: int, se: int, sm: int, de: int, dm: int) -> int:
    sb, db = (1 << (se - 1)) - 1, (1 << (de - 1)) - 1
    sign = (bits >> (w - 1)) << 15
    absb = bits & ((1 << (w - 1)) - 1)
    inf = ((1 << de) - 1) << dm
    if absb > ((1 << se) - 1) << sm:
        return sign | inf | (1 << (dm - 1))  # a quiet NaN
    expf, man = absb >> sm, absb & ((1 << sm) - 1)
    full, e = (man | (1 << sm), expf) if expf else (man, 1)
    lim = sb + 1 - db
    shift = min(sm - dm + (lim - e if e < lim else 0), w - 1)
    q, rem, half = full >> shift, full & ((1 << shift) - 1), 1 << (shift - 1)
    r = q + (1 if rem > half or (rem == half and q & 1) else 0)
    out = ((e - lim if e >= lim else 0) << dm) + r
    return sign | min(out, inf)


def round_half(x: float, fmt: str) -> float:
    """`x` rounded to the half type `fmt`, as a Python float (exact)."""
    return bits_to_float(round_bits(x, fmt), fmt)
