"""CPU backend: one host thread per GPU thread, for barrier kernels the splitter leaves out.

A kernel with barriers, warp operations or shared memory normally runs one block per
host thread, split at its synchronisation points (split.py, regions.py).  The
forms `split.Unsplittable` names (and `compile_cpu(..., split_barriers=False)`, which
the tests use as the reference) come here: each GPU thread of a block gets a host thread
(blocks still run one after another).  The JIT-compiled
`__az_thread(argv, fault, rank, ctx)` runs one GPU thread; the generated code
calls back into this module for `syncthreads` and warp operations:

* `__az_cpu_barrier(ctx)`: waits until every *live* thread of the block arrives
  (a thread that returned no longer counts, as on sm_70+);
* `__az_cpu_grid_barrier(ctx)`: `az.grid.sync()`, the same over every thread of the grid: a
  kernel that calls it runs every block of the grid at once (`run_grid(..., whole_grid=True)`),
  as a cooperative launch keeps every block resident on a GPU;
* `__az_cpu_shfl(ctx, mode, bits, k)` / `__az_cpu_vote(ctx, mode, pred)`: every
  live lane of the warp deposits its value, then each reads its source lane with
  the PTX rules for `shfl.sync` (an invalid source lane gives the caller's own
  value) or the vote over the deposited predicates.

Shared memory is one zeroed buffer per block, exactly as large as the launch asks
(static arrays, then `shared_mem` dynamic bytes); its address is in `ctx`.  A
barrier that not every thread reaches would hang: after `TIMEOUT_S` seconds the
block is marked broken, every wait returns, and the launch raises RuntimeError.

`ctx` layout (little-endian): i32[13] ids (tid xyz, ctaid xyz, ntid xyz,
nctaid xyz, lane), i32 dynamic shared bytes (offset 52, PTX's %dynamic_smem_size),
i64 shared base (offset 56), i64 block handle (64), i64 linear thread id (72).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import field
from anodize.language.records import dataclass
from typing import Any

import llvmlite.binding as llvm
import numpy as np

CTX_WORDS = 10  # 80 bytes
OFF_SHARED = 56
OFF_HANDLE = 64
OFF_LINEAR = 72
TIMEOUT_S = 30.0

SHFL_MODES = {"shfl_down": 0, "shfl_up": 1, "shfl_xor": 2, "shfl_idx": 3}
VOTE_MODES = {"ballot": 0, "any": 1, "all": 2}


@dataclass
class _Warp:
    alive: int
    arrived: int = 0
    gen: int = 0
    values: dict[int, int] = field(default_factory=dict)
    snapshot: dict[int, int] = field(default_factory=dict)


class Barrier:
    """A barrier of the live host threads of a block or a grid: it releases when every thread
    still running has arrived (a thread that ends leaves it); a wait past TIMEOUT_S breaks it
    for everyone (the launch reports the deadlock)."""

    def __init__(self, nthreads: int):
        self.cv = threading.Condition()
        self.alive = nthreads
        self.arrived = 0
        self.gen = 0
        self.broken = False

    def _wait(self, done: Callable[[], bool]) -> None:
        if not self.cv.wait_for(lambda: done() or self.broken, timeout=TIMEOUT_S):
            self.broken = True
            self.cv.notify_all()

    def _release(self) -> None:
        self.arrived = 0
        self.gen += 1
        self.cv.notify_all()

    def barrier(self) -> None:
        with self.cv:
            if self.broken:
                return
            gen = self.gen
            self.arrived += 1
            if self.arrived >= self.alive:
                self._release()
            else:
                self._wait(lambda: self.gen != gen)

    def _leave(self) -> None:
        """A thread ended (under `cv`): the others no longer wait for it."""
        self.alive -= 1
        if self.arrived and self.arrived >= self.alive:
            self._release()


class GridBarrier(Barrier):
    """`az.grid.sync()` across the host threads of every block of a grid (its live threads)."""

    def exit(self) -> None:
        with self.cv:
            self._leave()


class BlockState(Barrier):
    """The synchronisation state of one block's host threads: its barrier and its warps'
    exchanges."""

    def __init__(self, nthreads: int, grid: GridBarrier | None = None):
        super().__init__(nthreads)
        self.grid = grid  # a cooperative grid's barrier, shared by its blocks
        self.warps = {w: _Warp(min(32, nthreads - 32 * w)) for w in range((nthreads + 31) // 32)}

    def _release_warp(self, w: _Warp) -> None:
        w.snapshot = w.values
        w.values = {}
        w.arrived = 0
        w.gen += 1
        self.cv.notify_all()

    def exchange(self, linear: int, value: int) -> dict[int, int]:
        w = self.warps[linear // 32]
        with self.cv:
            if self.broken:
                return {}
            gen = w.gen
            w.values[linear % 32] = value
            w.arrived += 1
            if w.arrived >= w.alive:
                self._release_warp(w)
            else:
                self._wait(lambda: w.gen != gen)
            return w.snapshot

    def exit(self, linear: int) -> None:
        with self.cv:
            self._leave()
            w = self.warps[linear // 32]
            w.alive -= 1
            if w.arrived and w.arrived >= w.alive:
                self._release_warp(w)


_BLOCKS: dict[int, BlockState] = {}
_HANDLES = itertools.count(1)


def _ctx_words(ctx: int) -> tuple[BlockState, int]:
    handle = ctypes.c_int64.from_address(ctx + OFF_HANDLE).value
    linear = ctypes.c_int64.from_address(ctx + OFF_LINEAR).value
    return _BLOCKS[handle], linear


def _barrier(ctx: int) -> None:
    st, _ = _ctx_words(ctx)
    st.barrier()


def _grid_barrier(ctx: int) -> None:
    st, _ = _ctx_words(ctx)
    assert st.grid is not None  # run_grid(..., whole_grid=True) for a kernel with `az.grid.sync()`
    st.grid.barrier()


def _shfl(ctx: int, mode: int, bits: int, k: int) -> int:
    st, linear = _ctx_words(ctx)
    lane = linear % 32
    snap = st.exchange(linear, bits)
    if mode == 0:  # down: lane + k, valid up to lane 31
        src, ok = lane + k, lane + k <= 31
    elif mode == 1:  # up: lane - k, valid from lane 0
        src, ok = lane - k, lane - k >= 0
    elif mode == 2:  # bfly: lane ^ k
        src = lane ^ (k & 0xFFFFFFFF)
        ok = src <= 31
    else:  # idx: k's low five bits
        src, ok = k & 31, True
    if not ok or src not in snap:
        return bits
    return snap[src]


def _vote(ctx: int, mode: int, pred: int) -> int:
    st, linear = _ctx_words(ctx)
    snap = st.exchange(linear, 1 if pred else 0)
    if mode == 0:
        return sum(1 << lane for lane, p in snap.items() if p) & 0xFFFFFFFF
    if mode == 1:
        return 1 if any(snap.values()) else 0
    return 1 if all(snap.values()) else 0


_BARRIER_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_SHFL_T = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint64, ctypes.c_int32)
_VOTE_T = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32)
_CALLBACKS = (_BARRIER_T(_barrier), _SHFL_T(_shfl), _VOTE_T(_vote), _BARRIER_T(_grid_barrier))


@functools.cache
def register_symbols() -> None:
    """Make the callbacks resolvable by MCJIT (once per process)."""
    for name, cb in zip(("__az_cpu_barrier", "__az_cpu_shfl", "__az_cpu_vote", "__az_cpu_grid_barrier"), _CALLBACKS, strict=True):
        llvm.add_symbol(name, ctypes.cast(cb, ctypes.c_void_p).value)


def run_grid(
    thread_fn: Callable[..., None],
    grid: Sequence[int],
    block: Sequence[int],
    argv_addr: int,
    fault_address: int,
    launch_rank: int,
    static_shared: int,
    dynamic_shared: int,
    whole_grid: bool = False,
) -> None:
    """Run every block in turn, one host thread per GPU thread of the block (`whole_grid`: every
    block at once, for `az.grid.sync()`).

    Each block's shared memory is exactly `static_shared + dynamic_shared` bytes (the
    generated code bounds-checks every access against it, reading the dynamic size from `ctx`)."""
    gx, gy, gz = grid
    bx, by, bz = block
    nthreads = bx * by * bz
    blocks = list(itertools.product(range(gz), range(gy), range(gx)))
    if whole_grid:
        gb = GridBarrier(nthreads * len(blocks))
        _run_blocks(thread_fn, blocks, grid, block, argv_addr, fault_address, launch_rank, static_shared, dynamic_shared, gb)
        if gb.broken:
            raise RuntimeError(f"grid {tuple(grid)} deadlocked: not every live thread reached `az.grid.sync()` within {TIMEOUT_S:.0f} s")
        return
    for one in blocks:
        _run_blocks(thread_fn, [one], grid, block, argv_addr, fault_address, launch_rank, static_shared, dynamic_shared, None)


def _run_blocks(thread_fn: Callable[..., None], blocks: list[tuple[int, int, int]], grid: Sequence[int], block: Sequence[int],
                argv_addr: int, fault_address: int, launch_rank: int, static_shared: int, dynamic_shared: int,
                gb: GridBarrier | None) -> None:
    """Run `blocks` at once, one host thread per GPU thread (raise on a deadlocked block)."""
    gx, gy, gz = grid
    bx, by, bz = block
    nthreads = bx * by * bz
    shared_bytes = static_shared + dynamic_shared
    states: list[tuple[tuple[int, int, int], BlockState, int]] = []
    keep: list[np.ndarray] = []
    threads: list[threading.Thread] = []
    try:
        for cz, cy, cx in blocks:
            st = BlockState(nthreads, gb)
            handle = next(_HANDLES)
            _BLOCKS[handle] = st
            states.append(((cx, cy, cz), st, handle))
            shared = np.zeros(shared_bytes, np.uint8)
            keep.append(shared)
            for tz, ty, tx in itertools.product(range(bz), range(by), range(bx)):
                linear = tx + bx * (ty + by * tz)
                ctx = np.zeros(CTX_WORDS, np.int64)
                ids = ctx.view(np.int32)
                ids[:14] = (tx, ty, tz, cx, cy, cz, bx, by, bz, gx, gy, gz, linear % 32, dynamic_shared)
                ctx[OFF_SHARED // 8] = shared.ctypes.data
                ctx[OFF_HANDLE // 8] = handle
                ctx[OFF_LINEAR // 8] = linear
                keep.append(ctx)

                def one(ctx: np.ndarray = ctx, linear: int = linear, st: BlockState = st) -> None:
                    try:
                        thread_fn(argv_addr, fault_address, launch_rank, ctx.ctypes.data)
                    finally:
                        st.exit(linear)
                        if st.grid is not None:
                            st.grid.exit()

                threads.append(threading.Thread(target=one, daemon=True))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for _, _, handle in states:
            del _BLOCKS[handle]
    for where, st, _ in states:
        if st.broken:
            raise RuntimeError(
                f"block {where} deadlocked: not every live thread reached `az.syncthreads()` or a warp "
                f"operation within {TIMEOUT_S:.0f} s (a barrier under thread-dependent control flow?)"
            )


def thread_proto() -> Any:
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p)
