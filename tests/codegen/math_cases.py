"""The ulp harness for every kernel math function (vocab.MATH_FUNCS), shared by the CPU
test (test_math_ulp.py) and the GPU one (test_math_gpu.py).

For each function and float type: inputs spanning its domain (random magnitudes, both
signs, and the edges 0, -0, 1, the smallest subnormal and normal, the largest finite,
the infinities and NaN), one kernel per arity group whose `which` argument picks the
function (generated into a temporary module, so a function added to MATH_FUNCS without
a row here fails), and the error of each result in ulps of its type.

The reference is C's semantics (NaN, infinities, signed zeros, what a domain error
gives) computed in f64 by NumPy / Python's `math`; for f32 that value is also the
reference for the error (its own error, under 1 f64 ulp, is 2**-29 of an f32 ulp).
For f64 the finite results are recomputed with mpmath at 160 bits when mpmath is
installed; without it the f64 reference is the host's libm (the same library the
CPU backend calls, so the CPU's f64 errors then read 0: only special values and the
lowering are tested).

The error is |result - exact| / ulp(exact) (a fraction); CUDA states its bounds as the
distance in whole ulps from the correctly rounded result, so a bound N is met when
the error is at most N + 0.5.  An infinity stands for +-2**128 (f32) / +-2**1024 (f64)
when the exact result is finite (an overflow by rounding), and must be exact when the
exact result is infinite; NaN must match NaN.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from anodize.language.math_table import MATH
from anodize.language.vocab import MATH_FUNCS, MATH_INT_EXPONENT, MATH_PREDICATES

try:
    import mpmath as mp
except ImportError:  # pragma: no cover - depends on the environment
    mp = None

# name -> (f32 bound, f64 bound): the CUDA Math API's maximum ulp error over the full range
# (CUDA C++ Programming Guide, "Mathematical Functions"), declared with each function
# (language/math_fns.py); `lgamma` only outside LGAMMA_HOLE.
BOUNDS: dict[str, tuple[int, int]] = {n: f.ulp for n, f in MATH.items()}
# CUDA: lgammaf is 6 ulp outside (-10.001, -2.264), lgamma 4 outside (-23.0001, -2.2637)
LGAMMA_HOLE = {32: (-10.001, -2.264), 64: (-23.0001, -2.2637)}

# f64 references that only mpmath gives well enough (CPython computes these itself, not with libm)
NEEDS_MPMATH = frozenset({"gamma", "lgamma"})

UNARY = [n for n, a in MATH_FUNCS.items() if a == 1 and n not in MATH_PREDICATES]
BINARY = [n for n, a in MATH_FUNCS.items() if a == 2 and n not in MATH_INT_EXPONENT]
PREDICATES = sorted(MATH_PREDICATES)
TERNARY = [n for n, a in MATH_FUNCS.items() if a == 3]
TYPES = {32: "f32", 64: "f64"}
NP = {32: np.float32, 64: np.float64}
BLOCK = 128


# ---- kernels ---------------------------------------------------------------------------------
def _spell(name: str, bits: int) -> str:
    """f32 kernels use Python's `math.f` where it exists, f64 kernels `az.math.f`."""
    return f"math.{name}" if bits == 32 and hasattr(math, name) else f"az.math.{name}"


def _chain(names: list[str], bits: int, args: str) -> str:
    out = []
    for k, n in enumerate(names):
        out.append(f"{'if' if k == 0 else 'elif'} which == {k}:\n    r = {_spell(n, bits)}({args})")
    return "\n".join(out)


