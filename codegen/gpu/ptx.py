"""The NVPTX backend: the GPU `Target`, O3 over the module (with libdevice when it is
used), PTX emission, and an optional `ptxas` run for a cubin and resource usage.

Target machines are built once per thread, and each libdevice part once per process
(`emit_ptx`'s notes): compiles on several threads run LLVM at once.
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language.contract import Contract
from anodize.language.diagnostics import Span
from anodize.language.math_table import MATH
from anodize.codegen.artifact import Resources

from ..llvm.lower import FLOAT, I1, I8, I32T, I64T, INTRINSIC_MATH, Lowerer, Target, add_attr, mem_type
from ..llvm.binding import binding, optimize
from ..toolchain import find_libdevice, find_ptxas
from . import atomics
from anodize.language.types import ScalarTy, SharedTy

I16T = llir.IntType(16)

if TYPE_CHECKING:
    import llvmlite.binding as llvm

# llvmlite's binding (LLVM itself, a large shared library) is not imported here:
# codegen/llvm/binding.py says why

TRIPLE = "nvptx64-nvidia-cuda"
DEFAULT_ARCH = "sm_90"

# the lowest PTX ISA each architecture needs (LLVM's NVPTX feature names)
_PTX_FOR_ARCH = {
    "sm_70": "+ptx60",
    "sm_72": "+ptx61",
    "sm_75": "+ptx63",
    "sm_80": "+ptx70",
    "sm_86": "+ptx71",
    "sm_87": "+ptx74",
    "sm_89": "+ptx78",
    "sm_90": "+ptx80",
    "sm_90a": "+ptx80",
    "sm_100": "+ptx86",
    "sm_120": "+ptx87",
}

LOG2E = 1.4426950408889634  # log2(e), rounded to f32 where it multiplies an f32


def fast_exp() -> bool:
    """`ANODIZE_FAST_EXP=1`: f32 `exp(x)` is `ex2.approx.ftz.f32(x * log2 e)` and f32 `exp2(x)` is
    `ex2.approx.ftz.f32(x)` (one MUFU.EX2 each, as flash attention computes its exponentials),
    instead of libdevice's `__nv_expf` / `__nv_exp2f`: exp's error grows with |x| (the rounded
    product; docs/language.md, "Fast exponentials") and results below 2^-126 flush to 0."""
    return os.environ.get("ANODIZE_FAST_EXP", "") == "1"


def libdevice_symbol(name: str, bits: int) -> str:
    """The libdevice function that computes `math.<name>` on `bits`-wide floats (every function
    of language/math_table.py but the LLVM intrinsics and the classifications, an `fcmp`)."""
    return f"__nv_{MATH[name].libdevice}{'f' if bits == 32 else ''}"


_init_lock = threading.Lock()  # LLVM's one-time target registration
_part_lock = threading.Lock()  # cutting a libdevice part (`_part_bitcode`)
_initialised = False


def _init() -> None:
    global _initialised
    if _initialised:
        return
    with _init_lock:
        if not _initialised:
            llvm = binding()
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialised = True


def features_for(arch: str) -> str:
    if arch not in _PTX_FOR_ARCH:
        raise ValueError(f"unknown GPU architecture {arch!r}; known: {', '.join(sorted(_PTX_FOR_ARCH))}")
    return _PTX_FOR_ARCH[arch]


_machines = threading.local()


def target_machine(arch: str = DEFAULT_ARCH, opt: int = 3) -> llvm.TargetMachine:
    """One NVPTX target machine per (arch, opt) and thread, reused by the thread's compiles: two
    threads compile at once (the autotuner's parallel compiles; llvmlite's calls release the
    GIL), and an LLVM TargetMachine is not for concurrent use (its subtarget cache fills on
    first use), so none is shared, as LLVM's own concurrent compilers (ORC) do."""
    made: dict[tuple[str, int], llvm.TargetMachine] | None = getattr(_machines, "made", None)
    if made is None:
        made = _machines.made = {}
    tm = made.get((arch, opt))
    if tm is None:
        llvm = binding()
        _init()
        tm = made[(arch, opt)] = llvm.Target.from_triple(TRIPLE).create_target_machine(cpu=arch, features=features_for(arch), opt=opt)
    return tm


