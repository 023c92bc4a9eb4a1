"""The tensor-core operand staging (codegen/tile/staging.py) for rows of any number of 16-byte
chunks: a K of 48 or 96 elements (6 or 12 chunks, a multiple of 16 that the plan accepts) took
each chunk's row and column by a shift and a mask (`idx >> 2`, `idx & 5`: chunks copied twice,
others never) and swizzled chunks past the row's end (`c ^ (row & 7)` for c >= 8 of 12): the
ldmatrix reads then met stale shared memory.  Run with a builder over Python integers."""

from __future__ import annotations

import re
from typing import Any

import llvmlite.ir as llir
import pytest

from anodize.codegen.tile import staging
from anodize.codegen.tile.staging import _Operand, _rowmajor


class IntBuilder:
    """The llvmlite builder calls the staging makes, on Python integers (constants unwrapped)."""

    def __getattr__(self, name: str) -> Any:
        ops = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y, "xor": lambda x, y: x ^ y,
               "lshr": lambda x, y: x >> y, "shl": lambda x, y: x << y, "and_": lambda x, y: x & y, "or_": lambda x, y: x | y,
               "udiv": lambda x, y: x // y, "urem": lambda x, y: x % y}
        if name in ops:
            return lambda x, y: ops[name](_v(x), _v(y))
        if name in ("sext", "zext", "trunc"):
            return lambda x, ty: _v(x)
        if name == "select":
            return lambda c, x, y: _v(x) if _v(c) else _v(y)
        if name == "icmp_signed":
            return lambda op, x, y: int(eval(f"{_v(x)} {op} {_v(y)}"))
        raise AttributeError(name)


def _v(x: Any) -> int:
    return int(x.constant) if isinstance(x, llir.Constant) else int(x)


@pytest.mark.parametrize("rows,cols", [(64, 48), (64, 96), (64, 80), (64, 64), (128, 32), (128, 112)])
def test_every_chunk_is_copied_once_to_where_ldmatrix_reads_it(rows: int, cols: int, monkeypatch: pytest.MonkeyPatch) -> None:
    threads = 128
    cpr = cols // 8
    ld = 1000
    writes: dict[int, int] = {}

    def cp_async_16(b: Any, dst: Any, src: Any, nb: Any) -> None:
        assert _v(dst) not in writes, "two chunks copied to one place"
        writes[_v(dst)] = _v(src)

    monkeypatch.setattr(staging.P, "cp_async_16", cp_async_16)
    b = IntBuilder()
    op = _Operand.__new__(_Operand)
    op.b, op.threads, op.shape, op.g, op.ld, op.kax = b, threads, (rows, cols), 0, ld, 1
    op.origin, op.lims = [0, 0], [rows, cols]
    op.blocked, op.a_rows = False, 0  # (the row-major layout ldmatrix reads)
    assert rows * cpr % threads == 0  # (the plan's `_splits`)
    for tid in range(threads):
        op.tid = tid
        op._copy_chunks(0, 0, 0, True)
    assert len(writes) == rows * cpr
    for r in range(rows):
        for c in range(cpr):
            at = _v(_rowmajor(b, r, c, cpr))  # where ldmatrix reads logical chunk (r, c)
            assert r * cols * 2 <= at < (r + 1) * cols * 2, (r, c, at)
            assert writes.get(at) == 2 * (r * ld + 8 * c), (r, c)


def test_a_k_step_of_48_stages_its_rows_by_quotient_on_mma_sync() -> None:
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    import tile_mma_cases as C
    from tile_cases import kernel_ir

    from anodize.codegen.driver import compile_gpu

    ptx = compile_gpu(kernel_ir(C.source("canonical", 64, 64, 48, 4, "f16"), "k"), "sm_80").ptx
    assert "mma.sync.aligned.m16n8k16" in ptx
    assert not re.search(r"and\.b32\s+%r\d+, %r\d+, 5;", ptx)  # (the old `idx & (6 - 1)`)
