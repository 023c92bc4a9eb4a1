"""The CPU backend for kernels with barriers, shared memory or warp operations: one host
thread runs a whole block, looping over its threads between synchronisation points.

`split.plan_kernel` cuts the typed model into regions (codegen/cpu/split.py); this
module lowers that plan with the ordinary lowering (`Lowerer`) inside each region's
thread loop:

* a `Region` is a loop over the live threads of the block (or, inside a warp region, of
  one warp) in linear order (x fastest), each with its own `tid`, lane id and locals;
* a local that lives across regions is a per-thread context array, laid out by slot
  (`base + nthreads * offset`) in one frame buffer per launch; one that a single region
  touches stays a register (zeroed for each thread, as each GPU thread's locals start);
* a uniform `if`/`while`/`for` (one that contains a split point) reads its condition or
  bounds from the first live thread's slot, after checking that every live thread
  computed the same: a disagreement (a kernel the checker would reject, run without the
  checker) stops the launch with a RuntimeError naming the block, where the GPU would
  hang or corrupt the block;
* a thread that returns, or leaves a split loop or an inlined helper early, records why
  in its `st` slot; later regions skip it until the construct it left ends;
* collectives and warp shuffles compute from the threads' slots the exact bits the GPU
  algorithm gives (codegen/llvm/collectives.py: butterfly warp reduce, then warps in order;
  shfl_up warp scan; PTX `shfl.sync` source-lane rules, an invalid or exited source lane
  giving the caller's own value).

The launcher and the Python entry are in regions_run.py; the collectives and warp
operations in regions_warp.py.

`ctx` (80 bytes): i32[14] ids (tid xyz (unused here), ctaid xyz, ntid xyz, nctaid xyz,
lane, dynamic shared bytes), i64 shared base (56), i64 frame base (64), i32 error (72).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import llvmlite.ir as llir

from anodize.language import ir, messages
from anodize.language.diagnostics import CheckError, Span
from anodize.language.types import ScalarTy, Ty
from anodize.language.vocab import COLLECTIVE_SCRATCH

from . import split as cs
from .backend import CPUTarget
from .engine import host_target_machine
from ..llvm.lower import I1, I8, I32T, I64T, Lowerer, mem_type, value_type
from ..llvm.stmts import step_latch
from .regions_warp import RegionCollectives, _c32, _c64

OFF_SHARED, OFF_FRAME, OFF_ERROR = 56, 64, 72
CTX_BYTES = 80
_AXIS = {"x": 0, "y": 1, "z": 2}


class SplitTarget(CPUTarget):
    """The host target of the region lowering: thread ids come from the thread loop."""

    def __init__(self, k: ir.KernelIR):
        # the collectives' scratch buffer is the GPU's: here they read the threads' slots
        super().__init__(dataclasses.replace(k, shared=tuple(x for x in k.shared if x[0] != COLLECTIVE_SCRATCH)), threaded=True)

    def sreg(self, lw: Lowerer, reg: str, axis: str) -> llir.Value:
        assert isinstance(lw, RegionLowerer)
        if reg == "tid":
            return lw.cur_tid[_AXIS[axis]]
        if reg == "laneid":
            return lw.cur_lane
        return super().sreg(lw, reg, axis)

    def _bug(self, span: Span | None, what: str) -> None:
        bug = RuntimeError(f"the region lowering met {what} inside a region (the split plan missed it)")
        raise CheckError([messages.internal_error(span or Span.point("<kernel>", 1, 0), bug)])

    def barrier(self, lw: Lowerer, span: Span | None) -> None:
        self._bug(span, "a barrier")

    def warp(self, lw: Lowerer, op: str, args: list[llir.Value], ty: ScalarTy, span: Span | None) -> llir.Value:
        self._bug(span, f"`warp.{op}`")
        raise AssertionError

    def fence(self, lw: Lowerer, kind: str, span: Span | None) -> None:
        if kind == "threadfence":
            lw.b.fence("seq_cst")
        else:
            self._bug(span, "`warp.sync()`")


@dataclasses.dataclass(frozen=True)
class _Root:
    span: Span | None = None


@dataclasses.dataclass(frozen=True)
class _SplitLoop:
    brk: int
    cont: int


@dataclasses.dataclass
class _Loop:
    t: llir.Value
    latch: llir.Block
    leaves: dict[int, llir.Block]


class RegionLowerer(Lowerer):
    """The ordinary `Lowerer` specialised for a region-split plan: the thread loops, the
    per-thread slots, and its own lowering of `return`/`break`/`continue` (leaving a split
    construct), of local array declarations and of the plan's `Scope`/`Leave` nodes
    (`overrides`, below the class); its collectives and warp operations are `self.warps`."""

    # a context array lives in the frame, indexed by thread, where SROA cannot keep it in
    # registers, so unrolling constant loops for it (llvm/locals.py: unrolled_for) would only
    # grow the module (sgemm's: 4.9 MB of IR and 37 s of O3 unrolled, against 4.7 s)
    unroll_for_local_arrays = False
    node_lowerings: dict[type, Callable[..., None]]  # the plan's nodes: set below the class

    def __init__(self, plan: cs.Plan, target: SplitTarget, *, bounds_checks: bool = True):
        super().__init__(dataclasses.replace(plan.kernel, body=(_Root(),)), target, bounds_checks=bounds_checks)
        self.plan = plan
        self.warps = RegionCollectives(self)
        params = {p.name for p in plan.kernel.params if not p.is_slice}
        self.context, self.private = cs.classify(plan, params)
        self.types: dict[str, Ty] = dict(plan.kernel.locals) | dict(plan.arrays)
        for p in plan.kernel.params:
            if not p.is_slice:
                self.types[p.name] = plan.kernel.param_types[p.name]
        c = plan.kernel.contract
        block = c.block if c is not None else None
        self.fixed_block = (tuple(block) + (1, 1, 1))[:3] if block and all(isinstance(d, int) for d in block) else None
        self.min_threads = max([n.c.threads for n in _all_nodes(plan.nodes) if isinstance(n, cs.Coll)] + [0])
        self.cur_tid: tuple[llir.Value, ...] = ()
        self.cur_lane: llir.Value | None = None
        self.loop: _Loop | None = None
        self.split_loops: list[_SplitLoop] = []
        self.scope_ends: dict[int, llir.Block] = {}
        self.layout()

    # ---- the frame: per-thread slots ----------------------------------------------------
    def layout(self) -> None:
        td = host_target_machine().target_data
        user = sorted(n for n in self.context if n not in self.plan.hidden)
        hidden = sorted(n for n in self.context if n in self.plan.hidden)
        slots = [(n, self.slot_type(n)) for n in user]
        if self.plan.leaves:
            slots.append(("$$st", I32T))
        self.zero_per_thread = 0
        off = 0
        self.offsets: dict[str, tuple[int, llir.Type]] = {}
        for i, (n, t) in enumerate(slots + [(n, self.slot_type(n)) for n in hidden]):
            if i == len(slots):
                self.zero_per_thread = off
            self.offsets[n] = (off, t)
            off += max(1, t.get_abi_size(td))
        if len(slots) == len(self.offsets):
            self.zero_per_thread = off
        self.frame_per_thread = off

    def slot_type(self, name: str) -> llir.Type:
        """A context local's slot: its register type, or a local array's whole storage."""
        ty = self.types[name]
        if name in self.plan.arrays:
            return llir.ArrayType(mem_type(ty.elem), ty.size)  # type: ignore[attr-defined]
        return value_type(ty)

    def s_LocalArrayDecl(self, s: ir.LocalArrayDecl) -> None:
        """A context array is the thread's slot (bound by the region): zero it where the
        declaration runs; a region's private array is an alloca as in any kernel."""
        if s.name not in self.context:
            self.locals.s_LocalArrayDecl(s)
            return
        slot, _ = self.frame.vars[s.name]
        self.b.store(llir.Constant(self.slot_type(s.name), None), slot)

    def slot(self, name: str, t: llir.Value) -> llir.Value:
        base, lt = self.bases[name]
        return self.b.gep(base, [self.b.zext(t, I64T)], inbounds=True, source_etype=lt)

    # ---- entry ----------------------------------------------------------------------------
    def s__Root(self, s: _Root) -> None:
        b = self.b
        self.kframe = self.frame
        self.fn_exit = self.frame.exit
        ctx = self.extra_args[0]
        self.ctx = ctx
        if self.fixed_block is not None:  # the contract's block (RegionModule refuses any other)
            self.nx, self.ny, self.nz = (_c32(d) for d in self.fixed_block)
        else:
            self.nx, self.ny, self.nz = (self.t.sreg(self, "ntid", a) for a in "xyz")
        n = b.mul(b.mul(self.nx, self.ny), self.nz)
        self.n = n
        rounded = b.and_(b.add(n, _c32(31)), _c32(-32))
        nalloc = b.zext(b.select(b.icmp_unsigned("<", rounded, _c32(self.min_threads)), _c32(self.min_threads), rounded), I64T)
        frame = b.inttoptr(b.load(b.gep(ctx, [_c64(OFF_FRAME)], inbounds=True, source_etype=I8), typ=I64T, align=8), llir.PointerType())
        self.bases = {name: (b.gep(frame, [b.mul(nalloc, _c64(off))], inbounds=True, source_etype=I8), t) for name, (off, t) in self.offsets.items()}
        if self.zero_per_thread:
            memset = self.declare("llvm.memset.p0.i64", llir.VoidType(), [llir.PointerType(), I8, I64T, I1])
            b.call(memset, [frame, llir.Constant(I8, 0), b.mul(nalloc, _c64(self.zero_per_thread)), llir.Constant(I1, 0)])
        for p in self.plan.kernel.params:  # a parameter the kernel assigns: one copy per thread
            if p.name in self.context:
                v = b.load(self.frame.vars[p.name][0], typ=self.offsets[p.name][1])
                self.counted(_c32(0), n, lambda t, v=v, name=p.name: self.b.store(v, self.slot(name, t)))
        self.nodes(self.plan.nodes, _c32(0), n)

    # ---- loops ----------------------------------------------------------------------------
    def counted(self, lo: llir.Value, hi: llir.Value, body: Callable[[llir.Value], None], name: str = "i") -> None:
        b = self.b
        pre = b.block
        head, bodyb, end = (self.fn.append_basic_block(f"{name}.{x}") for x in ("head", "body", "end"))
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I32T, name=name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_unsigned("<", i, hi), bodyb, end)
        b.position_at_end(bodyb)
        body(i)
        i.add_incoming(b.add(i, _c32(1)), b.block)
        b.branch(head)
        b.position_at_end(end)

    def live(self, t: llir.Value) -> llir.Value:
        if not self.plan.leaves:
            return llir.Constant(I1, 1)
        return self.b.icmp_unsigned("==", self.b.load(self.slot("$$st", t), typ=I32T), _c32(0))

    def thread_loop(self, lo: llir.Value, hi: llir.Value, body: Callable[[], None]) -> None:
        """Run `body` for each live thread of [lo, hi), with its ids (x fastest)."""
        b = self.b
        if self.fixed_block is not None:  # constant extents: ids by (cheap) division, no carries
            self.fixed_thread_loop(lo, hi, body)
            return
        tx0 = b.urem(lo, self.nx)
        rest = b.udiv(lo, self.nx)
        ty0, tz0 = b.urem(rest, self.ny), b.udiv(rest, self.ny)
        pre = b.block
        head, bodyb, latch, end = (self.fn.append_basic_block(f"thr.{x}") for x in ("head", "body", "latch", "end"))
        b.branch(head)
        b.position_at_end(head)
        t, tx, ty, tz = (b.phi(I32T, name=x) for x in ("t", "tx", "ty", "tz"))
        for phi, v in zip((t, tx, ty, tz), (lo, tx0, ty0, tz0), strict=True):
            phi.add_incoming(v, pre)
        b.cbranch(b.icmp_unsigned("<", t, hi), bodyb, end)
        b.position_at_end(bodyb)
        saved = (self.cur_tid, self.cur_lane, self.loop)
        self.cur_tid, self.cur_lane = (tx, ty, tz), b.and_(t, _c32(31))
        self.loop = _Loop(t, latch, {})
        if self.plan.leaves:
            go = self.fn.append_basic_block("thr.live")
            b.cbranch(self.live(t), go, latch)
            b.position_at_end(go)
        body()
        if not b.block.is_terminated:
            b.branch(latch)
        b.position_at_end(latch)
        one = _c32(1)
        x1 = b.add(tx, one)
        wx = b.icmp_unsigned("==", x1, self.nx)
        y1 = b.select(wx, b.add(ty, one), ty)
        wy = b.icmp_unsigned("==", y1, self.ny)
        for phi, v in zip((t, tx, ty, tz), (b.add(t, one), b.select(wx, _c32(0), x1), b.select(wy, _c32(0), y1), b.select(wy, b.add(tz, one), tz)), strict=True):
            phi.add_incoming(v, latch)
        b.branch(head)
        b.position_at_end(end)
        self.cur_tid, self.cur_lane, self.loop = saved

    def fixed_thread_loop(self, lo: llir.Value, hi: llir.Value, body: Callable[[], None]) -> None:
        b = self.b
        assert self.fixed_block is not None
        nx, ny, _ = self.fixed_block
        pre = b.block
        head, bodyb, latch, end = (self.fn.append_basic_block(f"thr.{x}") for x in ("head", "body", "latch", "end"))
        b.branch(head)
        b.position_at_end(head)
        t = b.phi(I32T, name="t")
        t.add_incoming(lo, pre)
        b.cbranch(b.icmp_unsigned("<", t, hi), bodyb, end)
        b.position_at_end(bodyb)
        saved = (self.cur_tid, self.cur_lane, self.loop)
        if ny * self.fixed_block[2] == 1:
            ids = [t, _c32(0), _c32(0)]
        else:
            ids = [b.urem(t, self.nx), b.urem(b.udiv(t, self.nx), self.ny), b.udiv(t, _c32(nx * ny))]
        self.cur_tid, self.cur_lane = tuple(ids), b.and_(t, _c32(31))
        self.loop = _Loop(t, latch, {})
        if self.plan.leaves:
            go = self.fn.append_basic_block("thr.live")
            b.cbranch(self.live(t), go, latch)
            b.position_at_end(go)
        body()
        if not b.block.is_terminated:
            b.branch(latch)
        b.position_at_end(latch)
        t.add_incoming(b.add(t, _c32(1)), latch)
        b.branch(head)
        b.position_at_end(end)
        self.cur_tid, self.cur_lane, self.loop = saved

    def leave_block(self, lid: int) -> llir.Block:
        lp = self.loop
        assert lp is not None
        blk = lp.leaves.get(lid)
        if blk is None:
            blk = lp.leaves[lid] = self.fn.append_basic_block(f"leave.{lid}")
            saved = self.b.block
            self.b.position_at_end(blk)
            self.b.store(_c32(lid), self.slot("$$st", lp.t))
            self.b.branch(lp.latch)
            self.b.position_at_end(saved)
        return blk

    def clear(self, lid: int, lo: llir.Value, hi: llir.Value) -> None:
        """Threads that left construct `lid` take part again after it."""
        if not self.plan.leaves:
            return

        def body(t: llir.Value) -> None:
            p = self.slot("$$st", t)
            left = self.b.icmp_unsigned("==", self.b.load(p, typ=I32T), _c32(lid))
            self.b.store(self.b.select(left, _c32(0), self.b.load(p, typ=I32T)), p)

        self.counted(lo, hi, body, "clr")

    def decide(self, names: list[str], lo: llir.Value, hi: llir.Value) -> tuple[llir.Value, list[llir.Value]]:
        """(some thread of [lo, hi) is live, the first live thread's values of `names`); a live
        thread whose values differ stops the launch (see the module docstring).  Two simple
        loops (the first live thread; then an or-reduction of the disagreements) that the
        optimiser can vectorise; without early leavers the first live thread is `lo`."""
        b = self.b
        if self.plan.leaves:
            lead_slot = self.alloca_b.alloca(I32T, name="lead")
            b.store(hi, lead_slot)
            head, body, found, end = (self.fn.append_basic_block(f"lead.{x}") for x in ("head", "body", "found", "end"))
            pre = b.block
            b.branch(head)
            b.position_at_end(head)
            t = b.phi(I32T, name="t")
            t.add_incoming(lo, pre)
            b.cbranch(b.icmp_unsigned("<", t, hi), body, end)
            b.position_at_end(body)
            t.add_incoming(b.add(t, _c32(1)), body)
            b.cbranch(self.live(t), found, head)
            b.position_at_end(found)
            b.store(t, lead_slot)
            b.branch(end)
            b.position_at_end(end)
            lead = b.load(lead_slot, typ=I32T)
        else:
            lead = lo
        some = b.icmp_unsigned("<", lead, hi)
        safe = b.select(some, lead, lo)
        first = [b.load(self.slot(name, safe), typ=self.bases[name][1]) for name in names]
        bad = self.alloca_b.alloca(I8, name="diverged")
        b.store(llir.Constant(I8, 0), bad)

        def check(t: llir.Value) -> None:
            differs = llir.Constant(I1, 0)
            for name, v in zip(names, first, strict=True):
                x = b.load(self.slot(name, t), typ=self.bases[name][1])
                differs = b.or_(differs, b.icmp_unsigned("!=", x, v))
            if self.plan.leaves:
                differs = b.and_(differs, self.live(t))
            b.store(b.or_(b.load(bad, typ=I8), b.zext(differs, I8)), bad)

        self.counted(lo, hi, check, "dec")
        with b.if_then(b.icmp_unsigned("!=", b.load(bad, typ=I8), llir.Constant(I8, 0)), likely=False):
            b.store(_c32(1), b.gep(self.ctx, [_c64(OFF_ERROR)], inbounds=True, source_etype=I8))
            b.branch(self.fn_exit)
            b.position_at_end(self.fn.append_basic_block("dead"))
        return some, first

    # ---- the plan's nodes ---------------------------------------------------------------
    def nodes(self, nodes: list, lo: llir.Value, hi: llir.Value) -> None:
        for node in nodes:
            if self.b.block.is_terminated:
                self.b.position_at_end(self.fn.append_basic_block("dead"))
            self.node_lowerings[type(node)](self, node, lo, hi)

    def n_Sync(self, node: cs.Sync, lo: llir.Value, hi: llir.Value) -> None:
        pass

    def n_Region(self, node: cs.Region, lo: llir.Value, hi: llir.Value) -> None:
        used = cs.names_in(node.stmts)
        private = self.private.get(node.index, set())

        def body() -> None:
            assert self.loop is not None
            for name in used & self.context:
                self.frame.vars[name] = (self.slot(name, self.loop.t), self.types[name])
            for name in private - set(self.plan.arrays):  # a private array: its declaration zeroes it
                slot, ty = self.frame.vars[name]
                self.b.store(llir.Constant(value_type(ty), None), slot)
            self.frame.loops = [_SplitLoop(sl.brk, sl.cont) for sl in self.split_loops[-1:]]  # type: ignore[misc]
            self.stmts(tuple(node.stmts))

        self.thread_loop(lo, hi, body)

    def n_WarpRegion(self, node: cs.WarpRegion, lo: llir.Value, hi: llir.Value) -> None:
        b = self.b
        nwarps = b.lshr(b.add(hi, _c32(31)), _c32(5))

        def body(w: llir.Value) -> None:
            wlo = b.shl(w, _c32(5))
            end = b.add(wlo, _c32(32))
            whi = b.select(b.icmp_unsigned("<", end, hi), end, hi)
            self.nodes(node.body, wlo, whi)

        self.counted(_c32(0), nwarps, body, "warp")

    def n_UIf(self, node: cs.UIf, lo: llir.Value, hi: llir.Value) -> None:
        b = self.b
        some, (d,) = self.decide([node.cond], lo, hi)
        then, merge = self.fn.append_basic_block("u.then"), self.fn.append_basic_block("u.end")
        orelse = self.fn.append_basic_block("u.else") if node.orelse else merge
        b.cbranch(b.and_(some, d), then, orelse)
        for blk, body in ((then, node.then), (orelse, node.orelse)):
            if blk is merge:
                continue
            b.position_at_end(blk)
            self.nodes(body, lo, hi)
            if not b.block.is_terminated:
                b.branch(merge)
        b.position_at_end(merge)

    def n_UWhile(self, node: cs.UWhile, lo: llir.Value, hi: llir.Value) -> None:
        b = self.b
        head, body, end = (self.fn.append_basic_block(f"uw.{x}") for x in ("head", "body", "end"))
        b.branch(head)
        b.position_at_end(head)
        some, (d,) = self.decide([node.cond], lo, hi)
        b.cbranch(b.and_(some, d), body, end)
        b.position_at_end(body)
        self.split_loops.append(_SplitLoop(node.brk, node.cont))
        self.nodes(node.body, lo, hi)
        self.split_loops.pop()
        self.clear(node.cont, lo, hi)
        self.nodes(node.tail, lo, hi)
        b.branch(head)
        b.position_at_end(end)
        self.clear(node.brk, lo, hi)

    def n_UFor(self, node: cs.UFor, lo: llir.Value, hi: llir.Value) -> None:
        b = self.b
        ty = node.ty
        some, (start, stop, step) = self.decide([node.start, node.stop, node.step], lo, hi)
        go, body, latch, nxt, end = (self.fn.append_basic_block(f"uf.{x}") for x in ("go", "body", "latch", "next", "end"))
        b.cbranch(some, go, end)
        b.position_at_end(go)
        lt = value_type(ty)
        zero = llir.Constant(lt, 0)
        counter = self.frame.vars[node.counter][0]
        b.store(start, counter)
        if ty.signed:
            pos = b.icmp_signed(">", step, zero)
            enter = b.select(pos, b.icmp_signed("<", start, stop), b.icmp_signed(">", start, stop))
        else:
            pos = llir.Constant(I1, 1)
            enter = b.icmp_unsigned("<", start, stop)
        b.cbranch(b.and_(enter, b.icmp_unsigned("!=", step, zero)), body, end)
        b.position_at_end(body)
        self.split_loops.append(_SplitLoop(node.brk, node.cont))
        self.nodes(node.body, lo, hi)
        self.split_loops.pop()
        if not b.block.is_terminated:
            b.branch(latch)
        b.position_at_end(latch)
        self.clear(node.cont, lo, hi)
        if self.plan.leaves:  # every thread broke out or returned: the loop is over
            anyone = self.alloca_b.alloca(I1, name="anyone")
            b.store(llir.Constant(I1, 0), anyone)
            self.counted(lo, hi, lambda t: b.store(b.or_(b.load(anyone, typ=I1), self.live(t)), anyone), "any")
            cont = self.fn.append_basic_block("uf.cont")
            b.cbranch(b.load(anyone, typ=I1), cont, end)
            b.position_at_end(cont)
        step_latch(b, counter, lt, pos, stop, step, body, nxt, end)
        self.clear(node.brk, lo, hi)

    def n_UScope(self, node: cs.UScope, lo: llir.Value, hi: llir.Value) -> None:
        self.nodes(node.body, lo, hi)
        self.clear(node.id, lo, hi)

    def s_Return(self, s: ir.Return) -> None:
        if self.frame is not self.kframe:
            self.statements.s_Return(s)
        else:
            self.b.branch(self.leave_block(cs.RET))

    def s_Break(self, s: ir.Break) -> None:
        top = self.frame.loops[-1]
        if isinstance(top, _SplitLoop):
            self.b.branch(self.leave_block(top.brk))
        else:
            self.statements.s_Break(s)

    def s_Continue(self, s: ir.Continue) -> None:
        top = self.frame.loops[-1]
        if isinstance(top, _SplitLoop):
            self.b.branch(self.leave_block(top.cont))
        else:
            self.statements.s_Continue(s)

    def s_Scope(self, s: cs.Scope) -> None:
        end = self.fn.append_basic_block(f"scope.{s.id}")
        self.scope_ends[s.id] = end
        self.stmts(s.body)
        del self.scope_ends[s.id]
        if not self.b.block.is_terminated:
            self.b.branch(end)
        self.b.position_at_end(end)

    def s_Leave(self, s: cs.Leave) -> None:
        end = self.scope_ends.get(s.id)
        self.b.branch(end if end is not None else self.leave_block(s.id))


