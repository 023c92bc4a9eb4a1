"""Lowering of calls (a collaborator of `lower.Lowerer`, `lw.calls`): atomics (8/16-bit ones
by compare-and-swap; the others in effects.py), math functions, collectives and warp operations, and
calls of helpers (inlined, with their own frame)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import F32, I64, LocalArrayTy, ScalarTy, SliceTy, TupleTy, WitnessTy

from . import halves

from .collectives import lower_collective
from .effects import lower_atomic
from .registry import handles, part
from .types import I32T, Frame, _fs, mem_type, reg_type, value_type

if TYPE_CHECKING:
    from .lower import Lowerer


@part("calls")
class CallLowering:
    """The calls, math functions and atomics of the lowering."""

    def __init__(self, lw: Lowerer) -> None:
        self.lw = lw

    @handles(ir.Atomic)
    def e_Atomic(self, e: ir.Atomic) -> llir.Value | None:
        ty = e.ty
        if isinstance(ty, ScalarTy) and ty.info.mem_bits < 32:  # 8- and 16-bit elements (relaxed, device)
            return self.narrow_atomic(e, ty)
        return lower_atomic(self.lw, e)

    def narrow_atomic(self, e: ir.Atomic, ty: ScalarTy) -> llir.Value:
        """An atomic on an 8- or 16-bit element: a half type's add/min/max is a compare-and-swap
        loop over its bits (f16 add native on the GPU); ints use LLVM's own expansion."""
        sv = self.lw.frame.slices[e.slice.name]
        idx = self.lw.conv(self.lw.expr(e.index), e.index.ty, I64)
        assert e.value is not None
        val = self.lw.expr(e.value)
        ok, ptr, fidx, flen = self.lw.bounds.addr_dims(sv.ptr, mem_type(ty), list(sv.dims), [idx])
        if ty.is_half and e.op != "exchange":
            v = self.lw.bounds.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.half_atomic(e.op, ptr, val, ty), reg_type(ty))
            assert v is not None
            return v
        if e.op == "exchange":
            op = "xchg"
        else:
            op = {"add": "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor",
                  "min": "min" if ty.signed else "umin", "max": "max" if ty.signed else "umax"}[e.op]
        v = self.lw.bounds.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.lw.b.atomic_rmw(op, ptr, val, "monotonic"), reg_type(ty))
        assert v is not None
        return v

    def half_atomic(self, op: str, ptr: llir.Value, val: llir.Value, ty: ScalarTy) -> llir.Value:
        """`add`/`min`/`max` on an f16/bf16 element: a compare-and-swap loop on its 16 bits,
        the same on every target (the new value is computed in f32 and rounded)."""
        b = self.lw.b
        if op == "add" and ty.name == "f16" and self.lw.t.native_half_atomic_add:  # atom.add.noftz.f16 (sm_70+)
            h = llir.HalfType()
            return b.bitcast(b.atomic_rmw("fadd", ptr, b.bitcast(val, h), "monotonic"), halves.I16)
        pre = b.block
        first = b.load(ptr, typ=halves.I16, align=2)
        loop = self.lw.fn.append_basic_block("half_atomic.loop")
        done = self.lw.fn.append_basic_block("half_atomic.done")
        b.branch(loop)
        b.position_at_end(loop)
        old = b.phi(halves.I16)
        old.add_incoming(first, pre)
        wide = self.lw.expressions.float_binop({"add": "+", "min": "min", "max": "max"}[op], self.lw.widen(old, ty)[0], self.lw.widen(val, ty)[0], F32)
        pair = b.cmpxchg(ptr, old, self.lw.narrow(wide, ty), "monotonic", "monotonic")
        seen = b.extract_value(pair, 0)
        old.add_incoming(seen, b.block)
        b.cbranch(b.extract_value(pair, 1), done, loop)
        b.position_at_end(done)
        return seen

    @handles(ir.ForeignCall)
    def e_ForeignCall(self, e: ir.ForeignCall) -> llir.Value:
        """A foreign device function: the target's call of it (the CPU refuses it, located)."""
        return self.lw.t.foreign_call(self.lw, e, [self.lw.expr(a) for a in e.args])

    @handles(ir.MathCall)
    def e_MathCall(self, e: ir.MathCall) -> llir.Value:
        """Classification is an `fcmp` on every backend; `ldexp`'s exponent becomes a
        saturated i32; the rest is the target's (libdevice / LLVM intrinsic / libm)."""
        args = [self.lw.expr(a) for a in e.args]
        x_ty = e.args[0].ty
        assert isinstance(x_ty, ScalarTy)
        if x_ty.is_half:  # f32's function on the widened values, rounded back once
            args = [self.lw.widen(a, t)[0] if isinstance(t, ScalarTy) and t.is_half else a
                    for a, t in zip(args, (x.ty for x in e.args), strict=True)]
            x_ty = F32
        b = self.lw.b
        if e.name == "isnan":
            return b.fcmp_unordered("uno", args[0], args[0])
        if e.name in ("isinf", "isfinite"):
            mag = self.lw.intrinsic(f"llvm.fabs.{_fs(x_ty)}", args[0].type, [args[0]])
            inf = llir.Constant(args[0].type, float("inf"))
            return b.fcmp_ordered("==" if e.name == "isinf" else "!=", mag, inf)  # `one`: false for NaN
        if e.name == "ldexp":
            args[1] = self.exponent_i32(args[1], e.args[1].ty)  # type: ignore[arg-type]
        out = self.lw.t.math(self.lw, e.name, args, x_ty)
        return self.lw.narrow(out, e.ty) if isinstance(e.ty, ScalarTy) and e.ty.is_half else out

    def exponent_i32(self, n: llir.Value, ty: ScalarTy) -> llir.Value:
        """An integer exponent as i32, clamped to +-4096 (beyond it every ldexp saturates
        to 0 or inf, so the result is Python's for any exponent of any width)."""
        b = self.lw.b
        lim = 4096
        if ty.bits > 32 or not ty.signed:
            w = llir.IntType(max(ty.bits, 33))
            n = (b.sext if ty.signed else b.zext)(n, w) if ty.bits < w.width else n
            hi = llir.Constant(w, lim)
            n = b.select(b.icmp_signed(">", n, hi) if ty.signed else b.icmp_unsigned(">", n, hi), hi, n)
            if ty.signed:
                lo = llir.Constant(w, -lim)
                n = b.select(b.icmp_signed("<", n, lo), lo, n)
            return b.trunc(n, I32T)
        return n if ty.bits == 32 else b.sext(n, I32T)

    @handles(ir.Collective)
    def e_Collective(self, e: ir.Collective) -> llir.Value:
        return lower_collective(self.lw, e)

    @handles(ir.WarpOp)
    def e_WarpOp(self, e: ir.WarpOp) -> llir.Value:
        args = [self.lw.expr(a) for a in e.args]
        return self.lw.t.warp(self.lw, e.op, args, e.ty, e.span)

    @handles(ir.Call)
    def e_Call(self, e: ir.Call) -> llir.Value | None:
        f = e.func
        caller = self.lw.frame
        frame = Frame()
        for (pname, pty), arg in zip(f.params, e.args, strict=True):
            if isinstance(pty, SliceTy):
                assert isinstance(arg, ir.SliceRef)
                frame.slices[pname] = caller.slices[arg.name]
            elif isinstance(pty, LocalArrayTy):  # by reference: the caller's array
                assert isinstance(arg, ir.LocalArrayRef)
                frame.vars[pname] = caller.vars[arg.name]
            else:
                slot = self.lw.alloca(value_type(pty), f"{f.name}.{pname}")
                self.lw.b.store(self.lw.conv(self.lw.expr(arg), arg.ty, pty), slot)
                frame.vars[pname] = (slot, pty)
        for name, ty in f.locals:
            if name not in frame.vars:
                frame.vars[name] = (self.lw.alloca(value_type(ty), f"{f.name}.{name}"), ty)
        frame.exit = self.lw.fn.append_basic_block(f"{f.name}.exit")
        if isinstance(f.ret, (ScalarTy, WitnessTy, TupleTy)):
            frame.ret_slot = self.lw.alloca(value_type(f.ret), f"{f.name}.ret")
        self.lw.frame = frame
        try:
            self.lw.stmts(f.body)
            if not self.lw.b.block.is_terminated:
                self.lw.b.branch(frame.exit)
            self.lw.b.position_at_end(frame.exit)
        finally:
            self.lw.frame = caller
        if frame.ret_slot is not None:
            return self.lw.b.load(frame.ret_slot, typ=value_type(f.ret))
        return None
