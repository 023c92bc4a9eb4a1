"""The debug device's launch: memory, threads, barriers, races, faults and `breakpoint()`.

`InterpModule(k, compiled)` is called like the CPU backend's `CpuModule` (grid, block,
flat arguments, fault record address, launch rank, dynamic shared bytes) and runs the
kernel's typed IR through `interp.Thread`:

* Blocks run one after another.  A kernel with barriers, warp operations or shared
  memory runs one Python thread per GPU thread of the block (`threading`), with the
  CPU backend's `BlockState` for `az.syncthreads()` and the per-32-lane exchanges of
  warp operations; any other kernel runs its threads one after another in the
  launching thread (the same results: its threads never wait for each other).
* Slices are the launch's host memory, read and written in place.  Every access is
  bounds-checked; a failed check records a fault in the kernel's fault record (the
  first one's site, index and length), so the next synchronisation raises the same
  `KernelFault` (file:line) as the other backends.
* Races: every element of an output slice (not an AtomicSlice) and of a shared array
  remembers its last writer and its last two readers with the barrier interval (the
  block's barrier generation and the warp's exchange generation) they acted in.  An
  access conflicts with another thread's access of the same element when at least one
  writes and nothing orders them: another block, or the same barrier interval (for
  two lanes of one warp: no warp operation or `az.warp.sync()` between).  A second
  writer of a `DisjointSlice` element is a conflict whatever the barriers.  The
  conflicting (second) access records a fault whose kind names both threads.
* `breakpoint()` stops in pdb with the kernel's variables as the frame's locals (a
  witness has `.get()`/`.row()`/`.col()`), at the kernel's file and line; one thread
  at a time, and barriers wait as long as a thread is in the debugger.
"""

from __future__ import annotations

import bdb
import ctypes
import itertools
import struct
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from anodize.language import ir
from anodize.language.halfbits import bits_to_float, round_bits
from anodize.language.ir import FaultSite
from anodize.language.types import I64, ScalarTy, SharedTy

from . import ops
from .breakpoint import stop
from ..artifact import CompiledKernel, flat_abi
from ..cpu.threads import TIMEOUT_S, BlockState, GridBarrier
from .interp import Thread

_FORMATS = {("i", 8): "b", ("i", 16): "h", ("i", 32): "i", ("i", 64): "q", ("u", 8): "B", ("u", 16): "H",
            ("u", 32): "I", ("u", 64): "Q", ("f", 32): "f", ("f", 64): "d", ("b", 8): "B"}
_ATOMIC = threading.Lock()
_DEBUGGER = threading.RLock()  # one thread in pdb at a time
_PAUSED = [0]  # threads in the debugger now (barriers then wait without a time limit)


class Mem:
    """A slice parameter's elements (in place, in host memory) and its race records."""

    def __init__(self, name: str, elem: ScalarTy, ptr: int, dims: tuple[int, ...], kind: Any):
        self.name = name
        self.elem = elem
        self.dims = dims
        n = int(np.prod(dims)) if dims else 0
        nbytes = n * elem.info.mem_bits // 8
        self.record = elem.info.kind == "r"  # a record slice: its fields read and written by offset
        self.itemsize = elem.info.mem_bits // 8
        fmt = "B" if self.record else _FORMATS[("u" if elem.is_half else elem.info.kind, elem.info.mem_bits)]
        self.half = elem.name if elem.is_half else None  # f16, bf16, f8: bit patterns in memory
        raw = memoryview((ctypes.c_char * nbytes).from_address(ptr)).cast("B") if nbytes else None
        self.raw = raw
        self.view: Any = raw.cast(fmt) if raw is not None else []  # type: ignore[call-overload]
        self.is_bool = elem.is_bool
        self.tracked = kind is not None and kind.output and not kind.atomic
        self.disjoint = kind is not None and kind.disjoint
        self.writer: dict[int, tuple[int, int, int, int]] = {}
        self.readers: dict[int, list[tuple[int, int, int, int]]] = {}

    def load(self, i: int) -> Any:
        v = self.view[i]
        if self.half is not None:
            return bits_to_float(v, self.half)
        return v != 0 if self.is_bool else v

    def store(self, i: int, v: Any) -> None:
        if self.half is not None:
            self.view[i] = round_bits(v, self.half)
            return
        self.view[i] = (1 if v else 0) if self.is_bool else v

    def load_field(self, i: int, offset: int, ty: ScalarTy) -> Any:
        """A record element's scalar at `offset` bytes (ir.Read.offset)."""
        fmt = "<" + _FORMATS[("u" if ty.is_half else ty.info.kind, ty.info.mem_bits)]
        v = struct.unpack_from(fmt, self.raw, i * self.itemsize + offset)[0]  # type: ignore[arg-type]
        if ty.is_half:
            return bits_to_float(v, ty.name)
        return v != 0 if ty.is_bool else v

    def store_field(self, i: int, offset: int, ty: ScalarTy, v: Any) -> None:
        fmt = "<" + _FORMATS[("u" if ty.is_half else ty.info.kind, ty.info.mem_bits)]
        if ty.is_half:
            v = round_bits(v, ty.name)
        struct.pack_into(fmt, self.raw, i * self.itemsize + offset, (1 if v else 0) if ty.is_bool else v)  # type: ignore[arg-type]


