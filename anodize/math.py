"""Device math: each function maps to libdevice or an LLVM intrinsic.

`math.f` (Python's module) and `az.math.f` (this one) are the same functions in a
kernel.  f32 arguments stay f32 (`__nv_expf`, not `__nv_exp`); integer arguments and
lone literals use f64.  The functions are every one of Python's `math` module that
has a libdevice (`__nv_*f` / `__nv_*`) or LLVM counterpart, plus `rsqrt`, `fma`,
`fmin` and `fmax`.  Unlike Python's, `floor`/`ceil`/`trunc` return the float type and
domain errors give NaN or an infinity (as in C), never an exception.  The error
bounds (ulp) each function keeps are in docs/language.md.

The functions are declared once, in anodize/language/math_fns.py (each stub with its row of
the math table); this module is their public name.  Outside a kernel they raise TypeError.
"""

from __future__ import annotations

from anodize.language.math_fns import *  # noqa: F403  (the stubs, `__all__` below)
from anodize.language.math_fns import __all__ as __all__
