"""The typing of kernel math calls: result types, the integer exponent of `ldexp`,
arity, and located errors for misuse."""

from __future__ import annotations

import textwrap
from pathlib import Path

import math_cases as M
import numpy as np
import pytest
from cg_helpers import run_cpu

from anodize.codegen.driver import compile_cpu
from anodize.language import ir
from anodize.language.diagnostics import CheckError
from anodize.language.typer import build_ir
from anodize.language.types import BOOL, F32, F64

HEAD = "import math\n\nimport anodize as az\nfrom anodize import DisjointSlice, Slice, bool_, f32, f64, i32, i64, u32, kernel, launch_contract, thread\n"


def _kernel(tmp_path: Path, params: str, body: str, name: str = "k") -> object:
    src = tmp_path / f"mt_{abs(hash((params, body)))}.py"
    src.write_text(HEAD + f"\n\n@launch_contract(domain=1, block=64)\n@kernel\ndef {name}({params}) -> None:\n    i = thread.index_1d()\n"
                   + textwrap.indent(textwrap.dedent(body), "    "))  # fmt: skip
    return getattr(M.load_module(src), name)


def _math_calls(k: object) -> list[ir.MathCall]:
    out: list[ir.MathCall] = []

    def walk(x: object) -> None:
        if isinstance(x, ir.MathCall):
            out.append(x)
        if isinstance(x, tuple):
            for y in x:
                walk(y)
        elif hasattr(x, "__dataclass_fields__"):
            for f in x.__dataclass_fields__:
                walk(getattr(x, f))

    walk(build_ir(k).body)
    return out


def test_result_types(tmp_path: Path) -> None:
    k = _kernel(tmp_path, "x: Slice[f32], y: Slice[f64], n: Slice[i32], o: DisjointSlice[f64]", """
        if i in o:
            a = math.atan2(x[i], 2.0) + math.hypot(x[i], y[i]) + f32(math.isnan(x[i])) + math.sqrt(n[i])
            o[i] = a + az.math.ldexp(x[i], n[i])
    """)  # fmt: skip
    ty = {c.name: c.ty for c in _math_calls(k)}
    assert ty == {"atan2": F32, "hypot": F64, "isnan": BOOL, "sqrt": F64, "ldexp": F32}


@pytest.mark.parametrize("ety", ["i32", "i64", "u32", "bool_"])
def test_ldexp_takes_any_integer_exponent(ety: str, tmp_path: Path) -> None:
    k = _kernel(tmp_path, f"x: Slice[f32], n: Slice[{ety}], o: DisjointSlice[f32]", "if i in o:\n    o[i] = math.ldexp(x[i], n[i])\n")
    ck = compile_cpu(k)
    dt = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "bool_": np.bool_}[ety]
    n = np.array([0, 1, 3, 200, 2**31 - 1] if ety != "bool_" else [0, 1, 1, 0, 1]).astype(dt)
    x = np.array([1.5, -1.5, 1.0, 1.0, 1.0], np.float32)
    o = np.zeros(5, np.float32)
    run_cpu(ck, (1,), (64,), x, n, o)
    with np.errstate(over="ignore"):
        want = [np.float32(np.ldexp(float(a), min(int(b), 4096))) for a, b in zip(x, n, strict=True)]
    np.testing.assert_array_equal(o, want)


@pytest.mark.parametrize(
    ("call", "text"),
    [
        ("math.ldexp(x[i], 1.5)", "exponent of `math.ldexp` must be an integer"),
        ("math.log(x[i], 2.0)", "`math.log` takes 1 argument, got 2"),
        ("math.hypot(x[i], 1.0, 2.0)", "`math.hypot` takes 2 arguments, got 3"),
        ("az.math.fma(x[i], 1.0)", "`math.fma` takes 3 arguments, got 2"),
        ("math.frexp(x[i])", "math.frexp"),
    ],
)
def test_misuse_is_a_located_error(call: str, text: str, tmp_path: Path) -> None:
    k = _kernel(tmp_path, "x: Slice[f32], o: DisjointSlice[f32]", f"if i in o:\n    o[i] = {call}\n")
    with pytest.raises(CheckError) as info:
        compile_cpu(k)
    msg = str(info.value)
    assert text in msg and ":12:" in msg, msg  # the line of the call


def test_same_body_different_annotations_are_different_kernels(tmp_path: Path) -> None:
    """Identical bodies give equal code objects (co_filename is not compared): the
    source cache must still tell the kernels of two files apart."""
    body = "if i in o:\n    o[i] = math.sqrt(x[i])\n"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    k32 = _kernel(tmp_path / "a", "x: Slice[f32], o: DisjointSlice[f32]", body)
    k64 = _kernel(tmp_path / "b", "x: Slice[f64], o: DisjointSlice[f64]", body)
    assert [c.ty for c in _math_calls(k32)] == [F32]
    assert [c.ty for c in _math_calls(k64)] == [F64]


def test_math_constants_are_weak_literals(tmp_path: Path) -> None:
    k = _kernel(tmp_path, "x: Slice[f32], o: DisjointSlice[f32]", "if i in o:\n    o[i] = x[i] * math.pi + math.e - math.tau\n")
    ck = compile_cpu(k)
    assert "double" not in ck.llvm_ir  # stays f32
    x = np.array([1.0, 2.0], np.float32)
    o = np.zeros(2, np.float32)
    run_cpu(ck, (1,), (64,), x, o)
    np.testing.assert_allclose(o, x * np.float32(np.pi) + np.float32(np.e) - np.float32(2 * np.pi), rtol=1e-6)
