"""Lowering of statements (a collaborator of `lower.Lowerer`, `lw.statements`): assignments, `if`, loops,
`break`/`continue`/`return`, barriers and fences, writes (their bounds checks: bounds.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import ScalarTy
from .record_align import field_align
from .registry import handles, part
from .types import I1, I8, _align, reg_type

if TYPE_CHECKING:
    from .lower import Lowerer


def step_latch(b: llir.IRBuilder, counter: llir.Value, lt: llir.Type, pos: llir.Value, stop: llir.Value, step: llir.Value,
               body: llir.Block, nxt: llir.Block, end: llir.Block) -> None:
    """The latch of a counted loop (`for i in range(start, stop, step)`; the builder at it, `pos`:
    the step is positive), with an overflow-safe exit test: leave for `end` when the distance
    left to `stop` is at most one step, else step the counter (in `nxt`) and go back to `body`.
    The builder ends at `end`.  `s_ForRange` and the CPU backend's split loops (cpu/regions.py) share it."""
    cur = b.load(counter, typ=lt)
    diff = b.select(pos, b.sub(stop, cur), b.sub(cur, stop))
    mag = b.select(pos, step, b.sub(llir.Constant(lt, 0), step))
    b.cbranch(b.icmp_unsigned("<=", diff, mag), end, nxt)
    b.position_at_end(nxt)
    b.store(b.add(cur, step), counter)
    b.branch(body)
    b.position_at_end(end)


