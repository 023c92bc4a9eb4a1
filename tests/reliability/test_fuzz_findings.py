"""Open findings of tools/fuzz.py, pinned as strict xfails so a fix flips them.

Dead code after `continue`/`break`/`return` is not analysed by the checker, but
codegen still checks it: `anodize check` passes a module that `kernel.compile()`
rejects (fuzz seed 1037742, reduced).  Unreachable, so never a runtime race, but
the two paths disagree.
"""

from __future__ import annotations

import pytest

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


@pytest.mark.xfail(strict=True, reason="checker skips unreachable statements; codegen rejects them (fuzz seed 1037742)")
def test_write_after_continue_is_reported_like_codegen_does() -> None:
    codes = {(d.span.line, d.code) for d in check_source(DEAD_WRITE, "dead_write.py")}
    assert (11, "az-disjoint-index") in codes
