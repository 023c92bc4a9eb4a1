"""Typed IR to LLVM IR (llvmlite.ir), shared by the GPU and the CPU backends.

The lowering follows the kernel ABI of `codegen/artifact.py` exactly: each
parameter flattens (`ptr data, i64 len` / `ptr data, i64 rows, i64 cols` / the
scalar), then the hidden `ptr fault` and `i32 launch_rank`.  A `Target`
supplies what differs between backends: the global address space, thread ids,
math functions, barriers and warp operations, and the entry's decoration.

A failed bounds check never traps: it branches to a cold block (branch weights)
that atomically increments the fault record's count and, in the thread whose
increment saw 0, writes the site id, index and length (inline, not a call, so
that no value is spilled around a call: `Lowerer.fault`).  A failed read yields 0; a failed write
or atomic is skipped.  Shared arrays are checked like slices: a static one
against its shape, a dynamic one against the launch's dynamic shared memory
(`Target.sreg(lw, "dynamic_smem_size", "")`, in bytes, over the element size).

A witness of a kernel without a contract checks the launch it was made in
(`Lowerer.witness`): its rank, and that every grid and block extent beyond the
witness's rank is 1; otherwise it records a `rank` fault and is poisoned (all
ones), so it admits no access.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import llvmlite.ir as llir

from anodize.language.diagnostics import Span

from anodize.language import ir
from anodize.language.types import BOOL, F32, F64, I32, I64, LocalArrayTy, ScalarTy, SharedTy, SliceTy, TupleTy, Ty, WitnessTy

from anodize.language.vocab import WITNESS_PARTS

from . import halves

from .collectives import lower_block_witness, lower_collective
from .thread_tiles import lower_make_tile, lower_tile_at
from .lower_locals import LocalsLowering, tuple_type

I1 = llir.IntType(1)
I8 = llir.IntType(8)
I32T = llir.IntType(32)
I64T = llir.IntType(64)
FLOAT = llir.FloatType()
DOUBLE = llir.DoubleType()
W2 = llir.LiteralStructType([I64T, I64T])
W3 = llir.LiteralStructType([I64T, I64T, I64T])
WITNESS_LL = {1: I64T, 2: W2, 3: W3}

# `math.f` -> the LLVM intrinsic `llvm.<name>.f32/f64` on every backend (exact operations, 0 ulp);
# the other functions of vocab.MATH_FUNCS are the target's (`Target.math`) but the
# classifications `isnan`/`isinf`/`isfinite`, an `fcmp` (`Lowerer.e_MathCall`)
INTRINSIC_MATH = {
    "sqrt": "sqrt",
    "fabs": "fabs",
    "floor": "floor",
    "ceil": "ceil",
    "trunc": "trunc",
    "copysign": "copysign",
    "fma": "fma",
    "fmin": "minnum",
    "fmax": "maxnum",
}


def reg_type(ty: ScalarTy) -> llir.Type:
    if ty.is_half:
        return halves.I16  # the bit pattern (codegen/halves.py)
    if ty.is_float:
        return FLOAT if ty.bits == 32 else DOUBLE
    return llir.IntType(ty.bits)


def mem_type(ty: ScalarTy) -> llir.Type:
    return I8 if ty.is_bool else reg_type(ty)


def value_type(ty: Ty) -> llir.Type:
    if isinstance(ty, ScalarTy):
        return reg_type(ty)
    if isinstance(ty, WitnessTy):
        return WITNESS_LL[ty.rank]
    if isinstance(ty, TupleTy):
        return tuple_type(ty)
    raise TypeError(f"no register type for {ty}")


def add_attr(attrs: Any, name: str) -> None:
    """Add an attribute llvmlite's whitelist does not know (e.g. `nocapture`, or `"k"="v"`)."""
    set.add(attrs, name)


@dataclass
class SliceVal:
    name: str
    ty: SliceTy
    ptr: llir.Value
    dims: tuple[llir.Value, ...]


@dataclass
class Frame:
    vars: dict[str, tuple[llir.Value, Ty]] = field(default_factory=dict)
    slices: dict[str, SliceVal] = field(default_factory=dict)
    loops: list[tuple[llir.Block, llir.Block]] = field(default_factory=list)  # (continue, break)
    exit: llir.Block | None = None
    ret_slot: llir.Value | None = None


