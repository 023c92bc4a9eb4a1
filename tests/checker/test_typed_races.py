"""The race check reads integer types from the one typed model (`front.typed(...).views`), per
distinct typing of a body, and stays conservative where the typed model says nothing."""

from __future__ import annotations

from anodize.checker.api import check_source
from anodize.checker.engine import analyze_source
from anodize.checker.typed_ints import views_of

HEAD = """
from typing import TypeVar

import anodize as az
from anodize import DisjointSlice, Slice, f32, f64, func, i16, i32, i64, kernel, launch_contract, thread, u8, u32

I = TypeVar("I", i32, u8)
F = TypeVar("F", f32, f64)
"""


def _races(src: str) -> list[int]:
    return sorted({d.span.line for d in check_source(src, "m.py") if d.code == "az-shared-race"})


def _kernel(body: str, params: str = "", block: int = 512) -> str:
    lines = "\n".join("        " + ln for ln in body.strip().splitlines())
    return HEAD + f"""
@launch_contract(domain=1, block={block})
@kernel
def k(c: DisjointSlice[f32]{params}) -> None:
    i = thread.index_1d()
    with az.unsafe():
        s = az.shared.array(1024, f32)
        t = thread.tid_x()
{lines}
    if i in c:
        c[i] = 1.0
"""


def _line(src: str, text: str) -> int:
    return next(n for n, ln in enumerate(src.splitlines(), 1) if text in ln)


def test_a_local_is_converted_to_its_type_when_stored() -> None:
    for ty, racy in (("u8", True), ("i16", False), ("i32", False), ("u32", False), ("i64", False)):
        src = _kernel(f"x: {ty} = t\ns[x] = f32(t)")
        assert _races(src) == ([_line(src, "s[x]")] if racy else []), ty


def test_narrow_arithmetic_keeps_exact_values_only() -> None:
    src = _kernel("y = u8(t // 2)\ns[i32(y + y)] = f32(t)")  # u8 sum wraps at 256
    assert _races(src) == [_line(src, "s[i32")]
    src = _kernel("x = i16(t)\ns[i32(x + x)] = f32(t)")  # 2 * t < 1024 fits an i16
    assert _races(src) == []


def test_a_generic_kernel_is_walked_per_member() -> None:
    src = _kernel("x: I = t\ns[x] = f32(t)", params=", k: I")
    assert _races(src) == [_line(src, "s[x]")]  # the u8 member wraps
    a = analyze_source(src, "m.py")
    fn = next(f for f in a.model.functions.values() if f.name == "k")
    assert len(views_of(a.model, fn)) == 2
    # a type variable of float types only: one integer typing, walked once
    src = _kernel("x = F(1.0)\ns[t] = f32(x)", params=", k: F")
    a = analyze_source(src, "m.py")
    fn = next(f for f in a.model.functions.values() if f.name == "k")
    assert len(views_of(a.model, fn)) == 1
    assert _races(src) == []


def test_a_loop_test_is_compared_in_its_own_type() -> None:
    body = "s[t] = f32(t)\nr = i32(0)\nwhile r < {lit}:\n    az.syncthreads()\n    r += 1\nv = s[511 - t]"
    racy = _kernel(body.format(lit="4294967296"))  # 2**32 is 0 as an i32: the loop never runs
    assert _races(racy) == [_line(racy, "v = s[511 - t]")]
    assert _races(_kernel(body.format(lit="1"))) == []


def test_a_helper_is_typed_from_its_callers_or_its_annotations() -> None:
    helper = """
@func
def put(v: f32) -> f32:
    with az.unsafe():
        b = az.shared.array(512, f32)
        x: u8 = thread.tid_x()
        b[x] = v
        az.syncthreads()
        r = b[0]
    return r
"""
    src = HEAD + helper  # no caller: typed from its annotations; `x` wraps with 512 threads
    assert _races(src) == [_line(src, "b[x] = v")]
    a = analyze_source(src, "m.py")
    fn = a.model.functions["put"]
    assert views_of(a.model, fn)[0].fn_types is not None


def test_what_the_typed_model_does_not_type_is_unknown() -> None:
    # a helper that cannot be typed alone (an unannotated parameter, no caller): no proof
    src = HEAD + """
@func
def put(v):
    with az.unsafe():
        b = az.shared.array(512, f32)
        t = thread.tid_x()
        b[t] = f32(v)
        az.syncthreads()
        r = b[0]
    return r
"""
    a = analyze_source(src, "m.py")
    assert [v.fn_types for v in views_of(a.model, a.model.functions["put"])] == [None]
    assert _races(src) == [_line(src, "b[t] = f32(v)")]


def test_an_unvalued_constant_has_no_type_of_its_own() -> None:
    # at a launch `n` is a weak literal: a u32 in the guard, an i32 in the index (n = -1 races)
    src = _kernel("if u32(t) < n:\n    s[t] = s[t + n]", params=", n: az.Constant[int]", block=256)
    assert _races(src) == [_line(src, "s[t] = s[t + n]")]