def kernel_source() -> str:
    parts = [
        "import math\n\nimport anodize as az\n"
        "from anodize import DisjointSlice, Slice, f32, f64, i32, i64, kernel, launch_contract, thread\n"
    ]

    def k(name: str, params: str, body: str) -> None:
        parts.append(
            f"\n\n@launch_contract(domain=1, block={BLOCK})\n@kernel\ndef {name}({params}) -> None:\n"
            "    i = thread.index_1d()\n    if i in o:\n" + textwrap.indent(body, " " * 8) + "\n"
        )

    for bits, t in TYPES.items():
        k(f"unary_{t}", f"which: i32, x: Slice[{t}], o: DisjointSlice[{t}]", f"v = x[i]\nr = v\n{_chain(UNARY, bits, 'v')}\no[i] = r")
        k(f"binary_{t}", f"which: i32, x: Slice[{t}], y: Slice[{t}], o: DisjointSlice[{t}]",
          f"v = x[i]\nw = y[i]\nr = v\n{_chain(BINARY, bits, 'v, w')}\no[i] = r")  # fmt: skip
        k(f"fma_{t}", f"x: Slice[{t}], y: Slice[{t}], z: Slice[{t}], o: DisjointSlice[{t}]", f"o[i] = {_spell('fma', bits)}(x[i], y[i], z[i])")
        for it in ("i32", "i64"):
            k(f"ldexp_{t}_{it}", f"x: Slice[{t}], n: Slice[{it}], o: DisjointSlice[{t}]", f"o[i] = {_spell('ldexp', bits)}(x[i], n[i])")
        k(f"pred_{t}", f"which: i32, x: Slice[{t}], o: DisjointSlice[i32]",
          f"v = x[i]\nr = False\n{_chain(PREDICATES, bits, 'v')}\no[i] = i32(r)")  # fmt: skip
    return "".join(parts)


def load_kernels(folder: Path) -> Any:
    """Write the generated kernels into `folder` and import them."""
    path = folder / "az_math_kernels.py"
    path.write_text(kernel_source())
    return load_module(path)


def load_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)
    return mod


# ---- inputs ----------------------------------------------------------------------------------
def edges(bits: int) -> np.ndarray:
    fi = np.finfo(NP[bits])
    tiny = float(fi.smallest_subnormal)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, 10.0, -10.0, tiny, -tiny, float(fi.tiny), -float(fi.tiny),
            float(fi.max), -float(fi.max), math.inf, -math.inf, math.nan]  # fmt: skip
    return np.array(vals, NP[bits])


def _mag(r: np.random.Generator, n: int, lo: float, hi: float, signed: bool = True) -> np.ndarray:
    v = 10.0 ** r.uniform(lo, hi, n)
    return v * r.choice([-1.0, 1.0], n) if signed else v


def _uni(r: np.random.Generator, n: int, a: float, b: float) -> np.ndarray:
    return r.uniform(a, b, n)


