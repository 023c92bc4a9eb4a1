"""The math functions are one table (anodize/language/math_table.py), its rows declared by
the stubs themselves (language/math_fns.py, public as `anodize.math`): the typer's
vocabulary and every backend's names come from it."""

from __future__ import annotations

import inspect

import anodize.math as az_math
from anodize.language import vocab
from anodize.language.math_table import MATH


def test_the_stubs_are_the_table() -> None:
    assert set(az_math.__all__) == set(MATH)  # every public stub declared, every row public
    for name, f in MATH.items():
        params = inspect.signature(getattr(az_math, name)).parameters
        assert len(params) == f.arity, name
        assert getattr(az_math, name).__doc__, name


def test_a_declared_stub_is_a_row() -> None:
    """Adding a function is its stub: the decorator records the row from the signature."""
    from anodize.language.math_table import declare

    rows = dict(MATH)
    try:

        @declare(c_name="sinpi_c", ulp=(2, 1))
        def sinpi(x: float) -> float:
            """sin(pi x)."""
            raise TypeError

        row = MATH["sinpi"]
        assert (row.arity, row.libdevice, row.libm, row.ulp) == (1, "sinpi_c", "sinpi_c", (2, 1))
    finally:
        MATH.clear()
        MATH.update(rows)


def test_the_vocabulary_reads_the_table() -> None:
    assert vocab.MATH_FUNCS == {n: f.arity for n, f in MATH.items()}
    assert vocab.MATH_PREDICATES == {"isnan", "isinf", "isfinite"}
    assert vocab.MATH_INT_EXPONENT == {"ldexp"}


def test_every_backend_names_the_c_function_from_the_table() -> None:
    from anodize.codegen.debug.ops import _libm
    from anodize.codegen.llvm.types import INTRINSIC_MATH
    from anodize.codegen.gpu.ptx import libdevice_symbol

    assert libdevice_symbol("gamma", 32) == "__nv_tgammaf" and libdevice_symbol("exp", 64) == "__nv_exp"
    assert _libm("gamma", 64, 1)(5.0) == 24.0  # the C library's `tgamma`
    assert INTRINSIC_MATH == {n: f.llvm for n, f in MATH.items() if f.llvm}
    assert INTRINSIC_MATH["fmin"] == "minnum"
