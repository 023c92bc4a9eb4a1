"""Findings of tools/fuzz.py, kept as regression tests.

Dead code after `continue`/`break`/`return` was not analysed by the checker while
codegen checked it, so `anodize check` passed a module that `kernel.compile()`
rejected (fuzz seed 1037742, reduced).  The checker now analyses unreachable
statements from the state at the exit that made them unreachable.
"""

from __future__ import annotations

from anodize.checker.api import check_source

DEAD_WRITE = '''
from anodize import DisjointSlice, i32, kernel, launch_contract, thread


@launch_contract(domain=1, block=128)
@kernel
def kern(out: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    for r in range(3):
        continue
        out[len(out) - 1 - i.get()] = 0
    if i in out:
        out[i] = 1
'''


def test_write_after_continue_is_reported_like_codegen_does() -> None:
    codes = {(d.span.line, d.code) for d in check_source(DEAD_WRITE, "dead_write.py")}
    assert (11, "az-disjoint-index") in codes
