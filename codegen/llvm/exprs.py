"""Lowering of expressions (a mixin of `lower.Lowerer`): constants, locals, reads of
slices, shared arrays and constant tables, witnesses and the launch checks behind them,
raw ids, operators with the target's integer and float semantics, comparisons, `and`/`or`,
conditional expressions."""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import F32, I64, ScalarTy

from anodize.language.vocab import WITNESS_PARTS

from . import halves

from .collectives import lower_block_witness
from .thread_tiles import lower_make_tile, lower_tile_at
from .types import I1, I32T, I64T, I8, WITNESS_LL, _align, _fs, mem_type, reg_type, value_type

if TYPE_CHECKING:
    from .lower import Lowerer as _Base
else:
    _Base = object


class ExprLowering(_Base):
    """The expressions of the lowering."""

    # ---- expressions -------------------------------------------------------------------------
    def expr(self, e: ir.Expr) -> llir.Value:
        return getattr(self, "e_" + type(e).__name__)(e)  # type: ignore[no-any-return]

    def e_Const(self, e: ir.Const) -> llir.Value:
        t = reg_type(e.ty)
        if e.ty.is_half:
            return llir.Constant(t, halves.round_bits(float(e.value), e.ty.name))
        if e.ty.is_float:
            return llir.Constant(t, float(e.value))
        v = int(e.value)
        if e.ty.is_bool:
            return llir.Constant(I1, 1 if v else 0)
        return llir.Constant(t, v & ((1 << e.ty.bits) - 1))

    def e_Local(self, e: ir.Local) -> llir.Value:
        slot, ty = self.frame.vars[e.name]
        return self.b.load(slot, typ=value_type(ty))

    def e_Cast(self, e: ir.Cast) -> llir.Value:
        return self.conv(self.expr(e.value), e.value.ty, e.ty)

    def e_Bitcast(self, e: ir.Bitcast) -> llir.Value:
        v = self.expr(e.value)
        t = reg_type(e.ty)
        return v if v.type == t else self.b.bitcast(v, t)  # f16/bf16 live as i16 already

    def e_Len(self, e: ir.Len) -> llir.Value:
        return self.frame.slices[e.slice.name].dims[e.axis]

    def e_Read(self, e: ir.Read) -> llir.Value:
        if self.lanes is not None:  # a lane's element, loaded already
            got = self.lanes.read(self, e)
            if got is not None:
                return got  # type: ignore[no-any-return]
        sv = self.frame.slices[e.slice.name]
        ok, ptr, fidx, flen = self.address(sv, e.index, e.offset)
        mt = mem_type(e.ty)
        v = self.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.b.load(ptr, typ=mt, align=_align(e.ty)), mt)
        assert v is not None
        return self.b.icmp_unsigned("!=", v, llir.Constant(I8, 0)) if e.ty.is_bool else v

    def e_SharedRead(self, e: ir.SharedRead) -> llir.Value:
        ok, ptr, fidx, flen = self.shared_address(e.array, e.index)
        mt = mem_type(e.ty)
        v = self.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.b.load(ptr, typ=mt, align=_align(e.ty)), mt)
        assert v is not None
        return self.b.icmp_unsigned("!=", v, llir.Constant(I8, 0)) if e.ty.is_bool else v

    def e_TableRead(self, e: ir.TableRead) -> llir.Value:
        gv = self.tables.get(e.table)
        mt = mem_type(e.ty)
        if gv is None:
            arr = llir.ArrayType(mt, len(e.values))
            sym = "__az_table_" + e.table
            gv = llir.GlobalVariable(self.module, arr, sym, addrspace=self.t.table_as)
            gv.linkage = "internal"
            gv.global_constant = True
            gv.initializer = llir.Constant(arr, [self.e_Const(ir.Const(v, e.ty)) for v in e.values])
            gv.align = 16
            gv.type = llir.PointerType(addrspace=self.t.table_as)  # opaque, so element GEPs type-check
            self.tables[e.table] = gv
        dims = [llir.Constant(I64T, len(e.values))]
        ok, ptr, fidx, flen = self.addr_dims(gv, mt, dims, self.index_values(e.index))
        v = self.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.b.load(ptr, typ=mt, align=_align(e.ty)), mt)
        assert v is not None
        return v

    def sreg64(self, reg: str, axis: str) -> llir.Value:
        return self.b.zext(self.t.sreg(self, reg, axis), I64T)

    def witness(self, rank: int, site: int) -> llir.Value:
        b = self.b

        def axis(a: str) -> llir.Value:
            return b.add(b.mul(self.sreg64("ctaid", a), self.sreg64("ntid", a)), self.sreg64("tid", a))

        if rank == 1:
            v: llir.Value = axis("x")
        else:  # (row, col) = (y, x); (layer, row, col) = (z, y, x)
            v = llir.Constant(WITNESS_LL[rank], None)
            for k, a in enumerate("zyx"[3 - rank :]):
                v = b.insert_value(v, axis(a), k)
        if site < 0:
            return v
        ok, dims = self.launch_dims_ok(rank)
        with b.if_then(b.not_(ok), likely=False):
            self.fault(site, dims, llir.Constant(I64T, rank))
        poison = llir.Constant(I64T, -1)
        if rank == 1:
            return b.select(ok, v, poison)
        return b.select(ok, v, llir.Constant(WITNESS_LL[rank], [poison] * rank))

    def launch_dims_ok(self, rank: int) -> tuple[llir.Value, llir.Value]:
        """(ok, dims) for a witness of `rank` in a kernel without a contract.

        `ok`: the launch's rank is `rank` and every grid and block dimension beyond it is 1
        (otherwise several threads would share one witness).  `dims`, for the fault record:
        the launch's dimensionality, its rank or the highest axis whose grid or block
        extent is not 1 (i64)."""
        b = self.b
        one = llir.Constant(I32T, 1)

        def used(axis: str) -> llir.Value:
            g = b.icmp_unsigned("!=", self.t.sreg(self, "nctaid", axis), one)
            return b.or_(g, b.icmp_unsigned("!=", self.t.sreg(self, "ntid", axis), one))

        used_y, used_z = used("y"), used("z")
        ok = b.icmp_unsigned("==", self.launch_rank, llir.Constant(I32T, rank))
        if rank < 2:
            ok = b.and_(ok, b.not_(used_y))
        if rank < 3:
            ok = b.and_(ok, b.not_(used_z))
        dims = b.zext(self.launch_rank, I64T)
        two, three = llir.Constant(I64T, 2), llir.Constant(I64T, 3)
        dims = b.select(b.and_(used_y, b.icmp_unsigned("<", dims, two)), two, dims)
        dims = b.select(used_z, three, dims)
        return ok, dims

    def e_MakeWitness(self, e: ir.MakeWitness) -> llir.Value:
        if e.ty.tile is not None:  # thread.tile_2d(...)
            return lower_make_tile(self, e)
        if self.lanes is not None:  # a coarsened thread: the lane's index
            got = self.lanes.witness(self, e)
            if got is not None:
                return got  # type: ignore[no-any-return]
        if e.ty.block:
            return lower_block_witness(self, e)
        if e.ty.local:  # thread.index_in_block(), index_in_block_2d()
            from .shared_safe import lower_local_witness

            return lower_local_witness(self, e)
        return self.witness(e.rank, e.site)

    def e_TileAt(self, e: ir.TileAt) -> llir.Value:
        return lower_tile_at(self, e)

    def e_WitnessPart(self, e: ir.WitnessPart) -> llir.Value:
        w = self.expr(e.witness)
        if e.part == "get":
            return w
        return self.b.extract_value(w, WITNESS_PARTS[e.witness.ty.rank].index(e.part))  # type: ignore[union-attr]

    def e_Contains(self, e: ir.Contains) -> llir.Value:
        if self.lanes is not None:  # a coarsened thread's vector path: true there
            got = self.lanes.contains(self, e)
            if got is not None:
                return got  # type: ignore[no-any-return]
        sv = self.frame.slices[e.slice.name]
        w = self.expr(e.witness)
        b = self.b
        if sv.ty.rank == 1:
            return b.icmp_unsigned("<", w, sv.dims[0])
        ok = b.icmp_unsigned("<", b.extract_value(w, 0), sv.dims[0])
        for k in range(1, sv.ty.rank):
            ok = b.and_(ok, b.icmp_unsigned("<", b.extract_value(w, k), sv.dims[k]))
        return ok

    def e_RawId(self, e: ir.RawId) -> llir.Value:
        return self.t.sreg(self, e.reg, e.axis)

    def e_UnaryOp(self, e: ir.UnaryOp) -> llir.Value:
        v = self.expr(e.operand)
        b = self.b
        ty = e.ty
        if e.op == "not":
            return b.xor(v, llir.Constant(I1, 1))
        if e.op == "~":
            return b.xor(v, llir.Constant(v.type, -1))
        if ty.is_half and e.op in ("-", "abs"):
            return halves.negate(b, v) if e.op == "-" else halves.absolute(b, v)
        if e.op == "-":
            return b.fneg(v) if ty.is_float else b.sub(llir.Constant(v.type, 0), v)
        if e.op == "abs":
            if ty.is_float:
                return self.intrinsic(f"llvm.fabs.{_fs(ty)}", v.type, [v])
            neg = b.icmp_signed("<", v, llir.Constant(v.type, 0))
            return b.select(neg, b.sub(llir.Constant(v.type, 0), v), v)
        raise AssertionError(e.op)

    def e_BinOp(self, e: ir.BinOp) -> llir.Value:
        a = self.expr(e.left)
        c = self.expr(e.right)
        b = self.b
        ty = e.ty
        op = e.op
        if ty.is_half:  # computed in f32, rounded once
            a, _ = self.widen(a, ty)
            c, _ = self.widen(c, ty)
            return self.narrow(self.float_binop(op, a, c, F32), ty)
        if ty.is_bool:
            return {"&": b.and_, "|": b.or_, "^": b.xor}[op](a, c)
        if ty.is_float:
            return self.float_binop(op, a, c, ty)
        if op in ("+", "-", "*", "&", "|", "^"):
            return {"+": b.add, "-": b.sub, "*": b.mul, "&": b.and_, "|": b.or_, "^": b.xor}[op](a, c)
        if op in ("min", "max"):
            cmp = b.icmp_signed if ty.signed else b.icmp_unsigned
            lt = cmp("<", a, c)
            return b.select(lt, a, c) if op == "min" else b.select(lt, c, a)
        if op in ("<<", ">>"):
            w = llir.Constant(a.type, ty.bits)
            big = b.icmp_unsigned(">=", c, w)
            if op == "<<":
                return b.select(big, llir.Constant(a.type, 0), b.shl(a, b.select(big, llir.Constant(a.type, 0), c)))
            if ty.signed:
                return b.ashr(a, b.select(big, llir.Constant(a.type, ty.bits - 1), c))
            return b.select(big, llir.Constant(a.type, 0), b.lshr(a, b.select(big, llir.Constant(a.type, 0), c)))
        if op in ("//", "%"):
            return self.int_divmod(op, a, c, ty, e.site)
        raise AssertionError(op)

    def float_binop(self, op: str, a: llir.Value, c: llir.Value, ty: ScalarTy) -> llir.Value:
        b = self.b
        if op in ("+", "-", "*", "/"):
            return {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[op](a, c)  # type: ignore[no-any-return]
        if op in ("min", "max"):
            return self.t.float_minmax(self, op, a, c)
        if op in ("//", "%"):
            return self.float_divmod(op, a, c, ty)
        raise AssertionError(op)

    def int_divmod(self, op: str, n: llir.Value, d: llir.Value, ty: ScalarTy, site: int) -> llir.Value:
        """Python's floor `//` and `%`; a zero divisor records a fault and gives 0."""
        b = self.b
        t = n.type
        zero = llir.Constant(t, 0)
        one = llir.Constant(t, 1)
        dz = b.icmp_unsigned("==", d, zero)
        if site >= 0:
            with b.if_then(dz, likely=False):
                self.fault(site, self.conv(n, ty, I64), llir.Constant(I64T, 0))
        if not ty.signed:
            safe = b.select(dz, one, d)
            r = b.udiv(n, safe) if op == "//" else b.urem(n, safe)
            return b.select(dz, zero, r)
        m1 = b.icmp_signed("==", d, llir.Constant(t, -1))
        safe = b.select(b.or_(dz, m1), one, d)
        q = b.sdiv(n, safe)
        q = b.select(m1, b.sub(zero, n), q)  # n // -1 wraps for the minimum value
        r = b.sub(n, b.mul(q, d))
        adjust = b.and_(b.icmp_signed("!=", r, zero), b.icmp_signed("<", b.xor(r, d), zero))
        if op == "//":
            out = b.select(adjust, b.sub(q, one), q)
        else:
            out = b.select(adjust, b.add(r, d), r)
        return b.select(dz, zero, out)

    def float_divmod(self, op: str, a: llir.Value, c: llir.Value, ty: ScalarTy) -> llir.Value:
        """Python's float `//` and `%` (CPython's float_divmod); division by zero gives IEEE results."""
        b = self.b
        t = a.type
        zero = llir.Constant(t, 0.0)
        mod = b.frem(a, c)
        nz = b.fcmp_ordered("!=", mod, zero)
        sign_differs = b.xor(b.fcmp_ordered("<", c, zero), b.fcmp_ordered("<", mod, zero))
        fix = b.and_(nz, sign_differs)
        mod2 = b.select(fix, b.fadd(mod, c), mod)
        if op == "%":
            # a zero result takes the divisor's sign
            return b.select(nz, mod2, self.intrinsic(f"llvm.copysign.{_fs(ty)}", t, [zero, c]))
        div = b.fdiv(b.fsub(a, mod), c)
        div = b.select(fix, b.fsub(div, llir.Constant(t, 1.0)), div)
        fl = self.intrinsic(f"llvm.floor.{_fs(ty)}", t, [div])
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), llir.Constant(t, 0.5)), b.fadd(fl, llir.Constant(t, 1.0)), fl)
        divnz = b.fcmp_ordered("!=", div, zero)
        plain = b.fdiv(a, c)
        res = b.select(divnz, fl, self.intrinsic(f"llvm.copysign.{_fs(ty)}", t, [zero, plain]))
        czero = b.fcmp_ordered("==", c, zero)
        return b.select(czero, plain, res)

    def compare(self, op: str, a: llir.Value, c: llir.Value, ty: ScalarTy) -> llir.Value:
        b = self.b
        if ty.is_half:
            a, _ = self.widen(a, ty)
            c, ty = self.widen(c, ty)
        if ty.is_float:
            if op == "!=":
                return b.fcmp_unordered("!=", a, c)
            return b.fcmp_ordered(op, a, c)
        if ty.signed:
            return b.icmp_signed(op, a, c)
        return b.icmp_unsigned(op, a, c)

    def e_Compare(self, e: ir.Compare) -> llir.Value:
        b = self.b
        left = self.expr(e.operands[0])
        if len(e.ops) == 1:
            right = self.expr(e.operands[1])
            t = e.link_types[0]
            return self.compare(e.ops[0], self.conv(left, e.operands[0].ty, t), self.conv(right, e.operands[1].ty, t), t)
        end = self.fn.append_basic_block("cmp.end")
        incoming: list[tuple[llir.Value, llir.Block]] = []
        for i, op in enumerate(e.ops):
            right = self.expr(e.operands[i + 1])
            t = e.link_types[i]
            r = self.compare(op, self.conv(left, e.operands[i].ty, t), self.conv(right, e.operands[i + 1].ty, t), t)
            if i == len(e.ops) - 1:
                incoming.append((r, b.block))
                b.branch(end)
            else:
                nxt = self.fn.append_basic_block("cmp.next")
                incoming.append((llir.Constant(I1, 0), b.block))
                b.cbranch(r, nxt, end)
                b.position_at_end(nxt)
            left = right
        b.position_at_end(end)
        phi = b.phi(I1)
        for v, blk in incoming:
            phi.add_incoming(v, blk)
        return phi

    def e_BoolOp(self, e: ir.BoolOp) -> llir.Value:
        b = self.b
        end = self.fn.append_basic_block(f"{e.op}.end")
        incoming: list[tuple[llir.Value, llir.Block]] = []
        short = llir.Constant(I1, 0 if e.op == "and" else 1)
        for i, v in enumerate(e.values):
            val = self.expr(v)
            if i == len(e.values) - 1:
                incoming.append((val, b.block))
                b.branch(end)
            else:
                nxt = self.fn.append_basic_block(f"{e.op}.next")
                incoming.append((short, b.block))
                if e.op == "and":
                    b.cbranch(val, nxt, end)
                else:
                    b.cbranch(val, end, nxt)
                b.position_at_end(nxt)
        b.position_at_end(end)
        phi = b.phi(I1)
        for v, blk in incoming:
            phi.add_incoming(v, blk)
        return phi

    def e_IfExp(self, e: ir.IfExp) -> llir.Value:
        b = self.b
        cond = self.expr(e.cond)
        then = self.fn.append_basic_block("sel.then")
        other = self.fn.append_basic_block("sel.else")
        end = self.fn.append_basic_block("sel.end")
        b.cbranch(cond, then, other)
        b.position_at_end(then)
        v1 = self.expr(e.then)
        t_end = b.block
        b.branch(end)
        b.position_at_end(other)
        v2 = self.expr(e.orelse)
        o_end = b.block
        b.branch(end)
        b.position_at_end(end)
        phi = b.phi(v1.type)
        phi.add_incoming(v1, t_end)
        phi.add_incoming(v2, o_end)
        return phi

    def e_SliceRef(self, e: ir.SliceRef) -> llir.Value:
        raise AssertionError("a slice is not a value")

    def e_SharedRef(self, e: ir.SharedRef) -> llir.Value:
        raise AssertionError("a shared array is not a value")