class Target:
    """What differs between the GPU and the CPU backends."""

    name = "abstract"
    global_as = 0
    shared_as = 0
    table_as = 0  # where module-level constant tables live (the GPU's constant space)
    vector_grid_stride = False  # lower elementwise grid-stride loops in 16-byte chunks (gridstride.py)
    coarsen = False  # several indices per thread for element-wise kernels (coarsen.py)
    native_half_atomic_add = False  # `atomicrmw fadd half` (else a compare-and-swap loop)
    native_f16_convert = False  # `fpext`/`fptrunc` of LLVM `half` (else integer IR, codegen/halves.py)

    def triple(self) -> str:
        raise NotImplementedError

    def extra_params(self) -> list[llir.Type]:
        return []

    def decorate_entry(self, lw: Lowerer, fn: llir.Function) -> None:
        pass

    def sreg(self, lw: Lowerer, reg: str, axis: str) -> llir.Value:
        """An i32 special register: `tid`, `ctaid`, `ntid`, `nctaid` (axis "x"/"y"/"z"),
        `laneid` and `dynamic_smem_size` (axis "")."""
        raise NotImplementedError

    def math(self, lw: Lowerer, name: str, args: list[llir.Value], ty: ScalarTy) -> llir.Value:
        raise NotImplementedError

    def barrier(self, lw: Lowerer, span: Span | None) -> None:
        raise NotImplementedError

    def fence(self, lw: Lowerer, kind: str, span: Span | None) -> None:
        """`az.threadfence()` (kind "threadfence") or `az.warp.sync()` ("warp_sync")."""
        raise NotImplementedError

    def warp(self, lw: Lowerer, op: str, args: list[llir.Value], ty: ScalarTy, span: Span | None) -> llir.Value:
        raise NotImplementedError

    def shared_global(self, lw: Lowerer, name: str, ty: SharedTy, span: Span | None = None) -> llir.Value:
        raise NotImplementedError

    # atomics and print (codegen/lower_effects.py)
    string_as = 0  # where constant strings (printf formats) live

    def sync_scope(self, scope: str) -> str:
        """The LLVM `syncscope(...) ` prefix of an atomic of `scope` ("" for the system scope)."""
        return ""

    def atomic_rmw(self, lw: Lowerer, op: str, ptr: llir.Value, val: llir.Value, ty: ScalarTy, scope: str, order: str) -> llir.Value:
        from .lower_effects import llvm_order, rmw_op

        return lw.b.atomic_rmw(rmw_op(op, ty), ptr, val, self.sync_scope(scope) + llvm_order(order))

    def cstring(self, lw: Lowerer, text: str) -> llir.Value:
        from .lower_effects import global_string

        return global_string(lw, text, self.string_as)

    def emit_print(self, lw: Lowerer, fmt: llir.Value, args: llir.Value) -> None:
        """Print `fmt` (a printf format) with `args` (8-byte slots: i64, double or string pointer)."""
        raise NotImplementedError


