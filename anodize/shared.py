"""Block shared memory: safe under the phase discipline that `anodize check` proves
(az-shared-race): between two barriers a thread writes only its own slot
(`thread.index_in_block()`) or slot set (`s[w + j * BLOCK]` for `j in range(K)`, proven
disjoint for the contract's block), and reads an array written in that interval only there."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = ["array", "dynamic_array", "atomic_array"]


def _device_only(name: str) -> NoReturn:
    raise TypeError(f"`shared.{name}` can only be called inside an anodize kernel")


def array(shape: int | tuple[int, ...], dtype: type) -> Any:
    """A block-shared array of `shape` elements of scalar type `dtype`.

    `shape` is a constant (an int or a (rows, cols) tuple), not 0 (a shape of 0 means dynamic
    shared memory only inside `with az.unsafe():`, kept for older kernels)."""
    _device_only("array")


def dynamic_array(dtype: type) -> Any:
    """The block's dynamic shared memory as an array of `dtype`, sized by the launch config's
    `shared_mem` (every dynamic array of a kernel is one region)."""
    _device_only("dynamic_array")


def atomic_array(shape: int | tuple[int, ...], dtype: type) -> Any:
    """A block-shared array updated only through the atomic methods of `AtomicSlice`
    (`h.add(j, v)`, `h.load(j)`, `h.store(j, v)`, ...; `scope="block"` by default)."""
    _device_only("atomic_array")
