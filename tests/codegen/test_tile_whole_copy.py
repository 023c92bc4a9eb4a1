"""`ANODIZE_TILE_WHOLE_TILE` (codegen/tile/staging.py `_Operand.copy(..., whole=True)`): a tile
wholly inside its slice is copied as whole 16-byte chunks, each global address the last one's
plus a constant, with no per-chunk test.  Checked on the host: the copy is built as LLVM IR by
the compiler's own `_Operand` with the thread index an argument and each cp.async recording its
(shared address, global address, bytes) into an array, then run for every thread of the block
over origins inside, across and outside the slice's edges: the whole-tile copy records exactly
what the per-chunk copy records (so the bytes copied are the same), and for the origins inside
takes its own path."""

from __future__ import annotations

import ctypes
import itertools
from collections.abc import Callable
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as ir
import pytest

from anodize.codegen.tensorcore import inline_ptx
from anodize.codegen.tile import staging

I32, I64 = ir.IntType(32), ir.IntType(64)
THREADS = 128


def _build(rows: int, cols: int, whole: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Callable[..., int], int, Any]:
    """The copy of a (rows, cols) f16 tile as a host function (tid, g, ld, r0, c0, rlim, clim,
    sbase, out*) -> paths taken (1: whole-tile), recording copy i at out[3 i: 3 i + 3]."""
    n = rows * (cols // 8) // THREADS
    mod = ir.Module(name=f"copy_{rows}_{cols}_{int(whole)}")
    mod.triple = llvm.get_process_triple()
    fn = ir.Function(mod, ir.FunctionType(I32, [I32, I64, I64, I32, I32, I32, I32, I32, I64.as_pointer()]), "copy")
    tid, g, ld, r0, c0, rlim, clim, sbase, out = fn.args
    b = ir.IRBuilder(fn.append_basic_block())
    flag = b.alloca(I32)
    b.store(ir.Constant(I32, 0), flag)
    count = itertools.count()

    def record(bb: ir.IRBuilder, dst: ir.Value, src: ir.Value, nbytes: ir.Value) -> None:
        k = next(count) % n  # (each path issues its n copies in order)
        for j, v in enumerate((bb.zext(dst, I64), src, bb.zext(nbytes, I64))):
            bb.store(v, bb.gep(out, [ir.Constant(I32, 3 * k + j)]))

    def whole_copy(bb: ir.IRBuilder, dst: ir.Value, imm: int, src: ir.Value) -> None:
        bb.store(ir.Constant(I32, 1), flag)
        record(bb, bb.add(dst, ir.Constant(I32, imm)), src, ir.Constant(I32, 16))

    monkeypatch.setattr(inline_ptx, "sreg", lambda bb, name: tid)
    monkeypatch.setattr(inline_ptx, "cp_async_16", record)
    monkeypatch.setattr(inline_ptx, "cp_async_16_at", whole_copy)
    op = staging._Operand(b, THREADS, (rows, cols), g, ld, [r0, c0], [rlim, clim], 0, rlim)
    op.copy(sbase, ir.Constant(I32, 0), True, whole)
    b.ret(b.load(flag))
    eng = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), llvm.Target.from_default_triple().create_target_machine())
    eng.finalize_object()
    sig = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, *[ctypes.c_int32] * 5,
                           ctypes.POINTER(ctypes.c_int64))
    return sig(eng.get_function_address("copy")), n, eng


@pytest.mark.parametrize("rows,cols", [(64, 64), (64, 128), (128, 32), (64, 16)])
def test_whole_tile_copy_records_what_the_chunk_copy_records(rows: int, cols: int, monkeypatch: pytest.MonkeyPatch) -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    fast, n, keep1 = _build(rows, cols, True, monkeypatch)
    slow, _, keep2 = _build(rows, cols, False, monkeypatch)
    rlim, clim, ld, g = 200, 136, 136, 1 << 20
    taken = 0
    for r0, c0 in itertools.product((-8, 0, 64, 136, 200 - rows, 200 - rows + 1, 300), (-8, 0, 8, clim - cols, clim - cols + 8)):
        inside = r0 >= 0 and r0 + rows <= rlim and c0 >= 0 and c0 + cols <= clim
        for tid in range(THREADS):
            a, z = (ctypes.c_int64 * (3 * n))(), (ctypes.c_int64 * (3 * n))()
            path = fast(tid, g, ld, r0, c0, rlim, clim, 4096, a)
            assert slow(tid, g, ld, r0, c0, rlim, clim, 4096, z) == 0
            assert path == int(inside), (r0, c0, tid)
            assert list(a) == list(z), (r0, c0, tid)
            taken += path
    assert taken > 0
    del keep1, keep2
