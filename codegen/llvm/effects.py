"""Lowering of atomics, `print` and `assert` (the `Lowerer`'s `e_Atomic`, `s_Print`, `s_Assert`).

Atomics become LLVM `atomicrmw` / `cmpxchg` / atomic `load` / `store` with the
operation's ordering (`relaxed` is LLVM's `monotonic`) and, where the target names
them, its sync scope (`Target.sync_scope`).  A read-modify-write goes through
`Target.atomic_rmw`, so a backend whose LLVM drops the ordering can emit its own
instruction (NVPTX: codegen/gpu/ptx.py).

`print(...)` builds a printf format (`%lld` for signed integers, `%llu` for unsigned
ones, `%g` for floats, `True`/`False` for bools, the string literals as they are,
separated by spaces and ended by a newline) and a packed argument buffer of 8-byte
slots (CUDA's `vprintf` convention: i64, double or a string pointer each), and hands
both to `Target.emit_print`.

`assert` records a fault at its site when the condition is false; the thread goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import I64, ScalarTy

from .registry import lowers
from .types import DOUBLE, I8, I32T, I64T, mem_type, reg_type

if TYPE_CHECKING:
    from .lower import Lowerer

_FAIL_ORDER = {"acq_rel": "acquire", "release": "monotonic"}


def llvm_order(order: str) -> str:
    return "monotonic" if order == "relaxed" else order


def rmw_op(op: str, ty: ScalarTy) -> str:
    """The `atomicrmw` operation for an anodize atomic method on `ty`."""
    if op == "exchange":
        return "xchg"
    if ty.is_float:
        return {"add": "fadd", "sub": "fsub", "min": "fmin", "max": "fmax"}[op]
    if op in ("min", "max"):
        return op if ty.signed else "u" + op
    return op  # add, sub, and, or, xor


def lower_atomic(lw: Lowerer, e: ir.Atomic) -> llir.Value | None:
    sv = lw.frame.slices[e.slice.name]
    elem = sv.ty.elem
    idx = lw.conv(lw.expr(e.index), e.index.ty, I64)
    expected = lw.expr(e.expected) if e.expected is not None else None
    val = lw.expr(e.value) if e.value is not None else None
    ok, ptr, fidx, flen = lw.bounds.addr_dims(sv.ptr, mem_type(elem), list(sv.dims), [idx])

    def act() -> llir.Value | None:
        return atomic_at(lw, e, ptr, val, expected, elem, lambda: lw.t.atomic_rmw(lw, e.op, ptr, val, elem, e.scope, e.order))

    return lw.bounds.guarded(e.checked, ok, e.site, fidx, flen, act, None if e.op == "store" else reg_type(elem))


def atomic_at(lw: Lowerer, e: Any, ptr: llir.Value, val: llir.Value | None, expected: llir.Value | None,
              elem: Any, rmw: Callable[[], llir.Value]) -> llir.Value | None:
    """The atomic `e.op` at `ptr` (global or shared): load, store and compare-exchange here,
    read-modify-write through `rmw`, each with `e.scope` and `e.order`."""
    b = lw.b
    sem = lw.t.sync_scope(e.scope) + llvm_order(e.order)
    align = elem.info.mem_bits // 8
    if e.op == "load":
        return b.load_atomic(ptr, sem, align, typ=reg_type(elem))
    if e.op == "store":
        # IRBuilder.store_atomic wants a typed pointer; build the instruction itself
        b._insert(llir.instructions.StoreAtomicInstr(b.block, val, ptr, sem, align))
        return None
    if e.op == "compare_exchange":
        order = llvm_order(e.order)
        pair = b.cmpxchg(ptr, expected, val, sem, _FAIL_ORDER.get(order, order))
        return b.extract_value(pair, 0)
    return rmw()


def printf_format(parts: tuple[str | ir.Expr, ...]) -> str:
    """The printf format of a `print`: what the GPU's `vprintf` and the CPU backend read."""
    out: list[str] = []
    for p in parts:
        if isinstance(p, str):
            out.append(p.replace("%", "%%").replace("\0", "\\0"))
        else:
            ty = p.ty
            assert isinstance(ty, ScalarTy)
            out.append("%s" if ty.is_bool else "%g" if ty.is_float else "%lld" if ty.signed else "%llu")
    return " ".join(out) + "\n"


@lowers(ir.Print)
def lower_print(lw: Lowerer, s: ir.Print) -> None:
    b = lw.b
    values = [p for p in s.parts if not isinstance(p, str)]
    fmt = lw.t.cstring(lw, printf_format(s.parts))
    if not values:
        lw.t.emit_print(lw, fmt, llir.Constant(llir.PointerType(), None))
        return
    buf = lw.alloca_b.alloca(I64T, size=llir.Constant(I32T, len(values)), name="print.args")
    buf.align = 8
    for i, p in enumerate(values):
        ty = p.ty
        assert isinstance(ty, ScalarTy)
        v = lw.expr(p)
        if ty.is_bool:
            v = b.ptrtoint(b.select(v, lw.t.cstring(lw, "True"), lw.t.cstring(lw, "False")), I64T)
        elif ty.is_float:
            v, _ = lw.widen(v, ty)  # a narrow float's bit pattern: its f32 first
            v = b.bitcast(v if ty.bits == 64 else b.fpext(v, DOUBLE), I64T)
        elif ty.bits < 64:
            v = b.sext(v, I64T) if ty.signed else b.zext(v, I64T)
        b.store(v, b.gep(buf, [llir.Constant(I64T, i)], inbounds=True, source_etype=I64T), align=8)
    lw.t.emit_print(lw, fmt, buf)


@lowers(ir.Assert)
def lower_assert(lw: Lowerer, s: ir.Assert) -> None:
    b = lw.b
    cond = lw.expr(s.cond)
    with b.if_then(b.not_(cond), likely=False):
        lw.fault(s.site, llir.Constant(I64T, 0), llir.Constant(I64T, 0))


def global_string(lw: Lowerer, text: str, addrspace: int) -> llir.Value:
    """A generic pointer to a NUL-terminated constant string of the module (one per text),
    stored in `addrspace` (cast in the entry block, so every use is dominated)."""
    cache: dict[str, llir.Value] = lw.__dict__.setdefault("_strings", {})
    ptr = cache.get(text)
    if ptr is None:
        data = bytearray(text.encode("utf-8")) + b"\0"
        arr = llir.ArrayType(I8, len(data))
        gv = llir.GlobalVariable(lw.module, arr, f"__az_str_{len(cache)}", addrspace=addrspace)
        gv.linkage = "internal"
        gv.global_constant = True
        gv.initializer = llir.Constant(arr, data)
        gv.align = 1
        gv.type = llir.PointerType(addrspace=addrspace)  # opaque, so strings of any length mix
        ptr = gv if addrspace == 0 else lw.alloca_b.addrspacecast(gv, llir.PointerType())
        cache[text] = ptr
    return ptr
