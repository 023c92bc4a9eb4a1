"""A grid-stride loop's variable is defined only inside its loop (the typer refuses a read after
it until the name is bound again: the backends leave the last index or the one past the end)."""

from __future__ import annotations

import textwrap

from anodize.language.front import front_for_source

HEAD = """
import anodize as az
from anodize import DisjointSlice, i32, i64, kernel, launch_contract, thread
"""


def _diags(body: str) -> list[str]:
    src = HEAD + textwrap.dedent(body)
    front = front_for_source(src, f"<gs-{abs(hash(src))}>")
    fdef = next(iter(front.kernels()))
    return [d.message for d in front.typed(fdef, ()).diagnostics]


def test_a_read_after_the_loop_is_refused_with_the_way_out() -> None:
    msgs = _diags("""
        @launch_contract(domain=1, block=64)
        @kernel
        def k(c: DisjointSlice[i32], d: DisjointSlice[i64]) -> None:
            i = thread.index_1d()
            for j in thread.grid_stride(c):
                c[j] = 1
            x = j.get()
            if i in d:
                d[i] = x
        """)
    assert any("`j` is a grid-stride loop's index: it is defined only inside its loop" in m for m in msgs), msgs


def test_the_typer_takes_a_copy_made_inside_the_loop_and_a_second_loop_binding_it_again() -> None:
    assert _diags("""
        @launch_contract(domain=1, block=64)
        @kernel
        def k(c: DisjointSlice[i32], d: DisjointSlice[i64]) -> None:
            i = thread.index_1d()
            last = i64(-1)
            for j in thread.grid_stride(c):
                c[j] = 1
                last = j.get()
            for j in thread.grid_stride(c):
                c[j] += 1
            if i in d:
                d[i] = last
        """) == []
