"""Lowering of statements (a mixin of `lower.Lowerer`): assignments, `if`, loops,
`break`/`continue`/`return`, barriers and fences, writes, and the bounds checks every access
goes through (`guarded`, `address`, `shared_address`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import I64, ScalarTy, WitnessTy
from .types import I1, I64T, I8, SliceVal, _align, mem_type, reg_type

if TYPE_CHECKING:
    from .lower import Lowerer as _Base
else:
    _Base = object


class StmtLowering(_Base):
    """The statements and bounds checks of the lowering."""

    # ---- statements ------------------------------------------------------------------------
    def stmts(self, body: tuple[ir.Stmt, ...]) -> None:
        for s in body:
            if self.b.block.is_terminated:
                self.b.position_at_end(self.fn.append_basic_block("dead"))
            self.locate(s.span)
            getattr(self, "s_" + type(s).__name__)(s)

    def s_Assign(self, s: ir.Assign) -> None:
        slot, ty = self.frame.vars[s.name]
        self.b.store(self.conv(self.expr(s.value), s.value.ty, ty), slot)

    def s_ExprStmt(self, s: ir.ExprStmt) -> None:
        self.expr(s.value)

    def s_If(self, s: ir.If) -> None:
        cond = self.expr(s.cond)
        then = self.fn.append_basic_block("if.then")
        orelse = self.fn.append_basic_block("if.else") if s.orelse else None
        merge = self.fn.append_basic_block("if.end")
        self.b.cbranch(cond, then, orelse or merge)
        self.b.position_at_end(then)
        self.stmts(s.body)
        if not self.b.block.is_terminated:
            self.b.branch(merge)
        if orelse is not None:
            self.b.position_at_end(orelse)
            self.stmts(s.orelse)
            if not self.b.block.is_terminated:
                self.b.branch(merge)
        self.b.position_at_end(merge)

    def s_While(self, s: ir.While) -> None:
        head = self.fn.append_basic_block("while.cond")
        body = self.fn.append_basic_block("while.body")
        end = self.fn.append_basic_block("while.end")
        self.b.branch(head)
        self.b.position_at_end(head)
        self.b.cbranch(self.expr(s.cond), body, end)
        self.b.position_at_end(body)
        self.frame.loops.append((head, end))
        self.stmts(s.body)
        self.frame.loops.pop()
        if not self.b.block.is_terminated:
            self.b.branch(head)
        self.b.position_at_end(end)

    def s_ForRange(self, s: ir.ForRange) -> None:
        if self.unrolled_for(s):  # locals.py: short constant loops of kernels with local arrays
            return
        b = self.b
        slot, ty = self.frame.vars[s.var]
        assert isinstance(ty, ScalarTy)
        lt = reg_type(ty)
        start = self.conv(self.expr(s.start), s.start.ty, ty)
        stop = self.conv(self.expr(s.stop), s.stop.ty, ty)
        step = self.conv(self.expr(s.step), s.step.ty, ty)
        zero = llir.Constant(lt, 0)
        counter = self.alloca(lt, f"{s.var}.counter")
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
        body = self.fn.append_basic_block("for.body")
        latch = self.fn.append_basic_block("for.latch")
        nxt = self.fn.append_basic_block("for.next")
        end = self.fn.append_basic_block("for.end")
        b.cbranch(enter, body, end)
        b.position_at_end(body)
        b.store(b.load(counter, typ=lt), slot)
        self.frame.loops.append((latch, end))
        self.stmts(s.body)
        self.frame.loops.pop()
        if not self.b.block.is_terminated:
            self.b.branch(latch)
        b.position_at_end(latch)
        cur = b.load(counter, typ=lt)
        # overflow-safe exit test: leave when the remaining distance is at most one step
        diff = b.select(pos, b.sub(stop, cur), b.sub(cur, stop))
        mag = b.select(pos, step, b.sub(zero, step))
        b.cbranch(b.icmp_unsigned("<=", diff, mag), end, nxt)
        b.position_at_end(nxt)
        b.store(b.add(cur, step), counter)
        b.branch(body)
        b.position_at_end(end)

    def s_GridStride(self, s: ir.GridStride) -> None:
        from .gridstride import lower

        lower(self, s)

    def s_Break(self, s: ir.Break) -> None:
        self.b.branch(self.frame.loops[-1][1])

    def s_Continue(self, s: ir.Continue) -> None:
        self.b.branch(self.frame.loops[-1][0])

    def s_Return(self, s: ir.Return) -> None:
        if s.value is not None and self.frame.ret_slot is not None:
            self.b.store(self.expr(s.value), self.frame.ret_slot)
        assert self.frame.exit is not None
        self.b.branch(self.frame.exit)

    def s_Barrier(self, s: ir.Barrier) -> None:
        self.t.barrier(self, s.span)

    def s_Fence(self, s: ir.Fence) -> None:
        self.t.fence(self, s.kind, s.span)

    def s_Breakpoint(self, s: ir.Breakpoint) -> None:
        """`breakpoint()` stops only on the debug device (codegen/debug/interp.py); nothing here."""

    def s_TilePredStore(self, s: Any) -> None:
        """A predicated store of a tile kernel's fragment loop (codegen/tile/lower.py, GPU only)."""
        from ..tile.mma import lower_pred_store

        lower_pred_store(self, s)

    def s_TileMma(self, s: Any) -> None:
        """A tile kernel's matmul on tensor cores (codegen/tile/mma.py, GPU only)."""
        from ..tile.mma import lower_tile_mma

        lower_tile_mma(self, s)

    def s_TileAttention(self, s: Any) -> None:
        """A tile kernel's attention form on tensor cores (codegen/tile/attention.py, GPU only)."""
        from ..tensorcore.attention import lower_tile_attention

        lower_tile_attention(self, s)

    def s_TileVecLoad(self, s: Any) -> None:
        """A chunk of a register tile loaded as one vector (codegen/tile/rows.py, GPU only)."""
        from ..tile.rows_llvm import vec_load

        vec_load(self, s)

    def s_TileVecStore(self, s: Any) -> None:
        from ..tile.rows_llvm import vec_store

        vec_store(self, s)

    def e_TileAligned(self, e: Any) -> llir.Value:
        from ..tile.rows_llvm import aligned

        return aligned(self, e)

    def s_SharedDecl(self, s: ir.SharedDecl) -> None:
        if s.name not in self.shared_gv:
            self.shared_gv[s.name] = self.t.shared_global(self, s.name, s.ty, s.span)

    def s_Write(self, s: ir.Write) -> None:
        sv = self.frame.slices[s.slice.name]
        value = self.expr(s.value)
        if self.lanes is not None and self.lanes.write(self, s, value):  # a lane's element: stored later
            return
        ok, ptr, fidx, flen = self.address(sv, s.index, s.offset)
        elem = s.value.ty if not isinstance(sv.ty.elem, ScalarTy) else sv.ty.elem  # a record's field: the value's type
        stored = self.b.zext(value, I8) if elem.is_bool else value
        self.guarded(s.checked, ok, s.site, fidx, flen, lambda: self.b.store(stored, ptr, align=_align(elem)), None)

    def s_SharedWrite(self, s: ir.SharedWrite) -> None:
        value = self.expr(s.value)
        ok, ptr, fidx, flen = self.shared_address(s.array, s.index)
        elem = s.array.ty.elem
        stored = self.b.zext(value, I8) if elem.is_bool else value
        self.guarded(s.checked, ok, s.site, fidx, flen, lambda: self.b.store(stored, ptr, align=_align(elem)), None)

    # ---- bounds checks -----------------------------------------------------------------------
    def guarded(self, checked: bool, ok: llir.Value, site: int, fidx: llir.Value, flen: llir.Value, action: Any, result_ty: llir.Type | None) -> llir.Value | None:
        """Run `action` when `ok` holds; otherwise record a fault (and yield 0 for a read)."""
        if not (checked and self.checks_on):
            return action()  # type: ignore[no-any-return]
        self.checks += 1
        b = self.b
        good = self.fn.append_basic_block("bc.ok")
        bad = self.fn.append_basic_block("bc.fail")
        end = self.fn.append_basic_block("bc.end")
        b.cbranch(ok, good, bad).set_weights([1 << 20, 1])  # the fault path is cold
        b.position_at_end(good)
        v = action()
        good_end = b.block
        b.branch(end)
        b.position_at_end(bad)
        self.fault(site, fidx, flen)
        bad_end = b.block
        b.branch(end)
        b.position_at_end(end)
        if result_ty is None:
            return None
        phi = b.phi(result_ty)
        phi.add_incoming(v, good_end)
        phi.add_incoming(llir.Constant(result_ty, None), bad_end)
        return phi

    def index_values(self, index: tuple[ir.Expr, ...]) -> list[llir.Value]:
        if len(index) == 1 and isinstance(index[0].ty, WitnessTy) and index[0].ty.rank >= 2:
            w = self.expr(index[0])
            return [self.b.extract_value(w, k) for k in range(index[0].ty.rank)]
        return [self.conv(self.expr(e), e.ty, I64) for e in index]

    def address(self, sv: SliceVal, index: tuple[ir.Expr, ...], offset: int = 0) -> tuple[llir.Value, llir.Value, llir.Value, llir.Value]:
        """The element's address (a record slice's: the field's, `offset` bytes in), its bounds test."""
        elem = sv.ty.elem
        if isinstance(elem, ScalarTy):
            return self.addr_dims(sv.ptr, mem_type(elem), list(sv.dims), self.index_values(index))
        ok, ptr, fidx, flen = self.addr_dims(sv.ptr, llir.ArrayType(I8, elem.size), list(sv.dims), self.index_values(index))
        if offset:
            ptr = self.b.gep(ptr, [llir.Constant(I64T, offset)], inbounds=True, source_etype=I8)
        return ok, ptr, fidx, flen

    def addr_dims(self, base: llir.Value, elem: llir.Type, dims: list[llir.Value], idx: list[llir.Value]) -> tuple[llir.Value, llir.Value, llir.Value, llir.Value]:
        b = self.b
        if len(dims) == 1:
            ok = b.icmp_unsigned("<", idx[0], dims[0])
            flat, fidx, flen = idx[0], idx[0], dims[0]
        else:  # row-major; the fault names the outermost axis out of range
            oks = [b.icmp_unsigned("<", i, d) for i, d in zip(idx, dims, strict=True)]
            ok = oks[0]
            for o in oks[1:]:
                ok = b.and_(ok, o)
            flat = idx[0]
            for i, d in zip(idx[1:], dims[1:], strict=True):
                flat = b.add(b.mul(flat, d), i)
            fidx, flen = idx[-1], dims[-1]
            for k in range(len(dims) - 2, -1, -1):
                fidx = b.select(oks[k], fidx, idx[k])
                flen = b.select(oks[k], flen, dims[k])
        ptr = b.gep(base, [flat], inbounds=True, source_etype=elem)
        return ok, ptr, fidx, flen

    def shared_address(self, ref: ir.SharedRef, index: tuple[ir.Expr, ...]) -> tuple[llir.Value, llir.Value, llir.Value, llir.Value]:
        gv = self.shared_gv[ref.name]
        if ref.ty.dynamic:  # sized by the launch: `shared_mem` bytes over the element size
            nbytes = self.b.zext(self.t.sreg(self, "dynamic_smem_size", ""), I64T)
            dims: list[llir.Value] = [self.b.udiv(nbytes, llir.Constant(I64T, ref.ty.elem.info.mem_bits // 8))]
        else:
            dims = [llir.Constant(I64T, d) for d in ref.ty.shape]
        return self.addr_dims(gv, mem_type(ref.ty.elem), dims, self.index_values(index))