@functools.cache
def data_layout() -> str:
    return str(target_machine().target_data)


def libdevice_path() -> Path | None:
    found = find_libdevice()
    return Path(found) if found else None


@functools.cache
def _libdevice_bitcode() -> bytes:
    p = libdevice_path()
    if p is None:
        raise RuntimeError(
            "libdevice (libdevice.10.bc) was not found; install the CUDA toolkit or `pip install nvidia-cuda-nvcc`, "
            "or set ANODIZE_LIBDEVICE"
        )
    return p.read_bytes()


# Every compile's module lives in an LLVM context of its own, disposed with it: the types,
# constants and metadata a module creates stay in its context for the context's life (on
# llvmlite's global context, every compile grew the process for good).  No LLVM object is shared
# between compiles (target machines are per thread), so compiles on several threads run LLVM
# at once.
#
# A module links only the libdevice functions it calls, with what they call (`_part_bitcode`):
# libdevice is ~575 functions, and linking all of it cost more than the rest of a small
# compile (the link ~60 ms, the verifier ~30 ms over the copy, O3 ~120 ms before it dropped
# the unused ones: GELU's tile kernel, bench/RESULTS.md session 12); the PTX is the same
# (tests/codegen/test_libdevice_part.py).  Each part is cut once a process from a parse of
# libdevice of its own (~40 ms) and kept as bitcode (a few KB), which each compile parses into
# its own context (well under a millisecond).
LIBDEVICE_PARTS = True  # link only the functions used (False: all of libdevice; a test compares the two)
_PART_BITCODE: dict[frozenset[str], bytes] = {}
_RE_NV_DECL = re.compile(r'^declare [^@\n]*@"?(__nv_\w+)"?\(', re.M)


def libdevice_calls(module_text: str) -> frozenset[str]:
    """The libdevice functions a module's text declares."""
    return frozenset(_RE_NV_DECL.findall(module_text))


def _part_bitcode(symbols: frozenset[str]) -> bytes:
    """libdevice cut down to the definitions of `symbols` and what they reach, as bitcode (cut
    once a process, under `_part_lock`)."""
    hit = _PART_BITCODE.get(symbols)
    if hit is not None:
        return hit
    with _part_lock:
        hit = _PART_BITCODE.get(symbols)
        if hit is None:
            hit = _PART_BITCODE[symbols] = _cut(_libdevice_bitcode(), symbols)
    return hit


def _cut(bitcode: bytes, symbols: frozenset[str]) -> bytes:
    llvm = binding()
    tm = target_machine()
    context = llvm.create_context()
    try:
        mod = llvm.parse_bitcode(bitcode, context)
        try:
            for f in mod.functions:
                if not f.is_declaration and f.name not in symbols:
                    f.linkage = "internal"
            for g in mod.global_variables:
                if not g.is_declaration:
                    g.linkage = "internal"
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=0))
            mpm = llvm.create_new_module_pass_manager()
            mpm.add_global_dead_code_eliminate_pass()
            try:
                mpm.run(mod, pb)
            finally:  # (binding.py `optimize` says why)
                llvm.ffi.lib.LLVMPY_DisposeNewModulePassManger(mpm)
                mpm.detach()
            return bytes(mod.as_bitcode())
        finally:
            mod.close()
    finally:
        context.close()


def _libdevice_module(symbols: frozenset[str], context: llvm.ContextRef) -> llvm.ModuleRef:
    """The part of libdevice that defines `symbols` (all of it when `LIBDEVICE_PARTS` is off),
    parsed into `context` (a compile's own; `link_in` consumes it)."""
    mod = binding().parse_bitcode(_part_bitcode(symbols) if LIBDEVICE_PARTS else _libdevice_bitcode(), context)
    mod.triple = TRIPLE
    mod.data_layout = data_layout()
    return mod


