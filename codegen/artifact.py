"""What codegen hands the runtime: the compiled artifact and the kernel ABI.

Kernel ABI (the same for the GPU entry and the CPU backend):

* each parameter, in order, flattens to
  - 1-D slice (`Slice`, `DisjointSlice`, `AtomicSlice`): `ptr data, i64 len`
  - 2-D slice (`Slice2D`, `DisjointSlice2D`): `ptr data, i64 rows, i64 cols`
  - 3-D slice (`Slice3D`, `DisjointSlice3D`): `ptr data, i64 layers, i64 rows, i64 cols`
  - scalar: its value (`bool_` travels as an i8; `f16`/`bf16` as their 16-bit pattern, an i16; `f8e4m3`/`f8e5m2` an i8)
* then two hidden parameters: `ptr fault` (a `FAULT_RECORD_BYTES` device buffer,
  zeroed before first use) and `i32 launch_rank` (1, 2 or 3, the config's rank);
  a coarsened kernel (`CompiledKernel.coarsen > 1`) takes a third, `i64 extent`: the
  user's `grid_x * block_x` (codegen/llvm/coarsen.py); a GPU kernel calling `az.grid.sync()`
  (`CompiledKernel.grid_counter`) takes one more, last: `ptr grid_counter`, a 4-byte counter
  of its own for this launch, zeroed before it (runtime/grid_counter.py).

Fault record (little-endian, 32 bytes): `u32 count` (atomically incremented by
every failed check), `u32 site` (id of the first fault's site; written by the
thread whose increment saw 0), `i64 index`, `i64 length`, `i64 reserved`.
"""

from __future__ import annotations

from typing import Any

from collections.abc import Callable
from dataclasses import field
from anodize.language.records import dataclass

from anodize.language.contract import Contract
from anodize.language.errors import FAULT_RECORD_BYTES
from anodize.language.params import FaultSite, ParamSpec
from anodize.language.vocab import ScalarInfo, SliceKindInfo


@dataclass
class Resources:
    registers: int | None = None
    spill_stores: int = 0
    spill_loads: int = 0
    stack_frame: int = 0
    shared_bytes: int = 0
    ptxas_log: str = ""


@dataclass
class CompiledKernel:
    """One kernel compiled for one target.

    `llvm_ir` and `ptx` are always present for a GPU target; `cubin` is filled
    when ptxas or nvJitLink is available (or the runtime loads the PTX itself).
    For the CPU target `cpu_entry` runs the whole grid."""

    name: str  # the Python name
    entry: str  # the symbol in the module
    params: tuple[ParamSpec, ...]
    contract: Contract | None
    domain: int  # the index space the body uses (1 or 2), or the contract's
    arch: str  # "sm_90", or "cpu"
    llvm_ir: str
    ptx: str = ""
    cubin: bytes | None = None
    fault_sites: tuple[FaultSite, ...] = ()
    bounds_checks: int = 0  # checks left in the IR after what guards and `requires` proved
    uses_barrier: bool = False
    static_shared_bytes: int = 0
    resources: Resources = field(default_factory=Resources)
    compile_seconds: float = 0.0
    from_cache: bool = False  # loaded from the persistent compile cache (compile_seconds is then 0)
    # CPU backend: run(grid_xyz, block_xyz, flat_args, fault_address, launch_rank, dynamic_shared)
    cpu_entry: Callable[..., None] | None = None
    source_path: str = ""
    source_line: int = 0
    llvm_ir_optimized: str = ""  # the module after linking libdevice and O3 (GPU) / O3 (CPU)
    # indices per thread along x (codegen/llvm/coarsen.py): 1, or 4 for a coarsened kernel, which takes
    # one more hidden parameter, `i64 extent` (the user's grid_x * block_x), and is launched
    # with `ceil(grid_x / coarsen)` blocks along x (`launch_grid`)
    coarsen: int = 1
    # the GPU entry takes a last hidden parameter, `ptr grid_counter`: its grid barrier's counter
    # (`az.grid.sync()`), one per launch, zeroed on the launch's stream before it
    grid_counter: bool = False
    # shared memory the compiler owns beyond the static arrays (a tile GEMM on wgmma stages its
    # operands there): every launch asks for at least this much dynamic shared memory, and the
    # loader raises the kernel's limit to it (past the 48 KiB default)
    dynamic_shared_bytes: int = 0
    # "anodize": the ABI above; "foreign": a kernel anodize did not compile (anodize/foreign.py):
    # each slice passes as its bare pointer, scalars as their values, no hidden parameters
    abi: str = "anodize"
    # a tile kernel on a GPU: what each `tile.matmul` became (`anodize compile -v`), and the
    # compile's warnings (`az-fma-matmul` diagnostics: a matmul on FP32 FMAs beside tensor cores)
    matmuls: tuple[str, ...] = ()
    warnings: tuple[Any, ...] = ()
    # foreign device functions the kernel calls (`az.foreign.device_function`): (module-level name,
    # PTX symbol) each, and their code, read from the running program's objects (`foreign_links`):
    # PTX text, or LTO-IR bytes; the loader links it with the kernel's PTX (`cubin` is then None:
    # ptxas built a relocatable one), LTO-IR through nvJitLink (runtime/foreign_link.py)
    foreign: tuple[tuple[str, str], ...] = ()
    links: tuple[str | bytes, ...] = ()


