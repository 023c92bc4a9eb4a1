"""One error per root cause (checker/engine.py `_without_follow_ons`): a shared array whose
declaration the typer refused has no races of its own, wherever the declaration is nested."""

from __future__ import annotations

from anodize.checker.api import check_source

SRC = """import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        if i in a:
            tile = az.shared.array(64, ELEM)
        t = thread.tid_x()
        tile[t] = a[i] if i in a else 0.0
        v = tile[(t + 1) % 64]
    if i in c:
        c[i] = v
"""


def test_refused_nested_declaration_has_no_races() -> None:
    refused = [d.code for d in check_source(SRC.replace("ELEM", "str"), "k.py")]
    assert "az-type" in refused and "az-shared-race" not in refused
    accepted = [(d.code, d.span.line) for d in check_source(SRC.replace("ELEM", "f32"), "k.py")]
    assert ("az-shared-race", 14) in accepted  # the same race is reported when the declaration stands