class NVPTXTarget(Target):
    name = "nvptx"
    global_as = 1
    shared_as = 3
    table_as = 4
    vector_grid_stride = True  # 16-byte chunks for elementwise grid-stride loops (codegen/llvm/gridstride.py)
    coarsen = True  # several indices per thread for element-wise kernels (codegen/llvm/coarsen.py)
    align_records = True  # record slices' aligned copy (codegen/llvm/record_align.py)
    warp_records = True  # whole warps of records through shuffles (codegen/llvm/record_warp.py)
    native_half_atomic_add = True  # atom.add.noftz.f16, sm_70 and later
    native_f16_convert = True  # cvt between f16 and f32/f64 (bf16 keeps the integer IR: llvmlite has no `bfloat`)
    collective_one_barrier = True  # block collectives alternate two scratch halves: one barrier each (codegen/llvm/collectives.py)
    grid_counter_param = True  # `az.grid.sync()`'s counter: a hidden parameter, one per launch

    def __init__(self, contract: Contract | None, arch: str = DEFAULT_ARCH):
        self.contract = contract
        # cvt between e4m3x2/e5m2x2 and f16x2/f32: sm_90 (PTX 8.0; sm_89 would need PTX 8.1, above its ISA here)
        self.f8_convert = int(arch[3:].rstrip("a")) >= 90

    def f8_to_f16(self, lw: Lowerer, h: llir.Value, fmt: str) -> llir.Value | None:
        """`cvt.rn.f16x2.e4m3x2` (`e5m2x2`) on sm_90+: the low byte of the pair becomes the low f16."""
        if not self.f8_convert:
            return None
        asm = llir.InlineAsm(llir.FunctionType(I32T, [I16T]), f"cvt.rn.f16x2.{fmt[2:]}x2 $0, $1;", "=r,h")
        return lw.b.trunc(lw.b.call(asm, [lw.b.zext(h, I16T)]), I16T)

    def f8_from_f32(self, lw: Lowerer, x: llir.Value, fmt: str) -> llir.Value | None:
        """`cvt.rn.satfinite.e4m3x2.f32` (`e5m2x2`) on sm_90+: the second operand lands in the low byte."""
        if not self.f8_convert:
            return None
        asm = llir.InlineAsm(llir.FunctionType(I16T, [FLOAT, FLOAT]), f"cvt.rn.satfinite.{fmt[2:]}x2.f32 $0, $1, $2;", "=h,f,f")
        return lw.b.trunc(lw.b.call(asm, [llir.Constant(FLOAT, 0.0), x]), I8)

    def triple(self) -> str:
        return TRIPLE

    def decorate_entry(self, lw: Lowerer, fn: llir.Function) -> None:
        fn.calling_convention = "ptx_kernel"
        # no switch lookup tables: SimplifyCFG would build one of shared-array addresses (a
        # chain of conditional expressions picking a shared array by a loop variable), a
        # `.global` initialised with `.shared` symbols, which ptxas rejects
        add_attr(fn.attributes, '"no-jump-tables"="true"')
        lw.module.data_layout = data_layout()
        block = self.reqntid()
        if block:
            x, y, z = block
            add_attr(fn.attributes, f'"nvvm.reqntid"="{x},{y},{z}"')
        per_sm = getattr(self.contract, "min_blocks_per_sm", None)
        if per_sm:  # `.minnctapersm`: ptxas keeps registers within 65536 / (threads * per_sm)
            add_attr(fn.attributes, f'"nvvm.minctasm"="{per_sm}"')

    def reqntid(self) -> tuple[int, int, int] | None:
        """The exact block the kernel is compiled for (its contract's `block`, as PTX
        `.reqntid`), or None."""
        block = self.contract.block if self.contract is not None else None
        return (tuple(block) + (1, 1))[:3] if block else None  # type: ignore[return-value]

    def sreg(self, lw: Lowerer, reg: str, axis: str) -> llir.Value:
        block = self.reqntid()
        if block and axis in ("x", "y", "z") and reg in ("ntid", "tid"):
            # `.reqntid` is exact: the driver refuses a launch with any other block
            # (CUDA_ERROR_INVALID_VALUE, measured on the H200), so the block's extents are
            # constants here and a thread index along an extent of 1 is 0
            extent = block["xyz".index(axis)]
            if reg == "ntid":
                return llir.Constant(I32T, extent)
            if extent == 1:
                return llir.Constant(I32T, 0)
        name = f"llvm.nvvm.read.ptx.sreg.{reg}" + (f".{axis}" if axis else "")
        return lw.intrinsic(name, I32T, [])

    def math(self, lw: Lowerer, name: str, args: list[llir.Value], ty: ScalarTy) -> llir.Value:
        t = args[0].type
        fs = "f32" if ty.bits == 32 else "f64"
        if name in ("exp", "exp2") and ty.bits == 32 and fast_exp():
            x = args[0] if name == "exp2" else lw.b.fmul(args[0], llir.Constant(FLOAT, LOG2E))
            return lw.intrinsic("llvm.nvvm.ex2.approx.ftz.f32", t, [x])
        if name in INTRINSIC_MATH:
            return lw.intrinsic(f"llvm.{INTRINSIC_MATH[name]}.{fs}", t, args)
        return lw.intrinsic(libdevice_symbol(name, ty.bits), t, args)  # ldexp: (float, i32)

    def barrier(self, lw: Lowerer, span: Span | None) -> None:
        lw.intrinsic("llvm.nvvm.barrier0", llir.VoidType(), [], "convergent", "nounwind")

    def grid_barrier(self, lw: Lowerer, span: Span | None) -> None:
        """`az.grid.sync()` as cooperative groups' `grid.sync()` does it: a block barrier; then each
        block's thread 0 adds to the launch's counter in global memory (`atom.release.gpu`), block 0
        adding 0x80000000 - (blocks - 1) and the others 1, so the arrival of the last block flips the
        counter's top bit (and leaves its low bits as they were: no reset between two grid barriers
        of one launch), and spins (`ld.acquire.gpu`) until it sees the flip; then a block barrier
        again.  The counter is the hidden `grid_counter` parameter: the runtime gives each launch its
        own, zeroed on the launch's stream (runtime/grid_counter.py), so concurrent launches never
        share one.  Every block is resident: the launch is cooperative (runtime/cuda_device.py
        refuses one that cannot be)."""
        b = lw.b
        counter = lw.grid_counter_ptr
        assert counter is not None  # Lowerer.grid_counter: every kernel calling `az.grid.sync()` takes one
        self.barrier(lw, span)
        tid = [self.sreg(lw, "tid", a) for a in "xyz"]
        leader = b.icmp_unsigned("==", b.or_(b.or_(tid[0], tid[1]), tid[2]), llir.Constant(I32T, 0))
        with b.if_then(leader):
            cta = [self.sreg(lw, "ctaid", a) for a in "xyz"]
            n = [self.sreg(lw, "nctaid", a) for a in "xyz"]
            blocks = b.mul(b.mul(n[0], n[1]), n[2])
            first = b.icmp_unsigned("==", b.or_(b.or_(cta[0], cta[1]), cta[2]), llir.Constant(I32T, 0))
            top = llir.Constant(I32T, -0x80000000)
            add = b.select(first, b.sub(top, b.sub(blocks, llir.Constant(I32T, 1))), llir.Constant(I32T, 1))
            addr = b.ptrtoint(counter, I64T)
            atom = llir.InlineAsm(llir.FunctionType(I32T, [I64T, I32T]), "atom.release.gpu.global.add.u32 $0, [$1], $2;",
                                  "=r,l,r,~{memory}", side_effect=True)
            lw.intrinsic("llvm.nvvm.membar.gl", llir.VoidType(), [], "nounwind")  # as cooperative groups: fence, arrive
            old = b.call(atom, [addr, add])
            load = llir.InlineAsm(llir.FunctionType(I32T, [I64T]), "ld.acquire.gpu.global.u32 $0, [$1];", "=r,l,~{memory}",
                                  side_effect=True)
            spin = b.append_basic_block("grid_sync_spin")
            done = b.append_basic_block("grid_sync_done")
            b.branch(spin)
            b.position_at_end(spin)
            cur = b.call(load, [addr])
            flipped = b.icmp_unsigned("!=", b.and_(b.xor(old, cur), top), llir.Constant(I32T, 0))
            b.cbranch(flipped, done, spin)
            b.position_at_end(done)
            lw.intrinsic("llvm.nvvm.membar.gl", llir.VoidType(), [], "nounwind")  # ... and fence on leaving
        self.barrier(lw, span)

    def fence(self, lw: Lowerer, kind: str, span: Span | None) -> None:
        if kind == "threadfence":  # membar.gl (= fence.sc.gpu on sm_70+)
            lw.intrinsic("llvm.nvvm.membar.gl", llir.VoidType(), [], "nounwind")
        else:  # warp_sync: bar.warp.sync 0xffffffff
            lw.intrinsic("llvm.nvvm.bar.warp.sync", llir.VoidType(), [llir.Constant(I32T, -1)], "convergent", "nounwind")

    def warp(self, lw: Lowerer, op: str, args: list[llir.Value], ty: ScalarTy, span: Span | None) -> llir.Value:
        b = lw.b
        full = llir.Constant(I32T, -1)
        if op == "ballot":
            return lw.intrinsic("llvm.nvvm.vote.ballot.sync", I32T, [full, args[0]], "convergent", "nounwind")
        if op in ("any", "all"):
            return lw.intrinsic(f"llvm.nvvm.vote.{op}.sync", I1, [full, args[0]], "convergent", "nounwind")
        v, k = args
        mode = {"shfl_down": "down", "shfl_up": "up", "shfl_xor": "bfly", "shfl_idx": "idx"}[op]
        clamp = llir.Constant(I32T, 0 if mode == "up" else 0x1F)

        def shfl32(x: llir.Value) -> llir.Value:
            suffix = "f32" if x.type == FLOAT else "i32"
            return lw.intrinsic(f"llvm.nvvm.shfl.sync.{mode}.{suffix}", x.type, [full, x, k, clamp], "convergent", "nounwind")

        if ty.bits == 32:
            return shfl32(v)
        x = v if ty.is_int else b.bitcast(v, I64T)
        lo = shfl32(b.trunc(x, I32T))
        hi = shfl32(b.trunc(b.lshr(x, llir.Constant(I64T, 32)), I32T))
        r = b.or_(b.zext(lo, I64T), b.shl(b.zext(hi, I64T), llir.Constant(I64T, 32)))
        return r if ty.is_int else b.bitcast(r, v.type)

    # atomics and print (codegen/llvm/effects.py, atomics.py)
    string_as = 4  # printf formats live in the constant space

    def sync_scope(self, scope: str) -> str:
        return atomics.sync_scope(scope)

    def atomic_rmw(self, lw: Lowerer, op: str, ptr: llir.Value, val: llir.Value, ty: ScalarTy, scope: str, order: str) -> llir.Value:
        return atomics.atomic_rmw(self, lw, op, ptr, val, ty, scope, order)

    def emit_print(self, lw: Lowerer, fmt: llir.Value, args: llir.Value) -> None:
        ptr = llir.PointerType()
        lw.b.call(lw.declare("vprintf", I32T, [ptr, ptr]), [fmt, args])

    def shared_global(self, lw: Lowerer, name: str, ty: SharedTy, span: Span | None = None) -> llir.Value:
        # a helper's array inlined beside one of the same name is `name.N` (typer_stmts.shared_decl):
        # `$`, which no Python name holds, keeps the symbols apart (`s.1` is not the user's `s_1`)
        sym = "__az_shared_" + re.sub(r"\W", "$", name)
        if ty.dynamic:
            gv = llir.GlobalVariable(lw.module, llir.ArrayType(mem_type(ty.elem), 0), sym, addrspace=3)
            gv.linkage = "external"
        else:
            gv = llir.GlobalVariable(lw.module, llir.ArrayType(mem_type(ty.elem), ty.size), sym, addrspace=3)
            gv.linkage = "internal"
            gv.initializer = llir.Constant(gv.value_type, llir.Undefined)
        gv.align = 16
        gv.type = llir.PointerType(addrspace=3)  # opaque, so element GEPs type-check
        return gv


