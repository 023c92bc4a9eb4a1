"""anodize: safe GPU kernels in plain Python.

Write a SIMT kernel as a decorated Python function; anodize proves its
ownership rules, compiles it through llvmlite's NVPTX backend and launches it
through cuda-python (or on the CPU backend when there is no GPU).
"""

from __future__ import annotations

import importlib as _importlib
import os as _os
from typing import TYPE_CHECKING, Any

# Installed, `checker/`, `codegen/` and `runtime/` live inside this package (setuptools
# package-dir).  Imported straight from a source checkout (the repository root on
# sys.path, e.g. `python -m pytest` there), map them from the sibling folders instead.
_here = _os.path.dirname(__file__)
_root = _os.path.dirname(_here)
if not _os.path.isdir(_os.path.join(_here, "checker")) and _os.path.isfile(
    _os.path.join(_root, "checker", "engine.py")
):
    __path__.append(_root)

# eager: importing the submodule `anodize.kernel` binds the package attribute `kernel` to the
# module, so the function must be bound here, after it
from anodize.kernel import Func, Kernel, TileKernel, func, kernel, launch_contract, syncthreads, threadfence, tile_kernel, unsafe

# Everything else loads on first use (PEP 562), so that `import anodize` stays cheap for the
# checker, the mypy plugin (mypy imports the package on every run, warm cache included) and
# `anodize check`; the runtime (and NumPy with it) loads only when a name of it is used.
# Type checkers read the imports below.
if TYPE_CHECKING:
    from anodize import block, foreign, grid, local, math, shared, thread, tile, torch, warp
    from anodize.language.errors import AliasingError, ArgumentError, CheckError, ContractViolation, KernelFault, LaunchError, OutOfMemoryError
    from anodize.types import (
        AtomicSlice,
        BlockWitness1D,
        Tile2D,
        LocalIndex,
        LocalIndex2D,
        Constant,
        DisjointSlice,
        DisjointSlice2D,
        DisjointSlice3D,
        Index1D,
        Index2D,
        Index3D,
        LocalArray,
        Slice,
        Slice2D,
        Slice3D,
        bf16,
        bool_,
        f16,
        f8e4m3,
        f8e5m2,
        f32,
        f64,
        i8,
        i16,
        i32,
        i64,
        u8,
        u16,
        u32,
        u64,
    )
    from anodize.bits import bitcast
    from anodize.bundle import Bundle
    from anodize.record import Array, record
    from anodize.runtime.config import LaunchConfig
    from anodize.autotuning import Autotuned, Config, autotune
    from anodize.runtime.device import Buffer, Device, device, devices
    # lazy ops, stream pools, graph capture, ownership across time
    from anodize.runtime.graphs import Graph, capture
    from anodize.runtime.inflight import InFlightError
    from anodize.runtime.ops import Handle, Op
    from anodize.runtime.streams import StreamPool, pinned_empty
    # combinators and scheduling policies
    from anodize.runtime.combinators import gather, value, zip
    from anodize.runtime.selection import select
    from anodize.runtime.policies import DependencyChains, RoundRobin, SingleStream, set_policy