def foreign_links(fn: Any, foreign: tuple[tuple[str, str], ...], arch: str) -> tuple[str | bytes, ...]:
    """The code of each foreign device function a kernel compiled for `arch` calls (PTX text, or
    LTO-IR bytes the loader links through nvJitLink), from the objects its module's names are
    bound to now (`fn.__globals__`): each object's `code_for(arch)`, which checks its code
    against its declaration (anodize/foreign.py).  A name bound to anything else is a TypeError,
    a name not bound (a kernel read from source without running its module: `anodize build`)
    has none."""
    out: list[str | bytes] = []
    names = getattr(fn, "__globals__", {})
    for binding, symbol in foreign:
        if binding not in names:
            continue
        obj = names[binding]
        code_for = getattr(obj, "code_for", None)
        if getattr(obj, "name", None) != symbol or not callable(code_for):
            raise TypeError(f"`{binding}` is not the foreign device function `{symbol}` the kernel was typed against "
                            f"(it is {type(obj).__name__}): bind it once, to `az.foreign.device_function(...)`")
        code = code_for(arch)
        if code not in out:
            out.append(code)
    return tuple(out)


def launch_grid(ck: CompiledKernel, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    """The grid a launch of `ck` with the user's `grid` runs: fewer blocks along x when coarsened."""
    f = ck.coarsen
    return grid if f == 1 else (-(-grid[0] // f), grid[1], grid[2])


def hidden_args(ck: CompiledKernel, fault_address: int, grid: tuple[int, int, int], block: tuple[int, int, int], rank: int) -> tuple:
    """The hidden arguments after the flattened ones, for a raw launch of `ck` with the user's
    grid and block: the fault record, the launch rank, and a coarsened kernel's extent (a
    kernel with a grid counter takes that too: runtime/grid_counter.py appends it per launch)."""
    import numpy as np

    out: tuple = (fault_address, np.int32(rank))
    return out + (np.int64(grid[0] * block[0]),) if ck.coarsen > 1 else out


def flat_abi(params: tuple[ParamSpec, ...]) -> tuple[str, ...]:
    """The flattened kernel arguments (hidden ones excluded), one kind per ABI slot:
    "ptr" (a data pointer), "i64" (a length, rows or cols), or a scalar name ("f32", "bool_"...).

    `CompiledKernel.cpu_entry`'s `flat_args` and the GPU launch take one value per slot:
    an int address for "ptr", an int for "i64", a Python or NumPy number for a scalar."""
    out: list[str] = []
    for p in params:
        if p.slice_kind is not None:
            out.append("ptr")
            out.extend(["i64"] * p.slice_kind.rank)
        else:
            out.append(p.scalar.name)
    return tuple(out)