def uses_libdevice(module_text: str) -> bool:
    return "__nv_" in module_text


def emit_ptx(llvm_ir: str, entry: str, arch: str = DEFAULT_ARCH, opt: int = 3) -> tuple[str, str]:
    """Optimise a module (linking the libdevice functions it calls `__nv_*`) and emit PTX.
    Safe to call from several threads at once.

    Returns (optimised LLVM IR, PTX)."""
    llvm = binding()
    tm = target_machine(arch, opt)
    context = llvm.create_context()
    try:
        mod = llvm.parse_assembly(llvm_ir, context)
        try:
            if uses_libdevice(llvm_ir):
                mod.link_in(_libdevice_module(libdevice_calls(llvm_ir), context))
            mod.verify()
            optimize(mod, tm, opt, {entry})
            return str(mod), tm.emit_assembly(mod)
        finally:
            mod.close()
    finally:
        context.close()


# ---- ptxas ---------------------------------------------------------------------------------


# `find_ptxas` lives in toolchain.py (standard library only, for the light cached-load path).


class PtxasError(RuntimeError):
    """ptxas rejected a PTX module (a compiler bug: report it with the PTX)."""


_RE_REGS = re.compile(r"Used (\d+) registers")
_RE_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_RE_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> Resources:
    res = Resources(ptxas_log=log)
    m = _RE_REGS.search(log)
    if m:
        res.registers = int(m.group(1))
    m = _RE_STACK.search(log)
    if m:
        res.stack_frame, res.spill_stores, res.spill_loads = (int(g) for g in m.groups())
    m = _RE_SMEM.search(log)
    if m:
        res.shared_bytes = int(m.group(1))
    return res


