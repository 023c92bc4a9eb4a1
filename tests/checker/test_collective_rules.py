"""The checker (and the typer behind it) on collectives and block witnesses: what is
accepted, what is refused, with which code and where."""

from __future__ import annotations

import textwrap

import pytest

from anodize.checker.api import check_source

HEAD = """
import anodize as az
from anodize import BlockWitness1D, DisjointSlice, Slice, bool_, f32, i32, kernel, launch_contract, thread
"""


def _errors(body: str) -> list[tuple[str, int, str]]:
    src = HEAD + textwrap.dedent(body)
    return [(d.code, d.span.line - HEAD.count("\n"), d.message) for d in check_source(src, "k.py") if d.severity == "error"]


def _codes(body: str) -> list[tuple[str, int]]:
    return [(c, line) for c, line, _ in _errors(body)]


KERNEL = """
@launch_contract(domain=1, block=128)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    v = a[i] if i in a else f32(0.0)
{body}
    if i in c:
        c[i] = v
"""


def _in_kernel(body: str) -> str:
    return KERNEL.format(body=textwrap.indent(textwrap.dedent(body), "    "))


# line numbers below count from the first line of KERNEL's body (line 7 of KERNEL)
def _body_codes(body: str) -> list[tuple[str, int]]:
    return [(c, line - 6) for c, line in _codes(_in_kernel(body))]


@pytest.mark.parametrize(
    "body",
    [
        'v = az.block.scan(v, "min", inclusive=True)',
        'while n > 0:\n    v = az.block.reduce(v, "sum")\n    n = az.block.broadcast(n - 1, 0)',
        'm = az.block.reduce(v, "max")\nif m > 2.0:\n    with az.unsafe():\n        az.syncthreads()',
        'f = az.block.reduce(v > 1.0, "and")\ng = az.warp.reduce(v > 1.0, "or")',
        'with az.unsafe():\n    if thread.tid_x() >> 5 == 1:\n        v = az.warp.reduce(v, "sum")',
        'w = az.warp.reduce(v, "max")\nif w > 1.0:\n    v = az.warp.reduce(v, "min")',
    ],
)
def test_accepted(body: str) -> None:
    assert _body_codes(body) == []


@pytest.mark.parametrize(
    "body,want",
    [
        ('v = az.block.scan(v, "sum", inclusive=n > 0)', [("az-type", 1)]),
        ('v = az.block.reduce(v, "sum", axis=0)', [("az-unsupported", 1)]),
        ('b = az.block.reduce(v > 0.0, "sum")', [("az-type", 1)]),
        ('v = az.block.broadcast(v, 128)', [("az-type", 1)]),
        ('v = az.block.reduce(v, "sum") if n > 0 else v', [("az-type", 1)]),
        ('v += az.warp.reduce(v, "sum")', [("az-type", 1)]),
        ('for j in range(i.get() % 3):\n    v = az.block.reduce(v, "sum")', [("az-barrier-divergence", 2)]),
        ('s = az.block.scan(v, "sum")\nif s > 3.0:\n    v = az.block.reduce(v, "sum")', [("az-barrier-divergence", 3)]),
        ('w = az.warp.reduce(v, "max")\nif w > 1.0:\n    v = az.block.reduce(v, "min")', [("az-barrier-divergence", 3)]),
        ('if v > 1.0:\n    v = az.warp.reduce(v, "sum")', [("az-warp-divergence", 2)]),
    ],
)
def test_refused(body: str, want: list[tuple[str, int]]) -> None:
    assert _body_codes(body) == want


def test_block_witness_in_a_helper_needs_its_own_leader_test() -> None:
    src = """
    @az.func
    def put(p: DisjointSlice[f32], b: BlockWitness1D, v: f32) -> None:
        p[b] = v

    @az.func
    def put_leader(p: DisjointSlice[f32], b: BlockWitness1D, v: f32) -> None:
        if thread.is_block_leader():
            p[b] = v

    @launch_contract(domain=1, block=128)
    @kernel
    def k(p: DisjointSlice[f32], q: DisjointSlice[f32]) -> None:
        b = thread.block_witness_1d()
        if thread.is_block_leader():
            put(p, b, 1.0)
        put_leader(q, b, 2.0)
    """
    errs = _errors(src)
    assert [(c, line) for c, line, _ in errs] == [("az-disjoint-index", 4)]


def test_block_witness_is_not_an_index1d() -> None:
    src = """
    @az.func
    def put(p: DisjointSlice[f32], i: az.Index1D) -> None:
        if i in p:
            p[i] = 1.0

    @launch_contract(domain=1, block=128)
    @kernel
    def k(p: DisjointSlice[f32]) -> None:
        b = thread.block_witness_1d()
        put(p, b)
    """
    assert [c for c, _, _ in _errors(src)] == ["az-type"]


def test_else_branch_of_the_leader_test_is_not_the_leader() -> None:
    src = """
    @launch_contract(domain=1, block=128)
    @kernel
    def k(p: DisjointSlice[f32]) -> None:
        b = thread.block_witness_1d()
        if not thread.is_block_leader():
            pass
        else:
            p[b] = 1.0
        if thread.is_block_leader() or b in p:
            p[b] = 2.0
    """
    assert [(c, line) for c, line, _ in _errors(src)] == [("az-disjoint-index", 9), ("az-disjoint-index", 11)]


def test_block_witness_needs_a_1d_domain() -> None:
    src = """
    @launch_contract(domain=2, block=(32, 4))
    @kernel
    def k(p: DisjointSlice[f32]) -> None:
        b = thread.block_witness_1d()
        if thread.is_block_leader():
            p[b] = 1.0
    """
    assert "az-index-domain" in [c for c, _, _ in _errors(src)]


def test_messages_name_the_call_and_the_fix() -> None:
    errs = _errors(_in_kernel('v = 2.0 * az.block.reduce(v, "sum")'))
    assert "`az.block.reduce` must be the whole value of an assignment" in errs[0][2]
    errs = _errors(_in_kernel('if thread.is_block_leader():\n    v = az.block.reduce(v, "sum")'))
    assert errs[0][0] == "az-barrier-divergence" and "`az.block.reduce` (a block collective)" in errs[0][2]


def test_a_block_witness_cannot_become_a_thread_witness() -> None:
    src = """
    @launch_contract(domain=1, block=128)
    @kernel
    def k(p: DisjointSlice[f32], n: i32) -> None:
        i: az.Index1D = thread.block_witness_1d()
        j = thread.index_1d()
        if n > 0:
            j = thread.block_witness_1d()
        k2 = thread.index_1d() if n > 0 else thread.block_witness_1d()  # a plain int
        if thread.is_block_leader():
            p[k2] = 1.0
    """
    assert _codes(src) == [("az-type", 5), ("az-type", 8), ("az-disjoint-index", 11)]
