"""The CPU backend: the same lowering, aimed at the host, JIT-compiled with MCJIT.

The kernel function keeps the GPU ABI plus one hidden `ptr ctx` (fourteen i32:
tid xyz, ctaid xyz, ntid xyz, nctaid xyz, lane id, dynamic shared bytes).  A generated
`__az_launch(grid*, block*, argv*, fault*, rank)` loops over blocks and threads
in order (z, y, x), fills `ctx` and calls the kernel; `cpu_entry` marshals the
flattened arguments into `argv` (one 64-bit slot each) and calls it through ctypes.

This one-loop target refuses barriers, warp operations and shared memory (an
`az-internal` error: the driver never sends it such a kernel).  Those kernels run one
block per host thread, split at their synchronisation points (split.py,
regions.py), or, for the few forms the splitter leaves out, one host thread per GPU
thread (`CPUTarget(threaded=True)`, threads.py).  engine.py JIT-compiles the module and runs it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import llvmlite.binding as llvm
import llvmlite.ir as llir

from anodize.language import messages
from anodize.language.diagnostics import CheckError, Span
from anodize.language.math_table import MATH
from anodize.codegen.artifact import flat_abi

from anodize.language import ir
from ..llvm.lower import DOUBLE, FLOAT, I8, I32T, I64T, INTRINSIC_MATH, Lowerer, Target, reg_type
from anodize.language.types import BY_NAME, ScalarTy, SharedTy

from . import printf, threads
from .engine import LAUNCH, THREAD, _init, host_target_machine

_CTX = {"tid": 0, "ctaid": 3, "ntid": 6, "nctaid": 9}
# i32 slots of `ctx` that hold one value: the lane id, and (threaded backend only: the only one
# with shared memory) the launch's dynamic shared memory in bytes, PTX's %dynamic_smem_size
_SCALAR_SLOTS = {"laneid": 12, "dynamic_smem_size": 13}
_AXIS = {"x": 0, "y": 1, "z": 2}
# Math: the LLVM intrinsics of the GPU backend (exact operations), and the host C library
# (`expf` / `exp`, ...) for the rest; `lgamma` is the reentrant `lgamma_r` (no write to the
# global `signgam` from several host threads).  `rsqrt` and f64 `cbrt` (glibc's is off by
# up to ~4 ulp, CUDA promises 1) take one Newton step on an exactly computed residual;
# f32 `gamma` is f64 `tgamma` rounded once.



class CPUTarget(Target):
    name = "cpu"
    global_as = 0
    shared_as = 0

    def __init__(self, k: ir.KernelIR | None = None, *, threaded: bool = False):
        """`threaded`: one host thread per GPU thread (phase 2: barriers, warps, shared memory)."""
        self.threaded = threaded
        self.shared_offsets: dict[str, int] = {}
        off = 0
        for name, ty in k.shared if k is not None else ():
            if not ty.dynamic:
                off = -(-off // 16) * 16
                self.shared_offsets[name] = off
                off += ty.size * ty.elem.info.mem_bits // 8
        self.static_shared = -(-off // 16) * 16
        self._shared_ptrs: dict[str, llir.Value] = {}

    def triple(self) -> str:
        _init()
        return llvm.get_process_triple()

    def extra_params(self) -> list[llir.Type]:
        return [llir.PointerType()]

    def decorate_entry(self, lw: Lowerer, fn: llir.Function) -> None:
        lw.module.data_layout = str(host_target_machine().target_data)

    def sreg(self, lw: Lowerer, reg: str, axis: str) -> llir.Value:
        ctx = lw.extra_args[0]
        slot = _SCALAR_SLOTS[reg] if reg in _SCALAR_SLOTS else _CTX[reg] + _AXIS[axis]
        p = lw.b.gep(ctx, [llir.Constant(I64T, slot)], inbounds=True, source_etype=I32T)
        return lw.b.load(p, typ=I32T, align=4)

    def float_minmax(self, lw: Lowerer, op: str, a: llir.Value, c: llir.Value) -> llir.Value:
        """`llvm.minnum`/`llvm.maxnum` spelled as compares and selects: `a` if `c` is NaN or not
        beyond it (ties give `a`, as x86's lowering of the intrinsic and the interpreter do), `c`
        if `a` is NaN.  LLVM 22's loop vectoriser miscompiles a loop-carried `maxnum`/`minnum`
        recurrence whose tail it folds with lane masks: for a small constant trip count it runs
        one vector iteration and skips the rest (llvm/llvm-project#209159, fixed for LLVM 23 by
        #209502), and it folds tails only where masked gathers are cheap, so on AVX-512 hosts
        the 8-warp combine of a 256-thread `az.block.reduce(v, "max")` ran warps 0-4 only
        (threads 160-255 ignored), as would a user's `m = az.math.fmax(m, x)` loop.  A select
        recurrence without fast-math flags is no reduction LLVM vectorises, at any vector width
        (tests/codegen/test_cpu_isa.py runs the collectives optimised for SSE4.2, AVX2 and
        AVX-512); the lanes of a thread loop still vectorise (compares and selects)."""
        b = lw.b
        beyond = b.fcmp_ordered("<" if op == "min" else ">", c, a)
        return b.select(b.fcmp_unordered("uno", a, a), c, b.select(beyond, c, a))

    def math(self, lw: Lowerer, name: str, args: list[llir.Value], ty: ScalarTy) -> llir.Value:
        t = args[0].type
        fs = "f32" if ty.bits == 32 else "f64"
        suffix = "f" if ty.bits == 32 else ""
        if name in ("fmin", "fmax"):
            return self.float_minmax(lw, name[1:], args[0], args[1])
        if name in INTRINSIC_MATH:
            return lw.intrinsic(f"llvm.{INTRINSIC_MATH[name]}.{fs}", t, args)
        if name == "rsqrt":
            return _rsqrt(lw, args[0], fs)
        if name == "cbrt" and ty.bits == 64:
            return _cbrt64(lw, args[0], lw.intrinsic("cbrt", t, args))
        if name == "gamma" and ty.bits == 32:  # tgammaf is off by ~5 ulp in glibc < 2.40; tgamma then one rounding
            r = lw.intrinsic("tgamma", DOUBLE, [lw.b.fpext(args[0], DOUBLE)])
            return lw.b.fptrunc(r, t)
        if name == "lgamma":  # lgammaf_r(x, &sign): no write to the global `signgam`
            sign = lw.alloca_b.alloca(I32T, name="lgamma.sign")
            f = lw.declare(f"lgamma{suffix}_r", t, [t, llir.PointerType()])
            return lw.b.call(f, [args[0], sign])
        return lw.intrinsic(MATH[name].libm + suffix, t, args)  # ldexp: (float, i32)

    def fence(self, lw: Lowerer, kind: str, span: Span | None) -> None:
        if kind == "threadfence":
            lw.b.fence("seq_cst")
        elif self.threaded:  # warp_sync: a vote of the warp's live lanes is a rendezvous of them
            mode = llir.Constant(I32T, threads.VOTE_MODES["any"])
            lw.intrinsic("__az_cpu_vote", I32T, [lw.extra_args[0], mode, llir.Constant(I32T, 0)])
        # (the typer marks a kernel with `warp.sync` as using warps, so it runs threaded)

    def _refuse(self, span: Span | None, what: str) -> None:
        """Unreachable: the driver runs a kernel that uses barriers, warps or shared memory on
        the threaded backend. Reaching here is a bug in anodize (`az-internal`), not the user's."""
        bug = RuntimeError(f"the one-loop CPU backend met {what} (the typed model did not flag it)")
        raise CheckError([messages.internal_error(span or Span.point("<kernel>", 1, 0), bug)])

    def barrier(self, lw: Lowerer, span: Span | None) -> None:
        if not self.threaded:
            self._refuse(span, "`az.syncthreads()`")
        lw.intrinsic("__az_cpu_barrier", llir.VoidType(), [lw.extra_args[0]])

    def grid_barrier(self, lw: Lowerer, span: Span | None) -> None:
        """`az.grid.sync()`: the host threads of every block of the grid (threads.run_grid runs
        a kernel that has one with `whole_grid=True`)."""
        if not self.threaded:
            self._refuse(span, "`az.grid.sync()`")
        lw.intrinsic("__az_cpu_grid_barrier", llir.VoidType(), [lw.extra_args[0]])

    def warp(self, lw: Lowerer, op: str, args: list[llir.Value], ty: ScalarTy, span: Span | None) -> llir.Value:
        if not self.threaded:
            self._refuse(span, f"`warp.{op}`")
        b = lw.b
        ctx = lw.extra_args[0]
        if op in threads.VOTE_MODES:
            pred = b.zext(args[0], I32T)
            r = lw.intrinsic("__az_cpu_vote", I32T, [ctx, llir.Constant(I32T, threads.VOTE_MODES[op]), pred])
            return r if op == "ballot" else b.icmp_unsigned("!=", r, llir.Constant(I32T, 0))
        v, k = args
        it = llir.IntType(ty.bits)
        x = b.bitcast(v, it) if ty.is_float else v
        x64 = b.zext(x, I64T) if ty.bits == 32 else x
        r = lw.intrinsic("__az_cpu_shfl", I64T, [ctx, llir.Constant(I32T, threads.SHFL_MODES[op]), x64, k])
        r = b.trunc(r, it) if ty.bits == 32 else r
        return b.bitcast(r, v.type) if ty.is_float else r

    def emit_print(self, lw: Lowerer, fmt: llir.Value, args: llir.Value) -> None:
        ptr = llir.PointerType()
        lw.b.call(lw.declare(printf.SYMBOL, llir.VoidType(), [ptr, ptr]), [fmt, args])

    def shared_global(self, lw: Lowerer, name: str, ty: SharedTy, span: Span | None = None) -> llir.Value:
        if not self.threaded:
            self._refuse(span, "`az.shared.array`")
        # computed in the entry block, so every use is dominated
        eb = lw.alloca_b
        p = eb.gep(lw.extra_args[0], [llir.Constant(I64T, 56)], inbounds=True, source_etype=I8)
        base = eb.load(p, typ=I64T, align=8)
        off = self.static_shared if ty.dynamic else self.shared_offsets[name]
        return eb.inttoptr(eb.add(base, llir.Constant(I64T, off)), llir.PointerType())


def _newton_parts(lw: Lowerer, y: llir.Value, fs: str) -> tuple[llir.Value, llir.Value]:
    """(y2, e2) with y*y == y2 + e2 exactly (an fma)."""
    b = lw.b
    y2 = b.fmul(y, y)
    return y2, lw.intrinsic(f"llvm.fma.{fs}", y.type, [y, y, b.fneg(y2)])


def _rsqrt(lw: Lowerer, x: llir.Value, fs: str) -> llir.Value:
    """1 / sqrt(x) (two roundings: up to 2 ulp), then y += y * (1 - x*y*y) / 2 with the
    residual from fmas, on x scaled by an even power of 2 so that y*y stays normal:
    within 0.5 ulp and a hair (tests/codegen/test_math_ulp.py)."""
    b = lw.b
    t = x.type
    c = functools.partial(llir.Constant, t)
    lo, hi, k = (2.0**-960, 2.0**960, 1000) if fs == "f64" else (2.0**-100, 2.0**100, 120)
    small = b.fcmp_ordered("<", x, c(lo))
    large = b.fcmp_ordered(">", x, c(hi))
    xs = b.fmul(x, b.select(small, c(2.0**k), b.select(large, c(2.0**-k), c(1.0))))
    y = b.fdiv(c(1.0), lw.intrinsic(f"llvm.sqrt.{fs}", t, [xs]))
    y2, e2 = _newton_parts(lw, y, fs)
    resid = b.fsub(lw.intrinsic(f"llvm.fma.{fs}", t, [b.fneg(xs), y2, c(1.0)]), b.fmul(xs, e2))
    y = lw.intrinsic(f"llvm.fma.{fs}", t, [b.fmul(y, c(0.5)), resid, y])
    y = b.fmul(y, b.select(small, c(2.0 ** (k // 2)), b.select(large, c(2.0 ** -(k // 2)), c(1.0))))
    ok = b.and_(b.fcmp_ordered(">", x, c(0.0)), b.fcmp_ordered("<", x, c(float("inf"))))
    return b.select(ok, y, b.fdiv(c(1.0), lw.intrinsic(f"llvm.sqrt.{fs}", t, [x])))  # 0, inf, NaN, x < 0


def _cbrt64(lw: Lowerer, x: llir.Value, libm: llir.Value) -> llir.Value:
    """glibc's cbrt, then y -= (y**3 - x) / (3*y*y) with the residual from fmas (on x
    scaled by 2**900 when tiny, so that y*y stays normal)."""
    b = lw.b
    t = x.type
    c = functools.partial(llir.Constant, t)
    mag = lw.intrinsic("llvm.fabs.f64", t, [x])
    small = b.fcmp_ordered("<", mag, c(2.0**-900))
    xs = b.fmul(x, b.select(small, c(2.0**900), c(1.0)))
    y = lw.intrinsic("cbrt", t, [xs])
    y2, e2 = _newton_parts(lw, y, "f64")
    resid = b.fadd(lw.intrinsic("llvm.fma.f64", t, [y2, y, b.fneg(xs)]), b.fmul(e2, y))
    y = b.fsub(y, b.fdiv(resid, b.fmul(c(3.0), y2)))
    y = b.fmul(y, b.select(small, c(2.0**-300), c(1.0)))
    ok = b.and_(b.fcmp_ordered("!=", x, c(0.0)), b.fcmp_ordered("<", mag, c(float("inf"))))
    return b.select(ok, y, libm)  # +-0, +-inf, NaN


def add_thread_entry(lw: Lowerer) -> None:
    """Append `__az_thread(argv, fault, rank, ctx)`: one GPU thread, for the threaded backend."""
    ptr = llir.PointerType()
    f = llir.Function(lw.module, llir.FunctionType(llir.VoidType(), [ptr, ptr, I32T, ptr]), THREAD)
    argv, fault, rank, ctx = f.args
    b = llir.IRBuilder(f.append_basic_block("entry"))
    args = [
        _decode(b, b.load(b.gep(argv, [llir.Constant(I64T, i)], source_etype=I64T), typ=I64T), kind)
        for i, kind in enumerate(flat_abi(lw.k.params))
    ]
    b.call(lw.fn, args + [fault, rank, ctx])
    b.ret_void()


def add_launcher(lw: Lowerer) -> None:
    """Append `__az_launch`, the loop over the grid that calls the kernel once per thread."""
    m = lw.module
    ptr = llir.PointerType()
    fty = llir.FunctionType(llir.VoidType(), [ptr, ptr, ptr, ptr, I32T])
    f = llir.Function(m, fty, LAUNCH)
    grid, block, argv, fault, rank = f.args
    entry = f.append_basic_block("entry")
    b = llir.IRBuilder(entry)
    ctx = b.alloca(I32T, size=llir.Constant(I32T, 20), name="ctx")
    b.store(llir.Constant(I32T, 0), b.gep(ctx, [llir.Constant(I64T, 13)], inbounds=True, source_etype=I32T))

    def slot(i: int) -> llir.Value:
        return b.gep(ctx, [llir.Constant(I64T, i)], inbounds=True, source_etype=I32T)

    def dim(p: llir.Value, i: int) -> llir.Value:
        return b.load(b.gep(p, [llir.Constant(I64T, i)], source_etype=I32T), typ=I32T)

    g = [dim(grid, i) for i in range(3)]
    bl = [dim(block, i) for i in range(3)]
    extent = None
    if lw.coarse is not None:  # coarsened (codegen/llvm/coarsen.py): ceil(grid_x / factor) blocks, and the extent
        extent = b.mul(b.zext(g[0], I64T), b.zext(bl[0], I64T))
        fac = lw.coarse.factor
        g[0] = b.udiv(b.add(g[0], llir.Constant(I32T, fac - 1)), llir.Constant(I32T, fac))
    for i in range(3):
        b.store(bl[i], slot(6 + i))
        b.store(g[i], slot(9 + i))
    args: list[llir.Value] = []
    kinds = flat_abi(lw.k.params)
    for i, kind in enumerate(kinds):
        raw = b.load(b.gep(argv, [llir.Constant(I64T, i)], source_etype=I64T), typ=I64T)
        args.append(_decode(b, raw, kind))
    args += [fault, rank]
    if extent is not None:
        args.append(extent)
    nthreads_x = bl[0]

    def loop(n: llir.Value, body: Callable[[llir.Value], None], name: str) -> None:
        pre = b.block
        head = f.append_basic_block(f"{name}.head")
        bodyb = f.append_basic_block(f"{name}.body")
        end = f.append_basic_block(f"{name}.end")
        b.branch(head)
        b.position_at_end(head)
        i = b.phi(I32T, name=name)
        i.add_incoming(llir.Constant(I32T, 0), pre)
        b.cbranch(b.icmp_unsigned("<", i, n), bodyb, end)
        b.position_at_end(bodyb)
        body(i)
        i.add_incoming(b.add(i, llir.Constant(I32T, 1)), b.block)
        b.branch(head)
        b.position_at_end(end)

    def thread_body(tz: llir.Value, ty_: llir.Value, tx: llir.Value) -> None:
        b.store(tx, slot(0))
        b.store(ty_, slot(1))
        b.store(tz, slot(2))
        linear = b.add(b.mul(b.add(b.mul(tz, bl[1]), ty_), nthreads_x), tx)
        b.store(b.and_(linear, llir.Constant(I32T, 31)), slot(12))
        b.call(lw.fn, args + [ctx])

    def block_threads() -> None:
        loop(bl[2], lambda tz: loop(bl[1], lambda ty_: loop(bl[0], lambda tx: thread_body(tz, ty_, tx), "tx"), "ty"), "tz")

    def one_block(bxyz: tuple[llir.Value, llir.Value, llir.Value]) -> None:
        for i in range(3):
            b.store(bxyz[i], slot(3 + i))
        block_threads()

    block_range(b, f, grid, g, one_block)
    b.ret_void()


def block_range(b: llir.IRBuilder, f: llir.Function, grid: llir.Value, g: list[llir.Value],
                body: Callable[[tuple[llir.Value, llir.Value, llir.Value]], None]) -> None:
    """The launcher's loop over the blocks `grid[3] .. grid[4]` (a range of linear block ids, an
    i64 each after the three i32 dims): `run_in_chunks` calls a launcher once per range, so
    that Python runs between ranges and Ctrl-C stops a long launch (docs/architecture.md)."""
    i64p = b.gep(grid, [llir.Constant(I64T, 2)], source_etype=I64T)  # bytes 16..32: start, end
    start = b.load(i64p, typ=I64T)
    end = b.load(b.gep(grid, [llir.Constant(I64T, 3)], source_etype=I64T), typ=I64T)
    gx, gy = b.zext(g[0], I64T), b.zext(g[1], I64T)
    blocks = b.mul(b.mul(gx, gy), b.zext(g[2], I64T))  # a coarsened launcher has fewer blocks along x than Python's grid
    end = b.select(b.icmp_unsigned("<", end, blocks), end, blocks)
    pre = b.block
    head, bodyb, done = f.append_basic_block("blk.head"), f.append_basic_block("blk.body"), f.append_basic_block("blk.end")
    b.branch(head)
    b.position_at_end(head)
    lin = b.phi(I64T, name="blk")
    lin.add_incoming(start, pre)
    b.cbranch(b.icmp_unsigned("<", lin, end), bodyb, done)
    b.position_at_end(bodyb)
    rest = b.udiv(lin, gx)
    bxyz = (b.trunc(b.urem(lin, gx), I32T), b.trunc(b.urem(rest, gy), I32T), b.trunc(b.udiv(rest, gy), I32T))
    body(bxyz)
    lin.add_incoming(b.add(lin, llir.Constant(I64T, 1)), b.block)
    b.branch(head)
    b.position_at_end(done)


def _decode(b: llir.IRBuilder, raw: llir.Value, kind: str) -> llir.Value:
    if kind == "ptr":
        return b.inttoptr(raw, llir.PointerType())
    if kind == "i64":
        return raw
    if kind == "bool_":
        return b.trunc(raw, I8)
    if kind == "f32":
        return b.bitcast(b.trunc(raw, I32T), FLOAT)
    if kind == "f64":
        return b.bitcast(raw, DOUBLE)
    t = reg_type(BY_NAME[kind])
    return raw if t == I64T else b.trunc(raw, t)