def domain(name: str, bits: int, r: np.random.Generator, n: int) -> np.ndarray:
    """Random arguments over the part of the real line where `name` is interesting."""
    big = 37 if bits == 32 else 300  # magnitudes up to 10**big
    small = -40 if bits == 32 else -310
    ovf = 88.0 if bits == 32 else 709.0  # exp overflows past this
    q = n // 4
    if name in ("sqrt", "rsqrt", "log", "log2", "log10", "cbrt"):
        return np.concatenate([_mag(r, 3 * q, small, big, signed=False), _uni(r, q, 0.0, 4.0)])
    if name in ("exp", "expm1"):
        return np.concatenate([_uni(r, 3 * q, -ovf * 1.2, ovf * 1.01), _mag(r, q, small, 0)])
    if name == "exp2":
        return np.concatenate([_uni(r, 3 * q, -ovf * 1.7, ovf * 1.45), _mag(r, q, small, 0)])
    if name == "log1p":
        return np.concatenate([_mag(r, 2 * q, small, big, signed=False), _uni(r, q, -1.0, 1.0), _mag(r, q, small, -3)])
    if name in ("sin", "cos", "tan"):
        return np.concatenate([_uni(r, 2 * q, -10.0, 10.0), _mag(r, q, 1, big), _mag(r, q, small, 0)])
    if name in ("asin", "acos", "atanh"):
        return np.concatenate([_uni(r, 3 * q, -1.0, 1.0), _mag(r, q, small, 0), [0.999999, -0.999999, 1.5]])
    if name in ("sinh", "cosh"):
        return np.concatenate([_uni(r, 3 * q, -ovf * 1.01, ovf * 1.01), _mag(r, q, small, 0)])
    if name == "tanh":
        return np.concatenate([_uni(r, 3 * q, -20.0, 20.0), _mag(r, q, small, 0)])
    if name == "acosh":
        return np.concatenate([1.0 + _mag(r, 2 * q, small, 1, signed=False), _mag(r, 2 * q, 0, big, signed=False), [0.5]])
    if name == "erf":
        return np.concatenate([_uni(r, 3 * q, -6.0, 6.0), _mag(r, q, small, 0)])
    if name == "erfc":
        return np.concatenate([_uni(r, 3 * q, -6.0, 10.0 if bits == 32 else 27.0), _mag(r, q, small, 0)])
    if name == "gamma":
        top = 35.0 if bits == 32 else 171.5
        return np.concatenate([_uni(r, 3 * q, -top, top), _mag(r, q, small, 0), [-3.0, -1.0, -0.5, 1e-30]])
    if name == "lgamma":
        return np.concatenate([_uni(r, 2 * q, -60.0, 60.0), _mag(r, q, 0, big, signed=False), _mag(r, q, small, 0), [-4.0, -1.0, 1.0, 2.0]])
    # atan, asinh, fabs, floor, ceil, trunc, and the binary functions' first argument
    return np.concatenate([_mag(r, 2 * q, small, big), _uni(r, 2 * q, -10.0, 10.0)])