@part("statements")
class StmtLowering:
    """The statements of the lowering."""

    def __init__(self, lw: Lowerer) -> None:
        self.lw = lw

    @handles(ir.Assign)
    def s_Assign(self, s: ir.Assign) -> None:
        slot, ty = self.lw.frame.vars[s.name]
        self.lw.b.store(self.lw.conv(self.lw.expr(s.value), s.value.ty, ty), slot)

    @handles(ir.ExprStmt)
    def s_ExprStmt(self, s: ir.ExprStmt) -> None:
        self.lw.expr(s.value)

    @handles(ir.If)
    def s_If(self, s: ir.If) -> None:
        cond = self.lw.expr(s.cond)
        then = self.lw.fn.append_basic_block("if.then")
        orelse = self.lw.fn.append_basic_block("if.else") if s.orelse else None
        merge = self.lw.fn.append_basic_block("if.end")
        self.lw.b.cbranch(cond, then, orelse or merge)
        self.lw.b.position_at_end(then)
        self.lw.stmts(s.body)
        if not self.lw.b.block.is_terminated:
            self.lw.b.branch(merge)
        if orelse is not None:
            self.lw.b.position_at_end(orelse)
            self.lw.stmts(s.orelse)
            if not self.lw.b.block.is_terminated:
                self.lw.b.branch(merge)
        self.lw.b.position_at_end(merge)

    @handles(ir.While)
    def s_While(self, s: ir.While) -> None:
        head = self.lw.fn.append_basic_block("while.cond")
        body = self.lw.fn.append_basic_block("while.body")
        end = self.lw.fn.append_basic_block("while.end")
        self.lw.b.branch(head)
        self.lw.b.position_at_end(head)
        self.lw.b.cbranch(self.lw.expr(s.cond), body, end)
        self.lw.b.position_at_end(body)
        self.lw.frame.loops.append((head, end))
        self.lw.stmts(s.body)
        self.lw.frame.loops.pop()
        if not self.lw.b.block.is_terminated:
            self.lw.b.branch(head)
        self.lw.b.position_at_end(end)

    @handles(ir.ForRange)
    def s_ForRange(self, s: ir.ForRange) -> None:
        if self.lw.locals.unrolled_for(s):  # locals.py: short constant loops of kernels with local arrays
            return
        b = self.lw.b
        slot, ty = self.lw.frame.vars[s.var]
        assert isinstance(ty, ScalarTy)
        lt = reg_type(ty)
        start = self.lw.conv(self.lw.expr(s.start), s.start.ty, ty)
        stop = self.lw.conv(self.lw.expr(s.stop), s.stop.ty, ty)
        step = self.lw.conv(self.lw.expr(s.step), s.step.ty, ty)
        zero = llir.Constant(lt, 0)
        counter = self.lw.alloca(lt, f"{s.var}.counter")
        b.store(start, counter)
        if ty.signed:
            pos = b.icmp_signed(">", step, zero)
            up = b.icmp_signed("<", start, stop)
            down = b.icmp_signed(">", start, stop)
        else:
            pos = llir.Constant(I1, 1)
            up = b.icmp_unsigned("<", start, stop)
            down = llir.Constant(I1, 0)
        nonzero = b.icmp_unsigned("!=", step, zero)
        enter = b.and_(b.select(pos, up, down), nonzero)
        body = self.lw.fn.append_basic_block("for.body")
        latch = self.lw.fn.append_basic_block("for.latch")
        nxt = self.lw.fn.append_basic_block("for.next")
        end = self.lw.fn.append_basic_block("for.end")
        b.cbranch(enter, body, end)
        b.position_at_end(body)
        b.store(b.load(counter, typ=lt), slot)
        self.lw.frame.loops.append((latch, end))
        self.lw.stmts(s.body)
        self.lw.frame.loops.pop()
        if not self.lw.b.block.is_terminated:
            self.lw.b.branch(latch)
        b.position_at_end(latch)
        step_latch(b, counter, lt, pos, stop, step, body, nxt, end)

    @handles(ir.Break)
    def s_Break(self, s: ir.Break) -> None:
        self.lw.b.branch(self.lw.frame.loops[-1][1])

    @handles(ir.Continue)
    def s_Continue(self, s: ir.Continue) -> None:
        self.lw.b.branch(self.lw.frame.loops[-1][0])

    @handles(ir.Return)
    def s_Return(self, s: ir.Return) -> None:
        if s.value is not None and self.lw.frame.ret_slot is not None:
            self.lw.b.store(self.lw.expr(s.value), self.lw.frame.ret_slot)
        assert self.lw.frame.exit is not None
        self.lw.b.branch(self.lw.frame.exit)

    @handles(ir.Barrier)
    def s_Barrier(self, s: ir.Barrier) -> None:
        if s.grid:
            self.lw.t.grid_barrier(self.lw, s.span)
        else:
            self.lw.t.barrier(self.lw, s.span)

    @handles(ir.Fence)
    def s_Fence(self, s: ir.Fence) -> None:
        self.lw.t.fence(self.lw, s.kind, s.span)

    @handles(ir.Breakpoint)
    def s_Breakpoint(self, s: ir.Breakpoint) -> None:
        """`breakpoint()` stops only on the debug device (codegen/debug/interp.py); nothing here."""

    @handles(ir.SharedDecl)
    def s_SharedDecl(self, s: ir.SharedDecl) -> None:
        if s.name not in self.lw.shared_gv:
            self.lw.shared_gv[s.name] = self.lw.t.shared_global(self.lw, s.name, s.ty, s.span)

    @handles(ir.Write)
    def s_Write(self, s: ir.Write) -> None:
        sv = self.lw.frame.slices[s.slice.name]
        value = self.lw.expr(s.value)
        if self.lw.lanes is not None and self.lw.lanes.write(self.lw, s, value):  # a lane's element: stored later
            return
        ok, ptr, fidx, flen = self.lw.bounds.address(sv, s.index, s.offset)
        elem = s.value.ty if not isinstance(sv.ty.elem, ScalarTy) else sv.ty.elem  # a record's field: the value's type
        stored = self.lw.b.zext(value, I8) if elem.is_bool else value
        align = field_align(sv, s.offset, _align(elem))
        self.lw.bounds.guarded(s.checked, ok, s.site, fidx, flen, lambda: self.lw.b.store(stored, ptr, align=align), None)

    @handles(ir.SharedWrite)
    def s_SharedWrite(self, s: ir.SharedWrite) -> None:
        value = self.lw.expr(s.value)
        ok, ptr, fidx, flen = self.lw.bounds.shared_address(s.array, s.index)
        elem = s.array.ty.elem
        stored = self.lw.b.zext(value, I8) if elem.is_bool else value
        self.lw.bounds.guarded(s.checked, ok, s.site, fidx, flen, lambda: self.lw.b.store(stored, ptr, align=_align(elem)), None)