def run_ptxas(ptx: str, arch: str = DEFAULT_ARCH, *, line_info: bool = False, ptxas: str | None = None,
              opt_level: int | None = None, fast_compile: str | None = None, relocatable: bool = False) -> tuple[bytes, Resources]:
    """Assemble PTX to a cubin with `ptxas -v`; raises PtxasError when it is rejected.
    `opt_level`: ptxas's `-O` (None: its default, 3); `fast_compile`: its `-Ofc` level
    ("min", "mid"; None: off), dropped for a ptxas too old to know the option; `relocatable`:
    `-c`, a relocatable object (PTX calling `.extern .func`s: linked later, with their code)."""
    return PtxasJob(ptx, arch, line_info=line_info, ptxas=ptxas, opt_level=opt_level, fast_compile=fast_compile,
                    relocatable=relocatable).result()


class PtxasJob:
    """`ptxas -v` on one PTX module, running as a child process from construction on (the
    caller does other work meanwhile: the compile path runs the checker); `result()` waits for
    it, `cancel()` stops it.  `seconds`: its wall time, once done."""

    def __init__(self, ptx: str, arch: str = DEFAULT_ARCH, *, line_info: bool = False, ptxas: str | None = None,
                 opt_level: int | None = None, fast_compile: str | None = None, relocatable: bool = False):
        exe = ptxas or find_ptxas()
        if exe is None:
            raise FileNotFoundError("ptxas was not found on PATH or under CUDA_HOME")
        self.arch = arch
        self._dir = tempfile.TemporaryDirectory(prefix="anodize-")
        src = Path(self._dir.name, "k.ptx")
        self._out = Path(self._dir.name, "k.cubin")
        src.write_text(ptx)
        cmd = [exe, f"-arch={arch}", "-v", "-o", str(self._out), str(src)]
        if line_info:
            cmd.insert(1, "-lineinfo")
        if relocatable:
            cmd.insert(1, "-c")
        if opt_level is not None:
            cmd.insert(1, f"-O{opt_level}")
        self._fallback = list(cmd)  # the command without -Ofc, for a ptxas that does not know it
        if fast_compile:
            cmd[1:1] = ["-Ofc", fast_compile]
        self.cmd = cmd
        self._t0 = time.perf_counter()
        self.seconds = 0.0
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def result(self) -> tuple[bytes, Resources]:
        try:
            stdout, stderr = self._proc.communicate()
            if self._proc.returncode != 0 and self.cmd != self._fallback and "Unknown option" in stderr:
                # a ptxas from before --Ofast-compile (CUDA 12.8): the same run without it
                self.cmd = self._fallback
                self._proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                stdout, stderr = self._proc.communicate()
            self.seconds = time.perf_counter() - self._t0
            log = stdout + stderr
            if self._proc.returncode != 0:
                raise PtxasError(f"ptxas rejected the PTX for {self.arch}:\n{log}")
            return self._out.read_bytes(), parse_ptxas_log(log)
        finally:
            self._dir.cleanup()

    def cancel(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._dir.cleanup()