class Lowerer(LocalsLowering):
    def __init__(self, k: ir.KernelIR, target: Target, *, bounds_checks: bool = True, line_info: bool = False):
        self.k = k
        self.t = target
        self.checks_on = bounds_checks
        self.line_info = line_info
        self.checks = 0
        self.module = llir.Module(name=k.name)
        self.module.triple = target.triple()
        self.gptr = llir.PointerType(addrspace=target.global_as)
        self.decls: dict[str, llir.Function] = {}
        self.shared_gv: dict[str, llir.Value] = {}
        self.tables: dict[str, llir.Value] = {}
        self.entry_name = k.name
        self.di_scope: Any = None
        self._di_cache: dict[tuple[int, int], Any] = {}
        self.lanes: Any = None  # gridstride.Lanes / coarsen.Lanes while lanes of a body are lowered
        # coarsening (codegen/coarsen.py): each thread takes several indices along x
        self.coarse: Any = None
        if target.coarsen:
            from .coarsen import coarsen_plan

            self.coarse = coarsen_plan(k)

    # ---- module plumbing ----------------------------------------------------------------
    def declare(self, name: str, ret: llir.Type, args: list[llir.Type], *attrs: str) -> llir.Function:
        f = self.decls.get(name)
        if f is None:
            f = self.module.globals.get(name)  # type: ignore[assignment]
            if f is None:
                f = llir.Function(self.module, llir.FunctionType(ret, args), name)
                for a in attrs:
                    add_attr(f.attributes, a)
            self.decls[name] = f
        return f

    def intrinsic(self, name: str, ret: llir.Type, args: list[llir.Value], *attrs: str) -> llir.Value:
        f = self.declare(name, ret, [a.type for a in args], *attrs)
        return self.b.call(f, args)

    def abi_types(self) -> list[llir.Type]:
        out: list[llir.Type] = []
        for p in self.k.params:
            if p.slice_kind is not None:
                out.append(self.gptr)
                out.extend([I64T] * p.slice_kind.rank)
            else:
                out.append(I8 if p.scalar.kind == "b" else reg_type(ScalarTy(p.scalar)))
        out.append(self.gptr)  # fault record
        out.append(I32T)  # launch rank
        if self.coarse is not None:
            out.append(I64T)  # the user's extent along x (grid_x * block_x): codegen/coarsen.py
        return out + self.t.extra_params()

    # ---- entry ----------------------------------------------------------------------------
    def lower(self) -> llir.Module:
        fnty = llir.FunctionType(llir.VoidType(), self.abi_types())
        fn = llir.Function(self.module, fnty, self.entry_name)
        self.fn = fn
        self.make_fault_fn()
        entry = fn.append_basic_block("entry")
        body = fn.append_basic_block("body")
        self.alloca_b = llir.IRBuilder(entry)
        self.b = llir.IRBuilder(body)
        self.setup_debug(fn)
        frame = Frame()
        args = list(fn.args)
        i = 0
        for p in self.k.params:
            if p.slice_kind is not None:
                data = args[i]
                data.name = f"{p.name}.data"
                if not p.slice_kind.atomic:  # NVPTX would turn an atomic load of a noalias,
                    add_attr(data.attributes, "noalias")  # never-stored buffer into ld.global.nc
                add_attr(data.attributes, "nocapture")
                if not p.slice_kind.output:
                    add_attr(data.attributes, "readonly")
                dims = tuple(args[i + 1 : i + 1 + p.slice_kind.rank])
                for j, d in enumerate(dims):
                    d.name = f"{p.name}.{_DIM_NAMES[p.slice_kind.rank][j]}"
                elem = ScalarTy(p.scalar)
                frame.slices[p.name] = SliceVal(p.name, SliceTy(p.slice_kind, elem), data, dims)
                i += 1 + p.slice_kind.rank
            else:
                a = args[i]
                a.name = p.name
                sty = ScalarTy(p.scalar)
                v: llir.Value = self.b.icmp_unsigned("!=", a, llir.Constant(I8, 0)) if sty.is_bool else a
                slot = self.alloca(reg_type(sty), p.name)
                self.b.store(v, slot)
                frame.vars[p.name] = (slot, sty)
                i += 1
        self.fault_ptr = args[i]
        self.fault_ptr.name = "fault"
        add_attr(self.fault_ptr.attributes, "noalias")
        self.launch_rank = args[i + 1]
        self.launch_rank.name = "launch_rank"
        self.extra_args = args[i + 2 :]
        if self.coarse is not None:
            self.extent = args[i + 2]
            self.extent.name = "extent"
            self.extra_args = args[i + 3 :]
        for name, ty in self.k.locals:
            frame.vars[name] = (self.alloca(value_type(ty), name), ty)
        ret_block = fn.append_basic_block("return")
        frame.exit = ret_block
        self.frame = frame
        if self.coarse is not None:
            from .coarsen_lower import lower_body

            lower_body(self, self.coarse)
        else:
            self.stmts(self.k.body)
        if not self.b.block.is_terminated:
            self.b.branch(ret_block)
        self.b.position_at_end(ret_block)
        self.b.ret_void()
        self.alloca_b.branch(body)
        self.t.decorate_entry(self, fn)
        return self.module

    def alloca(self, ty: llir.Type, name: str) -> llir.Value:
        slot = self.alloca_b.alloca(ty, name=name)
        self.alloca_b.store(llir.Constant(ty, None), slot)
        return slot

    def make_fault_fn(self) -> None:
        """`__az_fault(record, site, index, length)`: increment the record's count and, in the
        thread whose increment saw 0, write site, index and length.  Cold and never inlined,
        called from cold blocks (branch weights): `ptxas -arch=sm_90 -v` shows no spills for
        a 3x3 blur with checks left, coarsened or not, or for a register-blocked GEMM with 24
        unrolled checks; recording inline made that GEMM spill 20 bytes (56 registers, not 72)."""
        fty = llir.FunctionType(llir.VoidType(), [self.gptr, I32T, I64T, I64T])
        f = llir.Function(self.module, fty, "__az_fault")
        f.linkage = "internal"
        f.attributes.add("cold")
        f.attributes.add("noinline")
        rec, site, index, length = f.args
        b = llir.IRBuilder(f.append_basic_block("entry"))
        old = b.atomic_rmw("add", rec, llir.Constant(I32T, 1), "monotonic")
        with b.if_then(b.icmp_unsigned("==", old, llir.Constant(I32T, 0)), likely=True):
            p_site = b.gep(rec, [llir.Constant(I64T, 4)], inbounds=True, source_etype=I8)
            b.store(site, p_site, align=4)
            p_idx = b.gep(rec, [llir.Constant(I64T, 8)], inbounds=True, source_etype=I8)
            b.store(index, p_idx, align=8)
            p_len = b.gep(rec, [llir.Constant(I64T, 16)], inbounds=True, source_etype=I8)
            b.store(length, p_len, align=8)
        b.ret_void()
        self.fault_fn = f

    def fault(self, site: int, index: llir.Value, length: llir.Value) -> None:
        """Record a fault here, in the cold block the caller branched to."""
        self.b.call(self.fault_fn, [self.fault_ptr, llir.Constant(I32T, site), index, length])

    # ---- debug info -------------------------------------------------------------------------
    def setup_debug(self, fn: llir.Function) -> None:
        if not self.line_info:
            return
        import os

        m = self.module
        path = self.k.path
        difile = m.add_debug_info("DIFile", {"filename": os.path.basename(path), "directory": os.path.dirname(path)})
        cu = m.add_debug_info(
            "DICompileUnit",
            {
                "language": llir.DIToken("DW_LANG_Python"),
                "file": difile,
                "producer": "anodize",
                "runtimeVersion": 0,
                "isOptimized": True,
                "emissionKind": llir.DIToken("DebugDirectivesOnly" if self.t.name == "nvptx" else "LineTablesOnly"),
            },
            is_distinct=True,
        )
        sty = m.add_debug_info("DISubroutineType", {"types": m.add_metadata([None])})
        sp = m.add_debug_info(
            "DISubprogram",
            {
                "name": self.k.name,
                "file": difile,
                "line": self.k.line,
                "type": sty,
                "isLocal": False,
                "isDefinition": True,
                "scopeLine": self.k.line,
                "unit": cu,
                "spFlags": llir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
            },
            is_distinct=True,
        )
        fn.set_metadata("dbg", sp)
        m.add_named_metadata("llvm.dbg.cu", cu)
        m.add_named_metadata("llvm.module.flags", m.add_metadata([llir.Constant(I32T, 2), "Dwarf Version", llir.Constant(I32T, 4)]))
        m.add_named_metadata("llvm.module.flags", m.add_metadata([llir.Constant(I32T, 2), "Debug Info Version", llir.Constant(I32T, 3)]))
        self.di_scope = sp

    def locate(self, span: Span | None) -> None:
        if self.di_scope is None or span is None or span.path != self.k.path:
            return
        key = (span.line, span.col)
        loc = self._di_cache.get(key)
        if loc is None:
            loc = self.module.add_debug_info("DILocation", {"line": span.line, "column": span.col + 1, "scope": self.di_scope})
            self._di_cache[key] = loc
        self.b.debug_metadata = loc

    # ---- conversions -------------------------------------------------------------------------
    def conv(self, v: llir.Value, src: Ty, dst: Ty) -> llir.Value:
        if src == dst:
            return v
        b = self.b
        if isinstance(src, WitnessTy):
            src = I64
        assert isinstance(src, ScalarTy) and isinstance(dst, ScalarTy), (src, dst)
        if src == dst:
            return v
        if dst.is_bool:
            if src.is_float:
                return b.fcmp_unordered("!=", v, llir.Constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, llir.Constant(v.type, 0))
        if src.is_half or dst.is_half:
            return self.conv_half(v, src, dst)
        dt = reg_type(dst)
        if src.is_bool:
            return b.uitofp(v, dt) if dst.is_float else b.zext(v, dt)
        if src.is_int and dst.is_int:
            if dst.bits < src.bits:
                return b.trunc(v, dt)
            if dst.bits > src.bits:
                return b.sext(v, dt) if src.signed else b.zext(v, dt)
            return v
        if src.is_int and dst.is_float:
            return b.sitofp(v, dt) if src.signed else b.uitofp(v, dt)
        if src.is_float and dst.is_float:
            return b.fpext(v, dt) if dst.bits > src.bits else b.fptrunc(v, dt)
        # float -> int: saturating, NaN -> 0 (plain fptosi is poison out of range)
        kind = "fptosi" if dst.signed else "fptoui"
        fname = f"llvm.{kind}.sat.i{dst.bits}.{'f32' if src.bits == 32 else 'f64'}"
        return self.intrinsic(fname, dt, [v])

    def conv_half(self, v: llir.Value, src: ScalarTy, dst: ScalarTy) -> llir.Value:
        """A conversion from or to f16/bf16 (neither side bool-to-bool or identity): through
        f32 (exact from a half), or from f64 for ints and f64 (one rounding, not two)."""
        b = self.b
        if src.is_half:
            if dst.is_bool:
                return halves.nonzero(b, v)
            return self.conv(self.half_to_f32(v, src.name), F32, dst)
        if src.is_bool or src.is_int or src.bits == 64:
            wide = v if src == F64 else self.conv(v, src, F64)
            return self.half_from(wide, dst.name)
        return self.half_from(v, dst.name)  # from f32

    def widen(self, v: llir.Value, ty: ScalarTy) -> tuple[llir.Value, ScalarTy]:
        """A half operand as f32 (other types unchanged)."""
        return (self.half_to_f32(v, ty.name), F32) if ty.is_half else (v, ty)

    def narrow(self, v: llir.Value, ty: ScalarTy) -> llir.Value:
        """An f32 result rounded back to the half type `ty` (other types unchanged)."""
        return self.half_from(v, ty.name) if ty.is_half else v

    def half_to_f32(self, h: llir.Value, fmt: str) -> llir.Value:
        if fmt == "f16" and self.t.native_f16_convert:  # cvt.f32.f16
            return self.b.fpext(self.b.bitcast(h, llir.HalfType()), FLOAT)
        return halves.widen_half(self.b, h, fmt)

    def half_from(self, x: llir.Value, fmt: str) -> llir.Value:
        """An f32 or f64 rounded to nearest even in `fmt`, as its i16 pattern."""
        if fmt == "f16" and self.t.native_f16_convert:  # cvt.rn.f16.f32 / cvt.rn.f16.f64: one rounding
            return self.b.bitcast(self.b.fptrunc(x, llir.HalfType()), halves.I16)
        return halves.round_to_half(self.b, x, fmt)

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
        if self.unrolled_for(s):  # lower_locals.py: short constant loops of kernels with local arrays
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
        """`breakpoint()` stops only on the debug device (codegen/interp.py); nothing here."""

    def s_TileGemm(self, s: Any) -> None:
        """A tile kernel's GEMM form on tensor cores (codegen/tile_gemm.py, GPU only)."""
        from .tile_gemm_llvm import lower_tile_gemm

        lower_tile_gemm(self, s)

    def s_TileAttention(self, s: Any) -> None:
        """A tile kernel's attention form on tensor cores (codegen/tile_attention.py, GPU only)."""
        from .tc_attention import lower_tile_attention

        lower_tile_attention(self, s)

    def s_SharedDecl(self, s: ir.SharedDecl) -> None:
        if s.name not in self.shared_gv:
            self.shared_gv[s.name] = self.t.shared_global(self, s.name, s.ty, s.span)

    def s_Write(self, s: ir.Write) -> None:
        sv = self.frame.slices[s.slice.name]
        value = self.expr(s.value)
        if self.lanes is not None and self.lanes.write(self, s, value):  # a lane's element: stored later
            return
        ok, ptr, fidx, flen = self.address(sv, s.index)
        elem = sv.ty.elem
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

    def address(self, sv: SliceVal, index: tuple[ir.Expr, ...]) -> tuple[llir.Value, llir.Value, llir.Value, llir.Value]:
        return self.addr_dims(sv.ptr, mem_type(sv.ty.elem), list(sv.dims), self.index_values(index))

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

    def e_Len(self, e: ir.Len) -> llir.Value:
        return self.frame.slices[e.slice.name].dims[e.axis]

    def e_Read(self, e: ir.Read) -> llir.Value:
        if self.lanes is not None:  # a lane's element, loaded already
            got = self.lanes.read(self, e)
            if got is not None:
                return got  # type: ignore[no-any-return]
        sv = self.frame.slices[e.slice.name]
        ok, ptr, fidx, flen = self.address(sv, e.index)
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

    def e_Atomic(self, e: ir.Atomic) -> llir.Value | None:
        ty = e.ty
        if isinstance(ty, ScalarTy) and ty.info.mem_bits < 32:  # 8- and 16-bit elements (relaxed, device)
            return self.narrow_atomic(e, ty)
        from .lower_effects import lower_atomic

        return lower_atomic(self, e)

    def e_SharedAtomic(self, e: ir.SharedAtomic) -> llir.Value | None:
        from .shared_safe import lower_shared_atomic

        return lower_shared_atomic(self, e)

    def narrow_atomic(self, e: ir.Atomic, ty: ScalarTy) -> llir.Value:
        """An atomic on an 8- or 16-bit element: a half type's add/min/max is a compare-and-swap
        loop over its bits (f16 add native on the GPU); ints use LLVM's own expansion."""
        sv = self.frame.slices[e.slice.name]
        idx = self.conv(self.expr(e.index), e.index.ty, I64)
        assert e.value is not None
        val = self.expr(e.value)
        ok, ptr, fidx, flen = self.addr_dims(sv.ptr, mem_type(ty), list(sv.dims), [idx])
        if ty.is_half and e.op != "exchange":
            v = self.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.half_atomic(e.op, ptr, val, ty), reg_type(ty))
            assert v is not None
            return v
        if e.op == "exchange":
            op = "xchg"
        else:
            op = {"add": "add", "sub": "sub", "and": "and", "or": "or", "xor": "xor",
                  "min": "min" if ty.signed else "umin", "max": "max" if ty.signed else "umax"}[e.op]
        v = self.guarded(e.checked, ok, e.site, fidx, flen, lambda: self.b.atomic_rmw(op, ptr, val, "monotonic"), reg_type(ty))
        assert v is not None
        return v

    def s_Print(self, s: ir.Print) -> None:
        from .lower_effects import lower_print

        lower_print(self, s)

    def s_Assert(self, s: ir.Assert) -> None:
        from .lower_effects import lower_assert

        lower_assert(self, s)

    def half_atomic(self, op: str, ptr: llir.Value, val: llir.Value, ty: ScalarTy) -> llir.Value:
        """`add`/`min`/`max` on an f16/bf16 element: a compare-and-swap loop on its 16 bits,
        the same on every target (the new value is computed in f32 and rounded)."""
        b = self.b
        if op == "add" and ty.name == "f16" and self.t.native_half_atomic_add:  # atom.add.noftz.f16 (sm_70+)
            h = llir.HalfType()
            return b.bitcast(b.atomic_rmw("fadd", ptr, b.bitcast(val, h), "monotonic"), halves.I16)
        pre = b.block
        first = b.load(ptr, typ=halves.I16, align=2)
        loop = self.fn.append_basic_block("half_atomic.loop")
        done = self.fn.append_basic_block("half_atomic.done")
        b.branch(loop)
        b.position_at_end(loop)
        old = b.phi(halves.I16)
        old.add_incoming(first, pre)
        wide = self.float_binop({"add": "+", "min": "min", "max": "max"}[op], self.widen(old, ty)[0], self.widen(val, ty)[0], F32)
        pair = b.cmpxchg(ptr, old, self.narrow(wide, ty), "monotonic", "monotonic")
        seen = b.extract_value(pair, 0)
        old.add_incoming(seen, b.block)
        b.cbranch(b.extract_value(pair, 1), done, loop)
        b.position_at_end(done)
        return seen

    def e_RawId(self, e: ir.RawId) -> llir.Value:
        return self.t.sreg(self, e.reg, e.axis)

    def e_MathCall(self, e: ir.MathCall) -> llir.Value:
        """Classification is an `fcmp` on every backend; `ldexp`'s exponent becomes a
        saturated i32; the rest is the target's (libdevice / LLVM intrinsic / libm)."""
        args = [self.expr(a) for a in e.args]
        x_ty = e.args[0].ty
        assert isinstance(x_ty, ScalarTy)
        if x_ty.is_half:  # f32's function on the widened values, rounded back once
            args = [self.widen(a, t)[0] if isinstance(t, ScalarTy) and t.is_half else a
                    for a, t in zip(args, (x.ty for x in e.args), strict=True)]
            x_ty = F32
        b = self.b
        if e.name == "isnan":
            return b.fcmp_unordered("uno", args[0], args[0])
        if e.name in ("isinf", "isfinite"):
            mag = self.intrinsic(f"llvm.fabs.{_fs(x_ty)}", args[0].type, [args[0]])
            inf = llir.Constant(args[0].type, float("inf"))
            return b.fcmp_ordered("==" if e.name == "isinf" else "!=", mag, inf)  # `one`: false for NaN
        if e.name == "ldexp":
            args[1] = self.exponent_i32(args[1], e.args[1].ty)  # type: ignore[arg-type]
        out = self.t.math(self, e.name, args, x_ty)
        return self.narrow(out, e.ty) if isinstance(e.ty, ScalarTy) and e.ty.is_half else out

    def exponent_i32(self, n: llir.Value, ty: ScalarTy) -> llir.Value:
        """An integer exponent as i32, clamped to +-4096 (beyond it every ldexp saturates
        to 0 or inf, so the result is Python's for any exponent of any width)."""
        b = self.b
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

    def e_Collective(self, e: ir.Collective) -> llir.Value:
        return lower_collective(self, e)

    def e_WarpOp(self, e: ir.WarpOp) -> llir.Value:
        args = [self.expr(a) for a in e.args]
        return self.t.warp(self, e.op, args, e.ty, e.span)

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
            return self.intrinsic(f"llvm.{op}num.{_fs(ty)}", a.type, [a, c])
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

    def e_Call(self, e: ir.Call) -> llir.Value | None:
        f = e.func
        caller = self.frame
        frame = Frame()
        for (pname, pty), arg in zip(f.params, e.args, strict=True):
            if isinstance(pty, SliceTy):
                assert isinstance(arg, ir.SliceRef)
                frame.slices[pname] = caller.slices[arg.name]
            elif isinstance(pty, LocalArrayTy):  # by reference: the caller's array
                assert isinstance(arg, ir.LocalArrayRef)
                frame.vars[pname] = caller.vars[arg.name]
            else:
                slot = self.alloca(value_type(pty), f"{f.name}.{pname}")
                self.b.store(self.conv(self.expr(arg), arg.ty, pty), slot)
                frame.vars[pname] = (slot, pty)
        for name, ty in f.locals:
            if name not in frame.vars:
                frame.vars[name] = (self.alloca(value_type(ty), f"{f.name}.{name}"), ty)
        frame.exit = self.fn.append_basic_block(f"{f.name}.exit")
        if isinstance(f.ret, (ScalarTy, WitnessTy, TupleTy)):
            frame.ret_slot = self.alloca(value_type(f.ret), f"{f.name}.ret")
        self.frame = frame
        try:
            self.stmts(f.body)
            if not self.b.block.is_terminated:
                self.b.branch(frame.exit)
            self.b.position_at_end(frame.exit)
        finally:
            self.frame = caller
        if frame.ret_slot is not None:
            return self.b.load(frame.ret_slot, typ=value_type(f.ret))
        return None

    def e_SliceRef(self, e: ir.SliceRef) -> llir.Value:
        raise AssertionError("a slice is not a value")

    def e_SharedRef(self, e: ir.SharedRef) -> llir.Value:
        raise AssertionError("a shared array is not a value")


_DIM_NAMES = {1: ("len",), 2: ("rows", "cols"), 3: ("layers", "rows", "cols")}


def _fs(ty: ScalarTy) -> str:
    return "f32" if ty.bits == 32 else "f64"


def _align(ty: ScalarTy) -> int:
    return max(1, ty.info.mem_bits // 8)


def lower_kernel(k: ir.KernelIR, target: Target, *, bounds_checks: bool = True, line_info: bool = False) -> Lowerer:
    """Lower a kernel; the returned Lowerer holds `.module`, `.entry_name` and `.checks`."""
    lw = Lowerer(k, target, bounds_checks=bounds_checks, line_info=line_info)
    lw.lower()
    return lw


__all__ = ["Lowerer", "Target", "lower_kernel", "reg_type", "mem_type", "value_type", "BOOL", "I32"]