def binary_inputs(name: str, bits: int, r: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    e = edges(bits)
    gx, gy = np.meshgrid(e, e, indexing="ij")  # every pair of edges
    if name == "pow":
        x = np.concatenate([_mag(r, n // 2, -3, 3, signed=False), -np.floor(_uni(r, n // 4, 1, 20)), _mag(r, n // 4, -1, 1, signed=False)])
        lim = 35 if bits == 32 else 300
        y = np.concatenate([_uni(r, n // 2, -lim / 3, lim / 3), np.floor(_uni(r, n // 4, -25, 25)), _uni(r, n // 4, -lim * 2, lim * 2)])
    elif name in ("fmod", "remainder"):
        x = domain("x", bits, r, n)
        y = np.concatenate([domain("x", bits, r, n // 2), _uni(r, n - n // 2, -3.0, 3.0)])
    else:
        x = domain("x", bits, r, n)
        y = domain("x", bits, r, n)[::-1].copy()
    return np.concatenate([x, gx.ravel()]).astype(NP[bits]), np.concatenate([y, gy.ravel()]).astype(NP[bits])


# ---- references (C semantics, in f64) -----------------------------------------------------------
def _vec(f: Callable[..., float]) -> Callable[..., np.ndarray]:
    return np.vectorize(f, otypes=[np.float64])


def _gamma(x: float) -> float:
    try:
        return math.gamma(x)
    except ValueError:  # a pole or -inf
        return math.copysign(math.inf, x) if x == 0 else math.nan
    except OverflowError:  # near 0 (either sign) or large x
        return math.copysign(math.inf, x)


def _lgamma(x: float) -> float:
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):  # the poles
        return math.inf


def _remainder(x: float, y: float) -> float:
    try:
        return math.remainder(x, y)
    except ValueError:  # x infinite or y zero
        return math.nan


C_REF: dict[str, Callable[..., np.ndarray]] = {
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "cbrt": np.cbrt,
    "exp": np.exp,
    "exp2": np.exp2,
    "expm1": np.expm1,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "log1p": np.log1p,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "erf": _vec(math.erf),
    "erfc": _vec(math.erfc),
    "gamma": _vec(_gamma),
    "lgamma": _vec(_lgamma),
    "fabs": np.fabs,
    "floor": np.floor,
    "ceil": np.ceil,
    "trunc": np.trunc,
    "pow": np.power,
    "atan2": np.arctan2,
    "hypot": np.hypot,
    "copysign": np.copysign,
    "fmod": np.fmod,
    "remainder": _vec(_remainder),
    "nextafter": np.nextafter,
    "fmin": np.fmin,
    "fmax": np.fmax,
    "isnan": np.isnan,
    "isinf": np.isinf,
    "isfinite": np.isfinite,
}


def c_reference(name: str, bits: int, args: tuple[np.ndarray, ...]) -> np.ndarray:
    """C's result in f64 for arguments of the `bits` type (so nextafter steps in that type)."""
    with np.errstate(all="ignore"):
        if name == "nextafter":
            return np.nextafter(*args).astype(np.float64)  # in the argument type
        if name == "fma":
            return np.array([_fma_exact(a, b, c) for a, b, c in zip(*(v.astype(float).tolist() for v in args), strict=True)])
        if name == "ldexp":
            x, e = args
            return np.ldexp(x.astype(np.float64), np.clip(e, -4096, 4096).astype(np.int32)) if bits == 64 else np.array(
                [math.ldexp(a, int(k)) if math.isfinite(a) and abs(int(k)) < 400 else _ldexp_c(a, int(k)) for a, k in zip(x.astype(float), e, strict=True)]
            )
        return np.asarray(C_REF[name](*(a.astype(np.float64) for a in args)), dtype=np.float64)


def _fma_exact(a: float, b: float, c: float) -> float:
    """a*b + c rounded once to f64 (an infinity past the range)."""
    if not all(map(math.isfinite, (a, b, c))):
        return a * b + c
    q = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.inf


def _ldexp_c(a: float, k: int) -> float:
    if not math.isfinite(a) or a == 0:
        return a
    return math.copysign(math.inf if k > 0 else 0.0, a)


def _mp_funcs() -> dict[str, Callable[..., Any]]:
    assert mp is not None
    return {
        "sqrt": mp.sqrt,
        "rsqrt": lambda x: 1 / mp.sqrt(x),
        "cbrt": lambda x: mp.sign(x) * mp.cbrt(abs(x)),
        "exp": mp.exp,
        "exp2": lambda x: mp.power(2, x),
        "expm1": mp.expm1,
        "log": mp.log,
        "log2": lambda x: mp.log(x, 2),
        "log10": mp.log10,
        "log1p": mp.log1p,
        "sin": mp.sin,
        "cos": mp.cos,
        "tan": mp.tan,
        "asin": mp.asin,
        "acos": mp.acos,
        "atan": mp.atan,
        "sinh": mp.sinh,
        "cosh": mp.cosh,
        "tanh": mp.tanh,
        "asinh": mp.asinh,
        "acosh": mp.acosh,
        "atanh": mp.atanh,
        "erf": mp.erf,
        "erfc": mp.erfc,
        "gamma": mp.gamma,
        "lgamma": lambda x: mp.log(abs(mp.gamma(x))),
        "pow": mp.power,
        "atan2": mp.atan2,
        "hypot": mp.hypot,
    }


def high_reference(name: str, args: tuple[np.ndarray, ...], c: np.ndarray) -> list[Any]:
    """f64 reference values: mpmath (160 bits) where C's result is finite and mpmath is
    installed, else C's value.  Exact operations keep C's value."""
    if mp is None or name not in _mp_funcs():
        return list(c)
    f = _mp_funcs()[name]
    out: list[Any] = []
    with mp.workprec(160):
        for k, cv in enumerate(c):
            a = [float(v[k]) for v in args]
            if not math.isfinite(cv) or not all(math.isfinite(v) and v != 0 for v in a):  # mpf has no -0
                out.append(float(cv))
                continue
            try:
                v = f(*(mp.mpf(x) for x in a))
            except (ValueError, ZeroDivisionError, OverflowError):
                out.append(float(cv))
                continue
            out.append(v if isinstance(v, mp.mpf) else float(cv))
    return out


# ---- errors ----------------------------------------------------------------------------------
def ulp_errors(got: np.ndarray, ref: list[Any] | np.ndarray, bits: int) -> np.ndarray:
    """|got - ref| in ulps of `bits`-wide floats at ref (see the module docstring).

    Where both the result and a float reference are finite (nearly every case) the error is
    computed in f64, vectorised: the difference rounds once (a relative 2**-53) and the
    scaling by a power of two is exact, far inside the bound's 1e-9 slack.  The rest (NaN,
    infinities, mpmath references) is computed exactly, one element at a time."""
    mant, emin, emax = (24, -126, 128) if bits == 32 else (53, -1022, 1024)
    g64 = got.astype(np.float64)
    out = np.zeros(len(got))
    is_float = np.array([not (mp is not None and isinstance(r, mp.mpf)) for r in ref], dtype=bool)
    rf = np.array([float(r) for r in ref], dtype=np.float64)
    if bits == 32:
        rf = np.where(np.abs(rf) >= 2.0**128, np.copysign(2.0**128, rf), rf)  # past the f32 range: 2**128
    fast = is_float & np.isfinite(rf) & np.isfinite(g64)
    if fast.any():
        r, g = rf[fast], g64[fast]
        e = np.where(r != 0, np.frexp(r)[1] - 1, emin)
        e = np.clip(e, emin, emax - 1)
        with np.errstate(over="ignore"):
            out[fast] = np.ldexp(np.abs(g - r), -(e - mant + 1))
    for k, (g, r) in enumerate(zip(g64.tolist(), ref, strict=True)):
        if fast[k]:
            continue
        rf = float(r)
        if math.isnan(rf) or math.isnan(g):
            out[k] = 0.0 if math.isnan(rf) and math.isnan(g) else math.inf
            continue
        if math.isinf(rf):  # infinite in f64: the exact result is, or overflows f64 (and f32)
            out[k] = 0.0 if g == rf else math.inf
            continue
        if bits == 32 and abs(rf) >= 2.0**128:  # past the f32 range: stands as 2**128, as inf does
            rf = r = math.copysign(2.0**128, rf)
        if mp is not None and isinstance(r, mp.mpf):
            with mp.workprec(200):
                gg = mp.mpf(g) if math.isfinite(g) else mp.ldexp(mp.sign(g), emax)
                e = int(mp.frexp(r)[1]) - 1 if r != 0 else emin
                e = min(max(e, emin), emax - 1)
                out[k] = float(abs(gg - r) / mp.ldexp(1, e - mant + 1))
            continue
        e = math.frexp(rf)[1] - 1 if rf != 0 else emin
        e = min(max(e, emin), emax - 1)
        gq = Fraction(g) if math.isfinite(g) else Fraction(2) ** emax * (1 if g > 0 else -1)
        out[k] = float(abs(gq - Fraction(rf)) / Fraction(2) ** (e - mant + 1))
    return out


@dataclass
class Measured:
    name: str
    bits: int
    bound: int
    max_ulp: float  # over the checked inputs
    worst: tuple[float, ...]  # the arguments of the worst result
    count: int
    outside: float = 0.0  # lgamma inside CUDA's excluded interval (not checked)

    @property
    def ok(self) -> bool:
        return self.max_ulp <= self.bound + 0.5 + 1e-9


Runner = Callable[[Any, tuple[int, ...], list[Any]], None]  # (kernel, grid-1d size, args) -> runs it


def measure_all(mod: Any, bits: int, run: Callable[..., None], n: int, seed: int = 20261201) -> dict[str, Measured]:
    """Run every function on `n` random arguments plus the edges; `run(kernel, n, *args)`
    launches `kernel` over `n` elements with the given host arrays / scalars (outputs
    are written back into the arrays)."""
    r = np.random.default_rng(seed + bits)
    t = TYPES[bits]
    out: dict[str, Measured] = {}

    def record(name: str, args: tuple[np.ndarray, ...], got: np.ndarray, ref: Any, mask: np.ndarray | None = None) -> None:
        err = ulp_errors(got, ref, bits)
        checked = err if mask is None else err[mask]
        k = int(np.argmax(checked)) if len(checked) else 0
        idx = np.flatnonzero(mask)[k] if mask is not None else k
        m = Measured(name, bits, BOUNDS[name][0 if bits == 32 else 1], float(checked.max()), tuple(float(a[idx]) for a in args), len(got))
        if mask is not None and (~mask).any():
            m.outside = float(err[~mask].max())
        out[name] = m

    for which, name in enumerate(UNARY):
        x = np.concatenate([domain(name, bits, r, n), edges(bits)]).astype(NP[bits])
        o = np.zeros_like(x)
        run(getattr(mod, f"unary_{t}"), len(x), which, x, o)
        c = c_reference(name, bits, (x,))
        mask = None
        if name == "lgamma":
            lo, hi = LGAMMA_HOLE[bits]
            mask = ~((x > lo) & (x < hi))
        record(name, (x,), o, high_reference(name, (x,), c) if bits == 64 else c, mask)
    for which, name in enumerate(BINARY):
        x, y = binary_inputs(name, bits, r, n)
        o = np.zeros_like(x)
        run(getattr(mod, f"binary_{t}"), len(x), which, x, y, o)
        c = c_reference(name, bits, (x, y))
        record(name, (x, y), o, high_reference(name, (x, y), c) if bits == 64 else c)
    x, y = binary_inputs("x", bits, r, n)
    z = np.concatenate([domain("x", bits, r, n), edges(bits).repeat(len(edges(bits)))]).astype(NP[bits])[: len(x)]
    o = np.zeros_like(x)
    run(getattr(mod, f"fma_{t}"), len(x), x, y, z, o)
    record("fma", (x, y, z), o, c_reference("fma", bits, (x, y, z)))
    worst = 0.0
    for it, ity in (("i32", np.int32), ("i64", np.int64)):
        x = np.concatenate([domain("x", bits, r, n), edges(bits).repeat(6)]).astype(NP[bits])
        lim = 2**40 if it == "i64" else 2**31 - 1
        e = np.concatenate([r.integers(-300, 300, n), r.integers(-lim, lim, len(x) - n)]).astype(ity)
        e[:8] = [lim, -lim, 0, 1, -1, 2000, -2000, 4097]
        o = np.zeros_like(x)
        run(getattr(mod, f"ldexp_{t}_{it}"), len(x), x, e, o)
        record("ldexp", (x, e.astype(np.float64)), o, c_reference("ldexp", bits, (x, e)))
        worst = max(worst, out["ldexp"].max_ulp)
    out["ldexp"].max_ulp = worst
    for which, name in enumerate(PREDICATES):
        x = np.concatenate([domain("x", bits, r, n), edges(bits)]).astype(NP[bits])
        o = np.zeros(len(x), np.int32)
        run(getattr(mod, f"pred_{t}"), len(x), which, x, o)
        want = C_REF[name](x).astype(np.int32)
        bad = np.flatnonzero(o != want)
        out[name] = Measured(name, bits, 0, math.inf if len(bad) else 0.0, (float(x[bad[0]]),) if len(bad) else (), len(x))
    return out


def table(results: dict[int, dict[str, Measured]]) -> str:
    """A Markdown table of the measured maxima (for docs/language.md)."""
    rows = ["| function | f32 bound | f32 measured | f64 bound | f64 measured |", "|---|---|---|---|---|"]
    for name in MATH_FUNCS:
        a, b = results[32][name], results[64][name]
        rows.append(f"| `{name}` | {a.bound} | {a.max_ulp:.2f} | {b.bound} | {b.max_ulp:.2f} |")
    return "\n".join(rows)
