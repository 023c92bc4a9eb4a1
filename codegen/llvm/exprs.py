"""Lowering of expressions (a collaborator of `lower.Lowerer`, `lw.expressions`): constants, locals, reads of
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
from .registry import handles, part
from .shared_safe import lower_local_witness
from .record_align import field_align
from .thread_tiles import lower_make_tile
from .types import I1, I32T, I64T, I8, WITNESS_LL, _align, _fs, mem_type, reg_type, value_type

if TYPE_CHECKING:
    from .lower import Lowerer


@part("expressions")
class ExprLowering:
    """The expressions of the lowering."""

    def __init__(self, lw: Lowerer) -> None:
        self.lw = lw

    @handles(ir.Const)
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

    @handles(ir.Local)
    def e_Local(self, e: ir.Local) -> llir.Value:
        slot, ty = self.lw.frame.vars[e.name]
        return self.lw.b.load(slot, typ=value_type(ty))

    @handles(ir.Cast)
    def e_Cast(self, e: ir.Cast) -> llir.Value:
        return self.lw.conv(self.lw.expr(e.value), e.value.ty, e.ty)

    @handles(ir.Bitcast)
    def e_Bitcast(self, e: ir.Bitcast) -> llir.Value:
        v = self.lw.expr(e.value)
        t = reg_type(e.ty)
        return v if v.type == t else self.lw.b.bitcast(v, t)  # f16/bf16 live as i16 already

    @handles(ir.Len)
    def e_Len(self, e: ir.Len) -> llir.Value:
        return self.lw.frame.slices[e.slice.name].dims[e.axis]

    @handles(ir.Read)
    def e_Read(self, e: ir.Read) -> llir.Value:
        if self.lw.lanes is not None:  # a lane's element, loaded already
            got = self.lw.lanes.read(self.lw, e)
            if got is not None:
                return got  # type: ignore[no-any-return]
        sv = self.lw.frame.slices[e.slice.name]
        ok, ptr, fidx, flen = self.lw.bounds.address(sv, e.index, e.offset)
        mt = mem_type(e.ty)
        align = field_align(sv, e.offset, _align(e.ty))
        v = self.lw.bounds.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.lw.b.load(ptr, typ=mt, align=align), mt)
        assert v is not None
        return self.lw.b.icmp_unsigned("!=", v, llir.Constant(I8, 0)) if e.ty.is_bool else v

    @handles(ir.SharedRead)
    def e_SharedRead(self, e: ir.SharedRead) -> llir.Value:
        ok, ptr, fidx, flen = self.lw.bounds.shared_address(e.array, e.index)
        mt = mem_type(e.ty)
        v = self.lw.bounds.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.lw.b.load(ptr, typ=mt, align=_align(e.ty)), mt)
        assert v is not None
        return self.lw.b.icmp_unsigned("!=", v, llir.Constant(I8, 0)) if e.ty.is_bool else v

    @handles(ir.TableRead)
    def e_TableRead(self, e: ir.TableRead) -> llir.Value:
        gv = self.lw.tables.get(e.table)
        mt = mem_type(e.ty)
        if gv is None:
            arr = llir.ArrayType(mt, len(e.values))
            sym = "__az_table_" + e.table
            gv = llir.GlobalVariable(self.lw.module, arr, sym, addrspace=self.lw.t.table_as)
            gv.linkage = "internal"
            gv.global_constant = True
            gv.initializer = llir.Constant(arr, [self.e_Const(ir.Const(v, e.ty)) for v in e.values])
            gv.align = 16
            gv.type = llir.PointerType(addrspace=self.lw.t.table_as)  # opaque, so element GEPs type-check
            self.lw.tables[e.table] = gv
        dims = [llir.Constant(I64T, len(e.values))]
        ok, ptr, fidx, flen = self.lw.bounds.addr_dims(gv, mt, dims, self.lw.bounds.index_values(e.index))
        v = self.lw.bounds.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.lw.b.load(ptr, typ=mt, align=_align(e.ty)), mt)
        assert v is not None
        return v

    def witness(self, rank: int, site: int) -> llir.Value:
        b = self.lw.b

        def axis(a: str) -> llir.Value:
            return b.add(b.mul(self.lw.sreg64("ctaid", a), self.lw.sreg64("ntid", a)), self.lw.sreg64("tid", a))

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
            self.lw.fault(site, dims, llir.Constant(I64T, rank))
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
        b = self.lw.b
        one = llir.Constant(I32T, 1)

        def used(axis: str) -> llir.Value:
            g = b.icmp_unsigned("!=", self.lw.t.sreg(self.lw, "nctaid", axis), one)
            return b.or_(g, b.icmp_unsigned("!=", self.lw.t.sreg(self.lw, "ntid", axis), one))

        used_y, used_z = used("y"), used("z")
        ok = b.icmp_unsigned("==", self.lw.launch_rank, llir.Constant(I32T, rank))
        if rank < 2:
            ok = b.and_(ok, b.not_(used_y))
        if rank < 3:
            ok = b.and_(ok, b.not_(used_z))
        dims = b.zext(self.lw.launch_rank, I64T)
        two, three = llir.Constant(I64T, 2), llir.Constant(I64T, 3)
        dims = b.select(b.and_(used_y, b.icmp_unsigned("<", dims, two)), two, dims)
        dims = b.select(used_z, three, dims)
        return ok, dims

    @handles(ir.MakeWitness)
    def e_MakeWitness(self, e: ir.MakeWitness) -> llir.Value:
        if e.ty.tile is not None:  # thread.tile_2d(...)
            return lower_make_tile(self.lw, e)
        if self.lw.lanes is not None:  # a coarsened thread: the lane's index
            got = self.lw.lanes.witness(self.lw, e)
            if got is not None:
                return got  # type: ignore[no-any-return]
        if e.ty.block:
            return lower_block_witness(self.lw, e)
        if e.ty.local:  # thread.index_in_block(), index_in_block_2d()
            return lower_local_witness(self.lw, e)
        return self.witness(e.rank, e.site)

    @handles(ir.WitnessPart)
    def e_WitnessPart(self, e: ir.WitnessPart) -> llir.Value:
        w = self.lw.expr(e.witness)
        if e.part == "get":
            return w
        return self.lw.b.extract_value(w, WITNESS_PARTS[e.witness.ty.rank].index(e.part))  # type: ignore[union-attr]

    @handles(ir.Contains)
    def e_Contains(self, e: ir.Contains) -> llir.Value:
        if self.lw.lanes is not None:  # a coarsened thread's vector path: true there
            got = self.lw.lanes.contains(self.lw, e)
            if got is not None:
                return got  # type: ignore[no-any-return]
        sv = self.lw.frame.slices[e.slice.name]
        w = self.lw.expr(e.witness)
        b = self.lw.b
        if sv.ty.rank == 1:
            return b.icmp_unsigned("<", w, sv.dims[0])
        ok = b.icmp_unsigned("<", b.extract_value(w, 0), sv.dims[0])
        for k in range(1, sv.ty.rank):
            ok = b.and_(ok, b.icmp_unsigned("<", b.extract_value(w, k), sv.dims[k]))
        return ok

    @handles(ir.RawId)
    def e_RawId(self, e: ir.RawId) -> llir.Value:
        return self.lw.t.sreg(self.lw, e.reg, e.axis)

    @handles(ir.UnaryOp)
    def e_UnaryOp(self, e: ir.UnaryOp) -> llir.Value:
        v = self.lw.expr(e.operand)
        b = self.lw.b
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
                return self.lw.intrinsic(f"llvm.fabs.{_fs(ty)}", v.type, [v])
            neg = b.icmp_signed("<", v, llir.Constant(v.type, 0))
            return b.select(neg, b.sub(llir.Constant(v.type, 0), v), v)
        raise AssertionError(e.op)

    @handles(ir.BinOp)
    def e_BinOp(self, e: ir.BinOp) -> llir.Value:
        a = self.lw.expr(e.left)
        c = self.lw.expr(e.right)
        b = self.lw.b
        ty = e.ty
        op = e.op
        if ty.is_half:  # computed in f32, rounded once
            a, _ = self.lw.widen(a, ty)
            c, _ = self.lw.widen(c, ty)
            return self.lw.narrow(self.float_binop(op, a, c, F32), ty)
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
        b = self.lw.b
        if op in ("+", "-", "*", "/"):
            return {"+": b.fadd, "-": b.fsub, "*": b.fmul, "/": b.fdiv}[op](a, c)  # type: ignore[no-any-return]
        if op in ("min", "max"):
            return self.lw.t.float_minmax(self.lw, op, a, c)
        if op in ("//", "%"):
            return self.float_divmod(op, a, c, ty)
        raise AssertionError(op)

    def int_divmod(self, op: str, n: llir.Value, d: llir.Value, ty: ScalarTy, site: int) -> llir.Value:
        """Python's floor `//` and `%`; a zero divisor records a fault and gives 0."""
        b = self.lw.b
        t = n.type
        zero = llir.Constant(t, 0)
        one = llir.Constant(t, 1)
        dz = b.icmp_unsigned("==", d, zero)
        if site >= 0:
            with b.if_then(dz, likely=False):
                self.lw.fault(site, self.lw.conv(n, ty, I64), llir.Constant(I64T, 0))
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
        b = self.lw.b
        t = a.type
        zero = llir.Constant(t, 0.0)
        mod = b.frem(a, c)
        nz = b.fcmp_ordered("!=", mod, zero)
        sign_differs = b.xor(b.fcmp_ordered("<", c, zero), b.fcmp_ordered("<", mod, zero))
        fix = b.and_(nz, sign_differs)
        mod2 = b.select(fix, b.fadd(mod, c), mod)
        if op == "%":
            # a zero result takes the divisor's sign
            return b.select(nz, mod2, self.lw.intrinsic(f"llvm.copysign.{_fs(ty)}", t, [zero, c]))
        div = b.fdiv(b.fsub(a, mod), c)
        div = b.select(fix, b.fsub(div, llir.Constant(t, 1.0)), div)
        fl = self.lw.intrinsic(f"llvm.floor.{_fs(ty)}", t, [div])
        fl = b.select(b.fcmp_ordered(">", b.fsub(div, fl), llir.Constant(t, 0.5)), b.fadd(fl, llir.Constant(t, 1.0)), fl)
        divnz = b.fcmp_ordered("!=", div, zero)
        plain = b.fdiv(a, c)
        res = b.select(divnz, fl, self.lw.intrinsic(f"llvm.copysign.{_fs(ty)}", t, [zero, plain]))
        czero = b.fcmp_ordered("==", c, zero)
        return b.select(czero, plain, res)

    def compare(self, op: str, a: llir.Value, c: llir.Value, ty: ScalarTy) -> llir.Value:
        b = self.lw.b
        if ty.is_half:
            a, _ = self.lw.widen(a, ty)
            c, ty = self.lw.widen(c, ty)
        if ty.is_float:
            if op == "!=":
                return b.fcmp_unordered("!=", a, c)
            return b.fcmp_ordered(op, a, c)
        if ty.signed:
            return b.icmp_signed(op, a, c)
        return b.icmp_unsigned(op, a, c)

    @handles(ir.Compare)
    def e_Compare(self, e: ir.Compare) -> llir.Value:
        b = self.lw.b
        left = self.lw.expr(e.operands[0])
        if len(e.ops) == 1:
            right = self.lw.expr(e.operands[1])
            t = e.link_types[0]
            return self.compare(e.ops[0], self.lw.conv(left, e.operands[0].ty, t), self.lw.conv(right, e.operands[1].ty, t), t)
        end = self.lw.fn.append_basic_block("cmp.end")
        incoming: list[tuple[llir.Value, llir.Block]] = []
        for i, op in enumerate(e.ops):
            right = self.lw.expr(e.operands[i + 1])
            t = e.link_types[i]
            r = self.compare(op, self.lw.conv(left, e.operands[i].ty, t), self.lw.conv(right, e.operands[i + 1].ty, t), t)
            if i == len(e.ops) - 1:
                incoming.append((r, b.block))
                b.branch(end)
            else:
                nxt = self.lw.fn.append_basic_block("cmp.next")
                incoming.append((llir.Constant(I1, 0), b.block))
                b.cbranch(r, nxt, end)
                b.position_at_end(nxt)
            left = right
        b.position_at_end(end)
        phi = b.phi(I1)
        for v, blk in incoming:
            phi.add_incoming(v, blk)
        return phi

    @handles(ir.BoolOp)
    def e_BoolOp(self, e: ir.BoolOp) -> llir.Value:
        b = self.lw.b
        end = self.lw.fn.append_basic_block(f"{e.op}.end")
        incoming: list[tuple[llir.Value, llir.Block]] = []
        short = llir.Constant(I1, 0 if e.op == "and" else 1)
        for i, v in enumerate(e.values):
            val = self.lw.expr(v)
            if i == len(e.values) - 1:
                incoming.append((val, b.block))
                b.branch(end)
            else:
                nxt = self.lw.fn.append_basic_block(f"{e.op}.next")
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

    @handles(ir.IfExp)
    def e_IfExp(self, e: ir.IfExp) -> llir.Value:
        b = self.lw.b
        cond = self.lw.expr(e.cond)
        then = self.lw.fn.append_basic_block("sel.then")
        other = self.lw.fn.append_basic_block("sel.else")
        end = self.lw.fn.append_basic_block("sel.end")
        b.cbranch(cond, then, other)
        b.position_at_end(then)
        v1 = self.lw.expr(e.then)
        t_end = b.block
        b.branch(end)
        b.position_at_end(other)
        v2 = self.lw.expr(e.orelse)
        o_end = b.block
        b.branch(end)
        b.position_at_end(end)
        phi = b.phi(v1.type)
        phi.add_incoming(v1, t_end)
        phi.add_incoming(v2, o_end)
        return phi

    @handles(ir.SliceRef)
    def e_SliceRef(self, e: ir.SliceRef) -> llir.Value:
        raise AssertionError("a slice is not a value")

    @handles(ir.SharedRef)
    def e_SharedRef(self, e: ir.SharedRef) -> llir.Value:
        raise AssertionError("a shared array is not a value")
