"""Lowering of safe shared memory's own operations (the `Lowerer`'s hooks).

* `thread.index_in_block()`: `tid.x + ntid.x * (tid.y + ntid.y * tid.z)` (i64);
  `thread.index_in_block_2d()`: `(tid.y, tid.x)`, and where the typer could not fix
  block z = 1 (`site` >= 0) a fault when `ntid.z != 1` and a poisoned witness (every
  access through it is out of bounds: fail closed).
* A block-shared atomic (`az.shared.atomic_array`): the element's address in shared
  memory (addrspace 3 on the GPU; the block's host buffer on the CPU backend), bounds
  checked like every shared access, then the `AtomicSlice` operation.  Relaxed
  block- or device-scoped read-modify-writes are LLVM's own `atomicrmw` (NVPTX emits
  `atom.shared.<op>`); stronger orderings and the system scope go through the target's
  `atomic_rmw` (inline PTX `atom.<sem>.<scope>.shared` on the GPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language import ir
from .effects import atomic_at, rmw_op
from .registry import lowers
from .types import I64T, WITNESS_LL, reg_type

if TYPE_CHECKING:
    from .lower import Lowerer



def lower_local_witness(lw: Lowerer, e: ir.MakeWitness) -> llir.Value:
    b = lw.b
    tx, ty, tz = (lw.sreg64("tid", a) for a in "xyz")
    if e.rank == 1:
        nx, ny = lw.sreg64("ntid", "x"), lw.sreg64("ntid", "y")
        return b.add(tx, b.mul(nx, b.add(ty, b.mul(ny, tz))))
    v = b.insert_value(b.insert_value(llir.Constant(WITNESS_LL[2], None), ty, 0), tx, 1)
    if e.site < 0:
        return v
    nz = lw.sreg64("ntid", "z")
    ok = b.icmp_unsigned("==", nz, llir.Constant(I64T, 1))
    with b.if_then(b.not_(ok), likely=False):
        lw.fault(e.site, nz, llir.Constant(I64T, 1))
    poison = llir.Constant(I64T, -1)
    return b.select(ok, v, llir.Constant(WITNESS_LL[2], [poison, poison]))


@lowers(ir.SharedAtomic)
def lower_shared_atomic(lw: Lowerer, e: ir.SharedAtomic) -> llir.Value | None:
    elem = e.array.ty.elem
    expected = lw.expr(e.expected) if e.expected is not None else None
    val = lw.expr(e.value) if e.value is not None else None
    ok, ptr, fidx, flen = lw.bounds.shared_address(e.array, e.index)

    def rmw() -> llir.Value:
        assert val is not None
        if e.order == "relaxed" and e.scope in ("block", "device"):
            # shared memory is the block's: LLVM's relaxed atomicrmw is `atom.shared.<op>`
            return lw.b.atomic_rmw(rmw_op(e.op, elem), ptr, val, "monotonic")
        return lw.t.atomic_rmw(lw, e.op, ptr, val, elem, e.scope, e.order)  # type: ignore[no-any-return]

    def act() -> llir.Value | None:
        return atomic_at(lw, e, ptr, val, expected, elem, rmw)

    result = None if e.op == "store" else reg_type(elem)
    return lw.bounds.guarded(e.checked, ok, e.site, fidx, flen, act, result)


__all__ = ["lower_local_witness", "lower_shared_atomic"]