def _all_nodes(nodes: list) -> list:
    out = []
    for n in nodes:
        out.append(n)
        for f in ("body", "then", "orelse", "tail"):
            out.extend(_all_nodes(getattr(n, f, [])))
    return out


# the region lowerer's own node lowerings, before the registry's (`Lowerer.overrides`)
RegionLowerer.overrides = {
    ir.Return: RegionLowerer.s_Return, ir.Break: RegionLowerer.s_Break, ir.Continue: RegionLowerer.s_Continue,
    ir.LocalArrayDecl: RegionLowerer.s_LocalArrayDecl, cs.Scope: RegionLowerer.s_Scope, cs.Leave: RegionLowerer.s_Leave,
    _Root: RegionLowerer.s__Root,
}
# the plan's nodes (codegen/cpu/split.py)
RegionLowerer.node_lowerings = {
    cs.Sync: RegionLowerer.n_Sync, cs.Region: RegionLowerer.n_Region, cs.WarpRegion: RegionLowerer.n_WarpRegion,
    cs.UIf: RegionLowerer.n_UIf, cs.UWhile: RegionLowerer.n_UWhile, cs.UFor: RegionLowerer.n_UFor,
    cs.UScope: RegionLowerer.n_UScope,
    cs.Coll: lambda lw, node, lo, hi: lw.warps.n_Coll(node, lo, hi),
    cs.Xchg: lambda lw, node, lo, hi: lw.warps.n_Xchg(node, lo, hi),
}