# `torch` (az.torch, anodize/torch.py) needs PyTorch: loaded on first use, never by `import *`
_SUBMODULES = ("block", "foreign", "grid", "local", "math", "shared", "thread", "tile", "torch", "warp")
_LAZY = {
    # the error classes: lazy too, so that the mypy plugin (imported by every mypy run, warm
    # cache included) does not build the diagnostics' dataclasses it never uses there
    "AliasingError": "anodize.language.errors",
    "ArgumentError": "anodize.language.errors",
    "CheckError": "anodize.language.errors",
    "ContractViolation": "anodize.language.errors",
    "KernelFault": "anodize.language.errors",
    "LaunchError": "anodize.language.errors",
    "OutOfMemoryError": "anodize.language.errors",
    "bitcast": "anodize.bits",
    "Bundle": "anodize.bundle",
    "Array": "anodize.record",
    "record": "anodize.record",
    "LaunchConfig": "anodize.runtime.config",
    "Autotuned": "anodize.autotuning",
    "Config": "anodize.autotuning",
    "autotune": "anodize.autotuning",
    "Buffer": "anodize.runtime.device",
    "Device": "anodize.runtime.device",
    "device": "anodize.runtime.device",
    "devices": "anodize.runtime.device",
    "Graph": "anodize.runtime.graphs",
    "capture": "anodize.runtime.graphs",
    "InFlightError": "anodize.runtime.inflight",
    "Handle": "anodize.runtime.ops",
    "Op": "anodize.runtime.ops",
    "gather": "anodize.runtime.combinators",
    "StreamPool": "anodize.runtime.streams",
    "value": "anodize.runtime.combinators",
    "select": "anodize.runtime.selection",
    "zip": "anodize.runtime.combinators",
    "RoundRobin": "anodize.runtime.policies",
    "SingleStream": "anodize.runtime.policies",
    "DependencyChains": "anodize.runtime.policies",
    "set_policy": "anodize.runtime.policies",
    "pinned_empty": "anodize.runtime.streams",
    "AtomicSlice": "anodize.types",
    "BlockWitness1D": "anodize.types",
    "Tile2D": "anodize.types",
    "LocalIndex": "anodize.types",
    "LocalIndex2D": "anodize.types",
    "Constant": "anodize.types",
    "DisjointSlice": "anodize.types",
    "DisjointSlice2D": "anodize.types",
    "DisjointSlice3D": "anodize.types",
    "Index1D": "anodize.types",
    "Index2D": "anodize.types",
    "Index3D": "anodize.types",
    "LocalArray": "anodize.types",
    "Slice": "anodize.types",
    "Slice2D": "anodize.types",
    "Slice3D": "anodize.types",
    "bf16": "anodize.types",
    "bool_": "anodize.types",
    "f16": "anodize.types",
    "f8e4m3": "anodize.types",
    "f8e5m2": "anodize.types",
    "f32": "anodize.types",
    "f64": "anodize.types",
    "i8": "anodize.types",
    "i16": "anodize.types",
    "i32": "anodize.types",
    "i64": "anodize.types",
    "u8": "anodize.types",
    "u16": "anodize.types",
    "u32": "anodize.types",
    "u64": "anodize.types",
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        value = _importlib.import_module(f"anodize.{name}")
    else:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'anodize' has no attribute {name!r}")
        value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))


from anodize.language import VERSION as __version__
from anodize import tracebacks as _tracebacks

_tracebacks.install()

__all__ = [
    "TileKernel",
    "Array",
    "Bundle",
    "record",
    "tile",
    "tile_kernel",
    "AliasingError",
    "ArgumentError",
    "AtomicSlice",
    "Buffer",
    "CheckError",
    "Constant",
    "ContractViolation",
    "Device",
    "DisjointSlice",
    "DisjointSlice2D",
    "DisjointSlice3D",
    "Func",
    "Graph",
    "Handle",
    "InFlightError",
    "Index1D",
    "BlockWitness1D",
    "Tile2D",
    "LocalIndex",
    "LocalIndex2D",
    "Index2D",
    "Index3D",
    "Kernel",
    "KernelFault",
    "LaunchConfig",
    "Autotuned",
    "Config",
    "autotune",
    "LaunchError",
    "LocalArray",
    "Op",
    "OutOfMemoryError",
    "Slice",
    "Slice2D",
    "Slice3D",
    "StreamPool",
    "DependencyChains",
    "RoundRobin",
    "SingleStream",
    "select",
    "set_policy",
    "value",
    "zip",
    "__version__",
    "bf16",
    "bitcast",
    "bool_",
    "capture",
    "device",
    "devices",
    "f16",
    "f8e4m3",
    "f8e5m2",
    "f32",
    "f64",
    "func",
    "gather",
    "i8",
    "i16",
    "i32",
    "i64",
    "kernel",
    "launch_contract",
    "local",
    "math",
    "pinned_empty",
    "shared",
    "syncthreads",
    "thread",
    "threadfence",
    "u8",
    "u16",
    "u32",
    "u64",
    "unsafe",
    "warp",
    "block",
    "foreign",
    "grid",
]
