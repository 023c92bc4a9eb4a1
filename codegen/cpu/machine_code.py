"""The CPU backend's machine code as data: what the disk cache stores of a CPU kernel, and
the kernel entry rebuilt from it without the checker, the lowering or LLVM's optimiser.

An MCJIT engine hands out the object file it compiled (`JitEngine.object`, captured through
llvmlite's object-cache hook); with the entry's `recipe` (which module class runs it and its
few numbers: shared bytes, per-thread frame, fixed block) it is everything a launch needs.
`entry_from_object` loads the object into a fresh engine (`add_object_file`: relocation
only, no code generation), which takes milliseconds where a compile takes a second.

An object runs only on a host like the one that built it: `host_id` (the process triple, the
host CPU's name and features, the `ANODIZE_CPU_ISA` level and LLVM's version) is part of the
cache key (runtime/artifact_store.py `cpu_cache_inputs`), so an AVX-512 object is never
looked up on an AVX2 host.
"""

from __future__ import annotations

import struct
from typing import Any

import llvmlite.binding as llvm

from anodize.language.params import ParamSpec

from .engine import CPU_ISAS, LAUNCH, THREAD, CpuModule, RegionModule, _init, cpu_isa

__all__ = ["ProgramsOnHost", "cpu_isa", "host_id", "recipe_of", "entry_from_object", "check_object", "ELF_MAGIC"]

ELF_MAGIC = b"\x7fELF"
_KINDS = ("loop", "threaded", "regions")


class ProgramsOnHost:
    """The CPU entry of a tile kernel: each program (block) runs on one host thread, whatever
    block the launch names (the code is lowered for `threads=1` and its guard leaves any other
    thread idle, so this only saves the idle ones)."""

    def __init__(self, inner: Any):
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __call__(self, grid_xyz: Any, block_xyz: Any, flat_args: Any, fault_address: int, launch_rank: int, dynamic_shared: int = 0) -> None:
        self.inner(grid_xyz, (1, 1, 1), flat_args, fault_address, launch_rank, dynamic_shared)


def host_id(isa: str) -> dict[str, str]:
    """What an object's instructions depend on: the host (triple, CPU name and features), the
    vector level it was optimised for (`ANODIZE_CPU_ISA`) and the LLVM that built it."""
    _init()
    return {"triple": llvm.get_process_triple(), "cpu": llvm.get_host_cpu_name(),
            "features": llvm.get_host_cpu_features().flatten(), "isa": isa,
            "llvm": ".".join(str(x) for x in llvm.llvm_version_info)}


def recipe_of(entry: Any) -> tuple[dict[str, Any], bytes] | None:
    """(recipe, object file) of a CPU entry built by the CPU backend, or None (no object)."""
    tile = isinstance(entry, ProgramsOnHost)
    module = entry.inner if tile else entry
    obj = getattr(getattr(module, "_jit", None), "object", None)
    recipe = getattr(module, "recipe", None)
    if not isinstance(obj, bytes) or not isinstance(recipe, dict) or not obj.startswith(ELF_MAGIC):
        return None  # (only ELF objects are kept: `check_object` reads their layout)
    return {**recipe, "tile": tile}, obj


def check_object(obj: bytes) -> None:
    """A relocatable 64-bit little-endian ELF object whose section table and sections lie inside
    it, or ValueError.  LLVM's loader trusts an object's layout (a truncated one crashes the
    process), so the layout is read here first."""
    if len(obj) < 64 or not obj.startswith(ELF_MAGIC) or obj[4] != 2 or obj[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF object")
    e_type, e_machine = struct.unpack_from("<HH", obj, 16)
    (e_shoff,) = struct.unpack_from("<Q", obj, 40)
    e_shentsize, e_shnum, e_shstrndx = struct.unpack_from("<HHH", obj, 58)
    if e_type != 1 or e_shentsize != 64 or not 0 < e_shnum < 4096 or e_shstrndx >= e_shnum:
        raise ValueError("not a relocatable ELF object")
    if e_shoff < 64 or e_shoff + e_shnum * 64 > len(obj):
        raise ValueError("the ELF section table lies outside the object")
    for i in range(e_shnum):
        sh_type, _, _, sh_offset, sh_size = struct.unpack_from("<IQQQQ", obj, e_shoff + 64 * i + 4)
        if sh_type != 8 and sh_offset + sh_size > len(obj):  # SHT_NOBITS takes no bytes
            raise ValueError(f"ELF section {i} lies outside the object")


def _int(recipe: dict[str, Any], name: str) -> int:
    v = recipe[name]
    if type(v) is not int or not 0 <= v < 2**31:
        raise ValueError(f"recipe field {name} is not a small int")
    return v


def entry_from_object(recipe: dict[str, Any], params: tuple[ParamSpec, ...], obj: bytes) -> Any:
    """The CPU entry of a cached kernel: `obj` loaded into a fresh engine, run as `recipe` says.
    A recipe or object of the wrong shape is a ValueError (the caller's miss)."""
    kind, entry, isa, tile = recipe.get("module"), recipe.get("entry"), recipe.get("isa"), recipe.get("tile")
    if kind not in _KINDS or not isinstance(entry, str) or not isinstance(isa, str) or not isinstance(tile, bool):
        raise ValueError("malformed CPU recipe")
    check_object(obj)
    if isa != "host" and isa not in CPU_ISAS:
        raise ValueError("unknown ISA in the CPU recipe")
    symbol = THREAD if kind == "threaded" else LAUNCH
    if symbol.encode() not in obj:
        raise ValueError(f"the object has no `{symbol}`")
    module: Any
    try:
        if kind == "regions":
            block = recipe["block"]
            if block is not None and (not isinstance(block, list) or len(block) != 3 or not all(type(b) is int and b > 0 for b in block)):
                raise ValueError("malformed block in the CPU recipe")
            module = RegionModule("", params, entry, static_shared=_int(recipe, "static_shared"),
                                  frame_per_thread=_int(recipe, "frame_per_thread"), min_threads=_int(recipe, "min_threads"),
                                  block=tuple(block) if block is not None else None, isa=isa, obj=obj)
        else:
            whole_grid = recipe["whole_grid"]
            if not isinstance(whole_grid, bool):
                raise ValueError("malformed whole_grid in the CPU recipe")
            module = CpuModule("", params, entry, threaded=kind == "threaded", static_shared=_int(recipe, "static_shared"),
                               isa=isa, whole_grid=whole_grid, obj=obj)
    except RuntimeError as e:  # LLVM refused the object (truncated, another machine's)
        raise ValueError(f"the object does not load: {e}") from None
    return ProgramsOnHost(module) if tile else module
