"""The checker's rules on local values: a local array is not shared state (no race rule sees
it), a value read from one is a plain scalar (never a witness), and an unpacked name carries
the thread dependence of everything on the right side."""

from __future__ import annotations

import textwrap

from anodize.checker.api import check_source

HEAD = """
import anodize as az
from anodize import DisjointSlice, Slice, LocalArray, f32, i64, kernel, launch_contract, thread
"""


def _codes(body: str) -> list[tuple[int, str]]:
    src = HEAD + textwrap.dedent(body)
    return sorted((d.span.line - HEAD.count("\n"), d.code) for d in check_source(src, "<local_values>"))


def test_local_array_writes_under_thread_dependent_control_are_fine() -> None:
    assert _codes("""
        @az.func
        def bump(t: LocalArray[i64], j: i64) -> None:
            t[j % 4] += 1

        @launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
        @kernel
        def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
            i = thread.index_1d()
            t = az.local.array(4, i64)
            if i.get() % 3 == 0:
                t[i.get() % 4] = 7
                bump(t, i.get())
            if i in c:
                c[i] = f32(t[0] + t[1])
        """) == []


def test_a_value_read_from_a_local_array_is_not_a_witness() -> None:
    got = _codes("""
        @launch_contract(domain=1, block=64)
        @kernel
        def k(c: DisjointSlice[f32]) -> None:
            i = thread.index_1d()
            t = az.local.array(2, i64)
            t[0] = i.get()
            c[t[0]] = 1.0
        """)
    assert got == [(8, "az-disjoint-index")]


def test_unpacked_names_carry_thread_dependence() -> None:
    got = _codes("""
        @az.func
        def two(x: i64) -> tuple[i64, i64]:
            return x, 1

        @launch_contract(domain=1, block=64)
        @kernel
        def k(c: DisjointSlice[f32]) -> None:
            i = thread.index_1d()
            u, v = 1, 2
            with az.unsafe():
                if u < 5:
                    az.syncthreads()
            x, y = two(i.get())
            with az.unsafe():
                if y < 5:
                    az.syncthreads()
            p, q = i.get(), 0
            with az.unsafe():
                if q < 5:
                    az.syncthreads()
            if i in c:
                c[i] = 0.0
        """)
    assert got == [(17, "az-barrier-divergence"), (21, "az-barrier-divergence")]


def test_a_witness_in_a_tuple_is_a_forge() -> None:
    got = _codes("""
        @launch_contract(domain=1, block=64)
        @kernel
        def k(c: DisjointSlice[f32]) -> None:
            i = thread.index_1d()
            j, n = i, 0
            c[j] = 1.0
        """)
    assert (6, "az-index-forge") in got and all(code != "az-internal" for _, code in got)


def test_a_constant_sized_array_is_checked_per_value() -> None:
    """Sized by an `az.Constant` checked without a value: nothing that depends on the size is
    reported by `check`; the specialisation with a value too small reports it (same code)."""
    from anodize.language.front import front_for_source

    src = HEAD + textwrap.dedent("""
        @launch_contract(domain=1, block=32, requires=lambda a, c: len(a) == len(c))
        @kernel
        def k(a: Slice[f32], c: DisjointSlice[f32], w: az.Constant[int]) -> None:
            i = thread.index_1d()
            t = az.local.array(w, f32)
            t[2] = 1.0
            if i in c:
                c[i] = t[2] + a[i]
        """)
    assert check_source(src, "<sized>") == []
    front = front_for_source(src, "<sized>")
    (fdef,) = front.kernels()
    assert front.typed(fdef, (("w", 4),)).ir is not None
    bad = front.typed(fdef, (("w", 2),)).diagnostics
    assert [(d.code, d.span.line - HEAD.count("\n")) for d in bad] == [("az-type", 7), ("az-type", 9)]
