"""The fault arena: where kernels record failed bounds checks instead of trapping.

Each device owns one arena (grown in chunks of `SLOTS_PER_CHUNK` records).  Every
kernel loaded on the device gets its own zeroed `FAULT_RECORD_BYTES` slot, whose
address travels as the hidden `fault` argument (codegen/artifact.py has the
record layout).  A trap would poison the CUDA context; a record does not, so
after a `KernelFault` the device stays usable.

At each synchronisation point (`Buffer.to_host`, `Device.synchronize`,
`Device.check`), if anything was launched since the last check, the arena is
read once; the first faulting slot becomes a `KernelFault` and every slot is
reset to zero.  Under `ANODIZE_FAULT_READ_SKIP=1`, a chunk none of whose kernels can
write its record (`can_fault`: a GPU kernel whose PTX has no fault path) is not read.
"""

from __future__ import annotations

import os
import weakref
from typing import TYPE_CHECKING

import numpy as np

from anodize.language.errors import FAULT_RECORD_BYTES, KernelFault

if TYPE_CHECKING:
    from anodize.codegen.artifact import CompiledKernel
    from anodize.runtime.device import Device

SLOTS_PER_CHUNK = 1024

# One record: u32 count, u32 site, i64 index, i64 length, i64 reserved (little-endian).
RECORD = np.dtype([("count", "<u4"), ("site", "<u4"), ("index", "<i8"), ("length", "<i8"), ("reserved", "<i8")])
assert RECORD.itemsize == FAULT_RECORD_BYTES


def ptx_can_fault(compiled: CompiledKernel) -> bool:
    """Whether `compiled`'s code can record a fault: only `__az_fault` writes the record
    (codegen/llvm/lower.py), so a GPU kernel whose PTX has none cannot (its checks all proven,
    or none needed).  Without PTX text (the CPU backend, an artifact that kept none) it is
    assumed to."""
    return not compiled.ptx or "__az_fault" in compiled.ptx


def can_fault(compiled: CompiledKernel) -> bool:
    """Whether completions and synchronisations read `compiled`'s fault record back: always,
    unless `ANODIZE_FAULT_READ_SKIP=1`, which skips the kernels that cannot write it
    (`ptx_can_fault`; off by default until a GPU run has measured it)."""
    if os.environ.get("ANODIZE_FAULT_READ_SKIP", "").strip().lower() not in ("1", "on", "yes", "true"):
        return True
    return ptx_can_fault(compiled)


class _Chunk:
    __slots__ = ("ptr", "owner", "kernels", "faults", "faulting")

    def __init__(self, ptr: int, owner: object):
        self.ptr = ptr
        self.owner = owner
        # each slot's kernel, weakly: a kernel nothing refers to any more is freed (its JIT
        # engine or CUDA module with it), and its slot is reused after the next check
        self.kernels: list[weakref.ref[CompiledKernel] | None] = []
        self.faults: list[bool] = []  # per slot: its kernel can write its record (`can_fault`)
        self.faulting = 0  # how many can: a chunk of none is not read back at a check


class FaultArena:
    """The per-device fault records of every loaded kernel.

    The arena refers to kernels weakly: a compiled kernel that nothing else refers to is
    freed, and its slot goes back to the free list at the next `check` (after its record was
    read, so a fault of its last launch is still reported and never inherited)."""

    def __init__(self, device: Device):
        self._device = device
        self._chunks: list[_Chunk] = []
        self._free: list[tuple[_Chunk, int]] = []
        self.dirty = False  # set by every launch, cleared by `check`

    def register(self, compiled: CompiledKernel) -> int:
        """Give `compiled` a zeroed slot; return the slot's address (the hidden `fault` argument)."""
        if not self._free:
            self._collect()
        faults = can_fault(compiled)
        if self._free:
            chunk, i = self._free.pop()
            chunk.kernels[i] = weakref.ref(compiled)
            chunk.faults[i] = faults
            chunk.faulting += faults
            return chunk.ptr + i * FAULT_RECORD_BYTES
        if not self._chunks or len(self._chunks[-1].kernels) == SLOTS_PER_CHUNK:
            nbytes = SLOTS_PER_CHUNK * FAULT_RECORD_BYTES
            ptr, owner = self._device._alloc(nbytes)
            self._device._fill_zero(ptr, nbytes)
            self._chunks.append(_Chunk(ptr, owner))
        chunk = self._chunks[-1]
        chunk.kernels.append(weakref.ref(compiled))
        chunk.faults.append(faults)
        chunk.faulting += faults
        return chunk.ptr + (len(chunk.kernels) - 1) * FAULT_RECORD_BYTES

    @property
    def slots(self) -> int:
        """Slots held by live kernels."""
        return sum(1 for c in self._chunks for r in c.kernels if r is not None and r() is not None)

    def _collect(self) -> None:
        """Free the slots of dead kernels, when no launch is unchecked (a dead kernel's last
        launch may still write its record: `check` reads it first)."""
        if self.dirty:
            return
        for chunk in self._chunks:
            for i, r in enumerate(chunk.kernels):
                if r is not None and r() is None:
                    chunk.kernels[i] = None
                    chunk.faulting -= chunk.faults[i]
                    chunk.faults[i] = False
                    self._free.append((chunk, i))

    def check(self) -> None:
        """Raise the first recorded fault (and reset every slot); a no-op when nothing ran."""
        if not self.dirty:
            return
        self.dirty = False
        first: KernelFault | None = None
        for chunk in self._chunks:
            used = len(chunk.kernels)
            if not used or not chunk.faulting:
                continue  # (no slot's kernel can write its record: nothing to read back)
            records = np.empty(used, dtype=RECORD)
            self._device._download(records, chunk.ptr, used * FAULT_RECORD_BYTES)
            hit = np.flatnonzero(records["count"])
            if hit.size == 0:
                continue
            self._device._fill_zero(chunk.ptr, used * FAULT_RECORD_BYTES)
            for k in hit:
                ref = chunk.kernels[int(k)]
                compiled = ref() if ref is not None else None
                if first is None and compiled is not None:
                    first = _fault(compiled, records[int(k)])
        if first is not None:
            raise first


def _fault(compiled: CompiledKernel, rec: np.void) -> KernelFault:
    site_id = int(rec["site"])
    sites = compiled.fault_sites
    if 0 <= site_id < len(sites):
        site = sites[site_id]
        path, line, kind, message = site.path, site.line, site.kind, site.message
    else:
        path, line, kind, message = compiled.source_path or "<unknown>", compiled.source_line, "unknown fault site", ""
    return KernelFault(
        compiled.name, path, line, kind, int(rec["index"]), int(rec["length"]), int(rec["count"]), message
    )
