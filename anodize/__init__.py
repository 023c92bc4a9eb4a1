"""anodize: safe GPU kernels in plain Python.

Write a SIMT kernel as a decorated Python function; anodize proves its
ownership rules, compiles it through llvmlite's NVPTX backend and launches it
through cuda-python (or on the CPU backend when there is no GPU).
"""

from __future__ import annotations

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

from anodize import block, local, math, shared, thread, warp
from anodize.language.errors import AliasingError, ArgumentError, CheckError, ContractViolation, KernelFault, LaunchError, OutOfMemoryError
from anodize.kernel import Func, Kernel, func, kernel, launch_contract, syncthreads, threadfence, unsafe

# The runtime (and NumPy with it) loads on first use of one of its names, so that the
# checker, the mypy plugin and `anodize check` start without it.  Type checkers read
# the imports below.
if TYPE_CHECKING:
    from anodize.runtime.config import LaunchConfig
    from anodize.runtime.device import Buffer, Device, device, devices
    # issue 7: lazy ops, stream pools, graph capture, ownership across time
    from anodize.runtime.graphs import Graph, capture
    from anodize.runtime.inflight import InFlightError
    from anodize.runtime.ops import Handle, Op, gather
    from anodize.runtime.streams import StreamPool, pinned_empty

_LAZY = {
    "LaunchConfig": "anodize.runtime.config",
    "Buffer": "anodize.runtime.device",
    "Device": "anodize.runtime.device",
    "device": "anodize.runtime.device",
    "devices": "anodize.runtime.device",
    "Graph": "anodize.runtime.graphs",
    "capture": "anodize.runtime.graphs",
    "InFlightError": "anodize.runtime.inflight",
    "Handle": "anodize.runtime.ops",
    "Op": "anodize.runtime.ops",
    "gather": "anodize.runtime.ops",
    "StreamPool": "anodize.runtime.streams",
    "pinned_empty": "anodize.runtime.streams",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'anodize' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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

from anodize.language import VERSION as __version__
from anodize import tracebacks as _tracebacks

_tracebacks.install()

__all__ = [
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
    "LaunchError",
    "LocalArray",
    "Op",
    "OutOfMemoryError",
    "Slice",
    "Slice2D",
    "Slice3D",
    "StreamPool",
    "__version__",
    "bf16",
    "bool_",
    "capture",
    "device",
    "devices",
    "f16",
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
]
