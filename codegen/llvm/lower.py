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

Here: the `Target` interface and the `Lowerer`: the state of the function being built (module,
function, builders, frame, target) with its plumbing, entry, fault records, debug info and
conversions, and the dispatch of each IR node to its lowering, looked up by the node's type in
registry.py.  The Lowerer holds its collaborators, each a class of its own module that reaches
the state through `lw`: `lw.statements` (stmts.py), `lw.expressions` (exprs.py), `lw.calls`
(calls.py), `lw.locals` (locals.py) and `lw.bounds` (bounds.py: the bounds checks); other node
types are lowered by the modules that register for them (codegen/lowerings.py lists them all).
The LLVM types are in types.py.
"""

from __future__ import annotations

import os
from typing import Any

import llvmlite.ir as llir

from anodize.language.diagnostics import Span

from anodize.language import ir
from anodize.language.types import BOOL, F32, F64, I32, I64, ScalarTy, SharedTy, SliceTy, Ty, WitnessTy

from . import halves

from .bounds import BoundsChecks
from .calls import CallLowering
from .coarsen import coarsen_plan
from .coarsen_lower import lower_body
from .effects import global_string, llvm_order, rmw_op
from .exprs import ExprLowering
from .locals import LocalsLowering
from .record_align import aligned_records, lower_versioned
from .registry import LOWERINGS, Handler, missing
from .stmts import StmtLowering
from .block_slots import forward_block_slots
# the LLVM types live in types.py; all re-exported here (codegen's modules import them from here)
from .types import DOUBLE, FLOAT, I1, I8, I32T, I64T, INTRINSIC_MATH, W2, W3, WITNESS_LL, _DIM_NAMES, Frame, SliceVal, _align, _fs, add_attr, mem_type, reg_type, value_type


class Target:
    """What differs between the GPU and the CPU backends."""

    name = "abstract"
    global_as = 0
    shared_as = 0
    table_as = 0  # where module-level constant tables live (the GPU's constant space)
    vector_grid_stride = False  # lower elementwise grid-stride loops in 16-byte chunks (gridstride.py)
    coarsen = False  # several indices per thread for element-wise kernels (coarsen.py)
    # an aligned copy of a body over record slices, behind a runtime test of their bases
    # (record_align.py); ANODIZE_RECORD_ALIGN=0 turns it off (for measurements)
    align_records = False
    # whole warps of 32- or 64-byte records moved lane-contiguously in the aligned copy, through
    # warp shuffles (record_warp.py)
    warp_records = False
    native_half_atomic_add = False  # `atomicrmw fadd half` (else a compare-and-swap loop)
    native_f16_convert = False  # `fpext`/`fptrunc` of LLVM `half` (else integer IR, codegen/llvm/halves.py)
    # a kernel calling `az.grid.sync()` takes its grid barrier's counter as one more hidden `ptr`
    # (the runtime gives every launch its own: runtime/grid_counter.py); else the target's own scheme
    grid_counter_param = False

    def f8_to_f16(self, lw: Lowerer, h: llir.Value, fmt: str) -> llir.Value | None:
        """The i8 pattern `h` of the f8 type `fmt` as an f16's i16 pattern (exact) by an
        instruction of the target, or None: the integer IR of codegen/llvm/halves.py."""
        return None

    def f8_from_f32(self, lw: Lowerer, x: llir.Value, fmt: str) -> llir.Value | None:
        """The f32 `x` rounded to nearest even, saturating, in the f8 type `fmt` (its i8
        pattern) by an instruction of the target, or None: the integer IR."""
        return None

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

    def float_minmax(self, lw: Lowerer, op: str, a: llir.Value, c: llir.Value) -> llir.Value:
        """`op` ("min"/"max") of two floats, a NaN operand ignored: `llvm.minnum`/`llvm.maxnum`."""
        fs = "f32" if a.type == FLOAT else "f64"
        return lw.intrinsic(f"llvm.{op}num.{fs}", a.type, [a, c])

    def foreign_call(self, lw: Lowerer, e: ir.ForeignCall, args: list[llir.Value]) -> llir.Value:
        """A call of a foreign device function: a call of the external `e.symbol` (on the GPU a PTX
        `.extern .func`, linked at load time: anodize/foreign.py)."""
        fn = lw.declare(e.symbol, reg_type(e.ty), [a.type for a in args])
        return lw.b.call(fn, args)

    def barrier(self, lw: Lowerer, span: Span | None) -> None:
        raise NotImplementedError

    def grid_barrier(self, lw: Lowerer, span: Span | None) -> None:
        """`az.grid.sync()`: every thread of the (cooperative, co-resident) grid."""
        raise NotImplementedError

    def fence(self, lw: Lowerer, kind: str, span: Span | None) -> None:
        """`az.threadfence()` (kind "threadfence") or `az.warp.sync()` ("warp_sync")."""
        raise NotImplementedError

    def warp(self, lw: Lowerer, op: str, args: list[llir.Value], ty: ScalarTy, span: Span | None) -> llir.Value:
        raise NotImplementedError

    def shared_global(self, lw: Lowerer, name: str, ty: SharedTy, span: Span | None = None) -> llir.Value:
        raise NotImplementedError

    # atomics and print (codegen/llvm/effects.py)
    string_as = 0  # where constant strings (printf formats) live

    def sync_scope(self, scope: str) -> str:
        """The LLVM `syncscope(...) ` prefix of an atomic of `scope` ("" for the system scope)."""
        return ""

    def atomic_rmw(self, lw: Lowerer, op: str, ptr: llir.Value, val: llir.Value, ty: ScalarTy, scope: str, order: str) -> llir.Value:
        return lw.b.atomic_rmw(rmw_op(op, ty), ptr, val, self.sync_scope(scope) + llvm_order(order))

    def cstring(self, lw: Lowerer, text: str) -> llir.Value:
        return global_string(lw, text, self.string_as)

    def emit_print(self, lw: Lowerer, fmt: llir.Value, args: llir.Value) -> None:
        """Print `fmt` (a printf format) with `args` (8-byte slots: i64, double or string pointer)."""
        raise NotImplementedError


class Lowerer:
    """The state of one kernel's lowering, its plumbing, and the dispatch of IR nodes to their
    lowerings (registry.py), with `overrides` first: the node lowerings of a specialised
    lowerer (the CPU backend's `cpu.regions.RegionLowerer`)."""

    overrides: dict[type, Handler] = {}
    unroll_for_local_arrays = True  # locals.py: unroll constant loops of kernels with local arrays

    def __init__(self, k: ir.KernelIR, target: Target, *, bounds_checks: bool = True, line_info: bool = False):
        self.lowerings: dict[type, Handler] = LOWERINGS | self.overrides
        self.statements = StmtLowering(self)
        self.expressions = ExprLowering(self)
        self.calls = CallLowering(self)
        self.locals = LocalsLowering(self)
        self.bounds = BoundsChecks(self)
        self.k = k
        self.t = target
        self.checks_on = bounds_checks
        self.line_info = line_info
        self.checks = 0
        self.module = llir.Module(name=k.name)
        # every slot's zero store in the entry block, by id(slot) (block_slots.py removes the block-local slots)
        self.zero_stores: dict[int, tuple[llir.AllocaInstr, llir.StoreInstr]] = {}
        self.module.triple = target.triple()
        self.gptr = llir.PointerType(addrspace=target.global_as)
        self.decls: dict[str, llir.Function] = {}
        self.shared_gv: dict[str, llir.Value] = {}
        self.tables: dict[str, llir.Value] = {}
        self.entry_name = k.name
        self.di_scope: Any = None
        self._di_cache: dict[tuple[int, int], Any] = {}
        self.lanes: Any = None  # gridstride.Lanes / coarsen.Lanes while lanes of a body are lowered
        # coarsening (codegen/llvm/coarsen.py): each thread takes several indices along x
        self.coarse: Any = None
        if target.coarsen:
            self.coarse = coarsen_plan(k)
        self.grid_counter = target.grid_counter_param and k.grid_sync
        self.grid_counter_ptr: Any = None
        # the i32 local counting the block collectives run so far (codegen/llvm/collectives.py)
        self.collective_count: llir.Value | None = None

    # ---- dispatch ---------------------------------------------------------------------------
    def stmts(self, body: tuple[ir.Stmt, ...]) -> None:
        for s in body:
            if self.b.block.is_terminated:
                self.b.position_at_end(self.fn.append_basic_block("dead"))
            self.locate(s.span)
            try:
                lower = self.lowerings[type(s)]
            except KeyError:
                raise missing(s) from None
            lower(self, s)

    def expr(self, e: ir.Expr) -> llir.Value:
        try:
            lower = self.lowerings[type(e)]
        except KeyError:
            raise missing(e) from None
        return lower(self, e)  # type: ignore[no-any-return]

    def sreg64(self, reg: str, axis: str) -> llir.Value:
        """A special register (`Target.sreg`) as i64."""
        return self.b.zext(self.t.sreg(self, reg, axis), I64T)

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
            out.append(I64T)  # the user's extent along x (grid_x * block_x): codegen/llvm/coarsen.py
        if self.grid_counter:
            out.append(self.gptr)  # this launch's grid-barrier counter (artifact.py)
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
                sl = self.k.param_types[p.name] if p.scalar.kind == "r" else SliceTy(p.slice_kind, ScalarTy(p.scalar))
                frame.slices[p.name] = SliceVal(p.name, sl, data, dims)  # type: ignore[arg-type]
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
        i += 2
        if self.coarse is not None:
            self.extent = args[i]
            self.extent.name = "extent"
            i += 1
        if self.grid_counter:
            self.grid_counter_ptr = args[i]
            self.grid_counter_ptr.name = "grid_counter"
            i += 1
        self.extra_args = args[i:]
        for name, ty in self.k.locals:
            frame.vars[name] = (self.alloca(value_type(ty), name), ty)
        ret_block = fn.append_basic_block("return")
        frame.exit = ret_block
        self.frame = frame
        aligned: dict[str, int] = {}
        if self.t.align_records and self.coarse is None and os.environ.get("ANODIZE_RECORD_ALIGN", "1") != "0":
            aligned = aligned_records(self.k)
        if self.coarse is not None:
            lower_body(self, self.coarse)
        elif aligned:
            lower_versioned(self, aligned)
        else:
            self.stmts(self.k.body)
        if not self.b.block.is_terminated:
            self.b.branch(ret_block)
        self.b.position_at_end(ret_block)
        self.b.ret_void()
        self.alloca_b.branch(body)
        forward_block_slots(fn, self.zero_stores)
        self.t.decorate_entry(self, fn)
        return self.module

    def alloca(self, ty: llir.Type, name: str) -> llir.Value:
        slot = self.alloca_b.alloca(ty, name=name)
        self.zero_stores[id(slot)] = (slot, self.alloca_b.store(llir.Constant(ty, None), slot))
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
        if dst.is_bool and not src.is_half:
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
        if fmt in ("f8e4m3", "f8e5m2"):
            wide = self.t.f8_to_f16(self, h, fmt)
            if wide is not None:
                h, fmt = wide, "f16"
        if fmt == "f16" and self.t.native_f16_convert:  # cvt.f32.f16
            return self.b.fpext(self.b.bitcast(h, llir.HalfType()), FLOAT)
        return halves.widen_half(self.b, h, fmt)

    def half_from(self, x: llir.Value, fmt: str) -> llir.Value:
        """An f32 or f64 rounded to nearest even in `fmt`, as its i16 (i8) pattern."""
        if fmt in ("f8e4m3", "f8e5m2") and x.type == FLOAT:
            narrow = self.t.f8_from_f32(self, x, fmt)
            if narrow is not None:
                return narrow
        if fmt == "f16" and self.t.native_f16_convert:  # cvt.rn.f16.f32 / cvt.rn.f16.f64: one rounding
            return self.b.bitcast(self.b.fptrunc(x, llir.HalfType()), halves.I16)
        return halves.round_to_half(self.b, x, fmt)


def lower_kernel(k: ir.KernelIR, target: Target, *, bounds_checks: bool = True, line_info: bool = False) -> Lowerer:
    """Lower a kernel; the returned Lowerer holds `.module`, `.entry_name` and `.checks`."""
    lw = Lowerer(k, target, bounds_checks=bounds_checks, line_info=line_info)
    lw.lower()
    return lw


__all__ = ["Lowerer", "Target", "lower_kernel", "reg_type", "mem_type", "value_type", "BOOL", "I32"]