class SharedMem(Mem):
    """One block's shared array (zeroed, as the CPU backend's)."""

    def __init__(self, name: str, ty: SharedTy, dynamic_bytes: int):
        self.name = f"shared {name}"
        self.elem = ty.elem
        self.dims = (dynamic_bytes // (ty.elem.info.mem_bits // 8),) if ty.dynamic else ty.shape
        self.view = [ops.zero(ty.elem)] * int(np.prod(self.dims))
        self.half = None  # (Python floats, each already rounded to the element type)
        self.is_bool = False
        self.tracked = True
        self.disjoint = False
        self.writer = {}
        self.readers = {}


class _Block(BlockState):
    """`BlockState`, but a barrier waits without a time limit while a thread is in pdb."""

    def _wait(self, done: Any) -> None:
        while not self.cv.wait_for(lambda: done() or self.broken, timeout=TIMEOUT_S):
            if not _PAUSED[0]:
                self.broken = True
                self.cv.notify_all()
                return


class BlockCtx:
    def __init__(self, run: Run, ctaid: tuple[int, int, int], linear: int, threaded: bool, grid: GridBarrier | None = None):
        self.run = run
        self.grid = grid  # a cooperative grid's barrier (`az.grid.sync()`), shared by its blocks
        self.ctaid = ctaid
        self.linear = linear
        self.state = _Block(run.threads_per_block) if threaded else None
        self.shared: dict[str, SharedMem] = {}
        self.lock = threading.Lock()

    def barrier(self) -> None:
        if self.state is not None:
            self.state.barrier()

    def grid_barrier(self) -> None:
        """`az.grid.sync()`: a block barrier on both sides (as on the GPU: the race detector's
        barrier epochs advance), the grid's between."""
        assert self.grid is not None and self.state is not None
        self.state.barrier()
        self.grid.barrier()
        self.state.barrier()

    def exchange(self, linear: int, value: Any) -> dict[int, Any]:
        if self.state is None:
            return {linear % 32: value}
        return self.state.exchange(linear, value)

    def epoch(self, linear: int) -> tuple[int, int]:
        """(barrier generation, this thread's warp's exchange generation)."""
        st = self.state
        if st is None:
            return 0, 0
        return st.gen, st.warps[linear // 32].gen

    def shared_array(self, name: str, ty: SharedTy) -> SharedMem:
        key = f"dynamic {ty.elem.name}" if ty.dynamic else name  # dynamic arrays share one space
        mem = self.shared.get(key)
        if mem is None:
            with self.lock:
                mem = self.shared.get(key)
                if mem is None:
                    mem = self.shared[key] = SharedMem(name, ty, self.run.dynamic_shared)
        return mem


class Run:
    """One launch of a kernel on the debug device."""

    def __init__(self, module: InterpModule, grid: tuple[int, int, int], block: tuple[int, int, int],
                 flat: Sequence[Any], fault_address: int, launch_rank: int, dynamic_shared: int):
        self.module = module
        self.k = module.k
        self.grid = grid
        self.block_dim = block
        self.threads_per_block = block[0] * block[1] * block[2]
        self.fault_address = fault_address
        self.launch_rank = launch_rank
        self.dynamic_shared = dynamic_shared
        self.slices: dict[str, Mem] = {}
        self.scalars: dict[str, Any] = {}
        it = iter(flat)
        for p in self.k.params:
            if p.slice_kind is not None:
                ptr = int(next(it))
                dims = tuple(int(next(it)) for _ in range(p.slice_kind.rank))
                self.slices[p.name] = Mem(p.name, ScalarTy(p.scalar), ptr, dims, p.slice_kind)
            else:
                ty = ScalarTy(p.scalar)
                v = next(it)
                if ty.is_half:  # (the ABI's bit pattern: artifact.py)
                    v = bits_to_float(int(v), ty.name)
                self.scalars[p.name] = ops.const(v, ty)

    # ---- faults ------------------------------------------------------------------------
    def fault(self, site: int, index: int, length: int) -> None:
        rec = (ctypes.c_uint32 * 2).from_address(self.fault_address)
        with _ATOMIC:
            rec[0] += 1
            if rec[0] == 1:
                rec[1] = site
                (ctypes.c_int64 * 2).from_address(self.fault_address + 8)[:] = [ops.wrap(index, I64), ops.wrap(length, I64)]

    def site_for(self, node: Any, kind: str, name: str) -> int:
        site = getattr(node, "site", -1)
        if site >= 0:
            return int(site)
        return self.module.extra_site(node.span, kind, name)

    # ---- races -------------------------------------------------------------------------
    def track(self, t: Thread, mem: Mem, i: int, write: bool, node: Any) -> None:
        if not mem.tracked:
            return
        shared = isinstance(mem, SharedMem)
        who = t.linear if shared else t.gid
        bgen, wgen = t.block.epoch(t.linear)
        me = (who, t.block.linear, bgen, wgen)
        w = mem.writer.get(i)
        if w is not None and w[0] != who and (self._unordered(t, w, me) or (write and mem.disjoint)):
            self._race(t, mem, i, node, w, "wrote" , "writes" if write else "reads")
            return
        if write:
            for r in mem.readers.get(i, ()):
                if r[0] != who and self._unordered(t, r, me):
                    self._race(t, mem, i, node, r, "read", "writes")
                    return
            mem.writer[i] = me
            return
        rs = mem.readers.setdefault(i, [])
        if not any(r[0] == who for r in rs):
            rs.insert(0, me)
            del rs[2:]

    @staticmethod
    def _unordered(t: Thread, other: tuple[int, int, int, int], me: tuple[int, int, int, int]) -> bool:
        if other[1] != me[1]:
            return True  # another block: nothing orders two blocks
        if other[2] != me[2]:
            return False  # a barrier between them
        return True if other[0] // 32 != me[0] // 32 or other[3] == me[3] else False

    def _race(self, t: Thread, mem: Mem, i: int, node: Any, other: tuple[int, int, int, int], did: str, does: str) -> None:
        where = f"`{mem.name}[{i}]`" if len(mem.dims) == 1 else f"`{mem.name}[{i // mem.dims[1]}, {i % mem.dims[1]}]`"
        them = self._thread_name(other, isinstance(mem, SharedMem))
        kind = (f"data race: thread {t.tid} of block {t.ctaid} {does} {where}, which thread {them} {did} "
                f"with nothing ordering the two accesses (no `az.syncthreads()` between them, or another block)")
        self.fault(self.module.extra_site(node.span, kind, mem.name), i, 0)

    def _thread_name(self, rec: tuple[int, int, int, int], shared: bool) -> str:
        who, block = rec[0], rec[1]
        linear = who if shared else who - block * self.threads_per_block
        bx, by, _ = self.block_dim
        tid = (linear % bx, linear // bx % by, linear // (bx * by))
        gx, gy, _ = self.grid
        return f"{tid} of block {(block % gx, block // gx % gy, block // (gx * gy))}"

    # ---- atomics -----------------------------------------------------------------------
    def atomic(self, mem: Mem, i: int, op: str, val: Any, ty: ScalarTy, expected: Any = None) -> Any:
        """One atomic read-modify-write (every thread's atomics are serialised); the old value."""
        with _ATOMIC:
            old = mem.load(i)
            if op == "load":
                return old
            if op in ("exchange", "store"):
                new = val
            elif op == "compare_exchange":
                new = val if old == expected else old
            elif op in ("add", "sub"):
                new = ops.binop("+" if op == "add" else "-", old, val, ty)
            elif op in ("and", "or", "xor"):
                new = ops.binop({"and": "&", "or": "|", "xor": "^"}[op], old, val, ty)
            else:
                new = ops.minnum(old, val, op) if ty.is_float else (min(old, val) if op == "min" else max(old, val))
            mem.store(i, new)
            return None if op == "store" else old

    # ---- breakpoint() ------------------------------------------------------------------
    def breakpoint(self, t: Thread, s: ir.Breakpoint) -> None:
        with _DEBUGGER:
            _PAUSED[0] += 1
            try:
                stop(t, s)
            finally:
                _PAUSED[0] -= 1

    # ---- the grid ----------------------------------------------------------------------
    def run(self) -> None:
        gx, gy, gz = self.grid
        bx, by, bz = self.block_dim
        k = self.k
        threaded = k.uses_barrier or k.uses_warp or k.uses_shared
        tids = [(tx, ty, tz) for tz, ty, tx in itertools.product(range(bz), range(by), range(bx))]
        blocks = list(itertools.product(range(gz), range(gy), range(gx)))
        if k.grid_sync:  # `az.grid.sync()`: every block of the grid at once, as a cooperative launch
            gb = GridBarrier(len(tids) * len(blocks))
            self._run_threaded([BlockCtx(self, (cx, cy, cz), cx + gx * (cy + gy * cz), True, gb) for cz, cy, cx in blocks], tids)
            if gb.broken:
                raise RuntimeError(f"grid {self.grid} deadlocked on the debug device: not every live thread reached "
                                   f"`az.grid.sync()` within {TIMEOUT_S:.0f} s")
            return
        for cz, cy, cx in blocks:
            blk = BlockCtx(self, (cx, cy, cz), cx + gx * (cy + gy * cz), threaded)
            if not threaded:
                for tid in tids:
                    Thread(self, blk, tid).run_kernel()
                continue
            self._run_threaded([blk], tids)

    def _run_threaded(self, blks: list[BlockCtx], tids: list[tuple[int, int, int]]) -> None:
        errors: list[BaseException] = []

        def one(blk: BlockCtx, tid: tuple[int, int, int]) -> None:
            st = blk.state
            assert st is not None
            t = Thread(self, blk, tid)
            try:
                t.run_kernel()
            except BaseException as e:  # pdb's `q` (BdbQuit) or an interpreter error: re-raised below
                errors.append(e)
                with st.cv:
                    st.broken = True
                    st.cv.notify_all()
                if blk.grid is not None:
                    with blk.grid.cv:
                        blk.grid.broken = True
                        blk.grid.cv.notify_all()
            finally:
                st.exit(t.linear)
                if blk.grid is not None:
                    blk.grid.exit()

        threads = [threading.Thread(target=one, args=(blk, tid), daemon=True) for blk in blks for tid in tids]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        if errors:
            raise errors[0]
        for blk in blks:
            self._deadlock(blk)

    def _deadlock(self, blk: BlockCtx) -> None:
        st = blk.state
        assert st is not None
        if st.broken:
            raise RuntimeError(
                f"block {blk.ctaid} deadlocked on the debug device: not every live thread reached "
                f"`az.syncthreads()` or a warp operation within {TIMEOUT_S:.0f} s "
                "(a barrier under thread-dependent control flow?)"
            )


class InterpModule:
    """The debug device's kernel entry: called like `CpuModule`."""

    def __init__(self, k: ir.KernelIR, compiled: CompiledKernel):
        self.k = k
        self.compiled = compiled
        self.kinds = flat_abi(k.params)
        self.entry = k.name
        self._sites: dict[tuple[Any, str, str], int] = {}
        self._lock = threading.Lock()

    def extra_site(self, span: Any, kind: str, param: str) -> int:
        """A fault site the compiler had no reason to make (an access it proved in range, a
        race): appended to the artifact's sites so that the arena names its file:line."""
        key = (span.line if span else 0, kind, param)
        with self._lock:
            site = self._sites.get(key)
            if site is None:
                c = self.compiled
                path = span.path if span else c.source_path
                line = span.line if span else c.source_line
                col = span.col if span else 0
                site = self._sites[key] = len(c.fault_sites)
                c.fault_sites = c.fault_sites + (FaultSite(path, line, col, kind, param),)
        return site

    def __call__(self, grid_xyz: Sequence[int], block_xyz: Sequence[int], flat_args: Sequence[Any],
                 fault_address: int, launch_rank: int, dynamic_shared: int = 0) -> None:
        if len(flat_args) != len(self.kinds):
            raise TypeError(f"`{self.entry}` takes {len(self.kinds)} flattened arguments {self.kinds}, got {len(flat_args)}")
        g = (tuple(int(x) for x in grid_xyz) + (1, 1, 1))[:3]
        bl = (tuple(int(x) for x in block_xyz) + (1, 1, 1))[:3]
        run = Run(self, g, bl, flat_args, int(fault_address), int(launch_rank), int(dynamic_shared))  # type: ignore[arg-type]
        try:
            run.run()  # (races are found from the barrier intervals, whatever the interleaving)
        except bdb.BdbQuit:  # `q` in pdb at a kernel's breakpoint(): the program ends, quietly
            raise SystemExit(f"anodize: quit the debugger in kernel `{self.k.name}`") from None
