"""The autotuner's built-in model (`prune_configs_by={"top_k": k}`): what a compiled
configuration costs a multiprocessor, from ptxas's registers and spills and the shared memory
the kernel asks for.

A configuration that spills (local-memory stores or loads in ptxas's report) or whose block cannot
be resident at all (registers or shared memory beyond one multiprocessor) is dropped with that
reason; the others are ranked by resident warps a multiprocessor (occupancy).  The figures per
architecture are NVIDIA's published limits (CUDA C++ Programming Guide, "Compute Capabilities").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Estimate", "estimate", "resident_blocks"]

REGISTERS_PER_SM = 65536
THREADS_PER_SM = 2048
BLOCKS_PER_SM = 32
REGISTER_GRANULE = 256  # registers are allocated per warp in units of 256
# shared memory a multiprocessor holds, by compute capability (bytes), and what the system keeps per block
SHARED_PER_SM = {(9, 0): 233472, (8, 0): 167936, (8, 7): 167936, (8, 6): 102400, (8, 9): 102400}
SHARED_RESERVED_PER_BLOCK = 1024


@dataclass(frozen=True)
class Estimate:
    problem: str  # why the configuration is dropped ("" when it is kept)
    score: float  # resident warps a multiprocessor (higher ranks first)
    blocks: int  # resident blocks a multiprocessor


def resident_blocks(threads: int, registers: int, shared: int, cc: tuple[int, int]) -> int:
    """Blocks of `threads` threads using `registers` a thread and `shared` bytes a block that one
    multiprocessor of compute capability `cc` holds at once."""
    warps = -(-threads // 32)
    per_warp = -(-max(registers, 1) * 32 // REGISTER_GRANULE) * REGISTER_GRANULE
    by_regs = REGISTERS_PER_SM // (per_warp * warps) if registers else BLOCKS_PER_SM
    by_threads = THREADS_PER_SM // max(threads, 1)
    sm_shared = SHARED_PER_SM.get(cc, 49152)
    by_shared = sm_shared // (shared + SHARED_RESERVED_PER_BLOCK) if shared else BLOCKS_PER_SM
    return max(0, min(by_regs, by_threads, by_shared, BLOCKS_PER_SM))


def estimate(compiled: Any, dev: Any, threads: int | None = None) -> Estimate:
    """The model's verdict on one compiled configuration for device `dev`."""
    res = compiled.resources
    spilled = res.spill_stores + res.spill_loads
    if spilled:
        return Estimate(f"spills ({res.spill_stores} bytes stored, {res.spill_loads} loaded to local memory)", 0.0, 0)
    if threads is None:
        block = getattr(compiled.contract, "block", None) if compiled.contract is not None else None
        threads = 1
        for d in block or (256,):
            threads *= d
    shared = compiled.static_shared_bytes + compiled.dynamic_shared_bytes
    cc = getattr(dev, "compute_capability", None) or (9, 0)
    blocks = resident_blocks(threads, res.registers or 0, shared, tuple(cc))
    if blocks == 0:
        return Estimate(f"cannot be resident: {threads} threads x {res.registers} registers, {shared} bytes of shared memory a block", 0.0, 0)
    return Estimate("", blocks * threads / 32, blocks)
