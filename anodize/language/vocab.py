"""The one shared kernel model: the vocabulary every front end agrees on.

The checker, the mypy plugin, codegen and the runtime all read these
tables instead of spelling names, dtypes or widths themselves.
"""

from __future__ import annotations

import json

from anodize.language.math_table import MATH
from anodize.language.records import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # NumPy loads on the first `.dtype` (the checker and mypy plugin never ask)
    import numpy as np

PUBLIC_MODULES = ("anodize", "anodize.types", "anodize.kernel", "anodize.thread")


@dataclass(frozen=True)
class ScalarInfo:
    name: str  # the public name, e.g. "f32"
    kind: str  # "f" float, "i" signed int, "u" unsigned int, "b" bool, "r" record (record_types.py)
    bits: int  # width in registers (bool is 1 bit in registers, 8 in memory)
    mem_bits: int  # width in memory
    numpy_name: str  # NumPy's name for the dtype of a buffer element ("float32", ...)

    @cached_property
    def dtype(self) -> np.dtype:
        """NumPy dtype of a buffer element (computed once, then a plain attribute)."""
        import numpy

        if self.kind == "r":  # a record (language/record_types.py, which imports this module): its structured dtype
            from anodize.language.record_types import dtype_of_spec

            return dtype_of_spec(json.loads(self.numpy_name[len("record:"):]))
        if self.numpy_name in ML_DTYPES:  # NumPy has none of these: ml_dtypes' (optional dependency)
            try:
                import ml_dtypes
            except ImportError:
                raise ImportError(
                    f"{self.name} buffers need the `ml_dtypes` package (NumPy has no {self.numpy_name} dtype): "
                    "`pip install ml_dtypes` or `pip install anodize[bf16]`"
                ) from None
            return numpy.dtype(getattr(ml_dtypes, self.numpy_name))
        return numpy.dtype(self.numpy_name)

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_half(self) -> bool:
        """A narrow float (f16, bf16, f8e4m3, f8e5m2): its bit pattern in an integer register
        and in memory, computed in f32 and rounded once (language/halfbits.py).  f8 operands
        of arithmetic are f16 first (language/types.py `promote`)."""
        return self.kind == "f" and self.bits <= 16

    @property
    def is_f8(self) -> bool:
        """f8e4m3 or f8e5m2 (OCP FP8: ml_dtypes' float8_e4m3fn and float8_e5m2)."""
        return self.kind == "f" and self.bits == 8

    @property
    def is_int(self) -> bool:
        return self.kind in ("i", "u")

    @property
    def signed(self) -> bool:
        return self.kind == "i"


SCALARS: dict[str, ScalarInfo] = {
    "f32": ScalarInfo("f32", "f", 32, 32, "float32"),
    "f64": ScalarInfo("f64", "f", 64, 64, "float64"),
    "i32": ScalarInfo("i32", "i", 32, 32, "int32"),
    "i64": ScalarInfo("i64", "i", 64, 64, "int64"),
    "u32": ScalarInfo("u32", "u", 32, 32, "uint32"),
    "u64": ScalarInfo("u64", "u", 64, 64, "uint64"),
    "bool_": ScalarInfo("bool_", "b", 1, 8, "bool"),
    "f16": ScalarInfo("f16", "f", 16, 16, "float16"),
    "bf16": ScalarInfo("bf16", "f", 16, 16, "bfloat16"),  # host dtype: ml_dtypes.bfloat16
    "i8": ScalarInfo("i8", "i", 8, 8, "int8"),
    "i16": ScalarInfo("i16", "i", 16, 16, "int16"),
    "u8": ScalarInfo("u8", "u", 8, 8, "uint8"),
    "u16": ScalarInfo("u16", "u", 16, 16, "uint16"),
    "f8e4m3": ScalarInfo("f8e4m3", "f", 8, 8, "float8_e4m3fn"),  # host dtype: ml_dtypes.float8_e4m3fn
    "f8e5m2": ScalarInfo("f8e5m2", "f", 8, 8, "float8_e5m2"),  # host dtype: ml_dtypes.float8_e5m2
}
# the element types whose NumPy dtype is ml_dtypes' (recognised by name: importing it costs seconds)
ML_DTYPES = {"bfloat16": "bf16", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2"}

if TYPE_CHECKING:
    SCALAR_BY_DTYPE: dict[np.dtype, ScalarInfo]


def __getattr__(name: str) -> Any:
    """`SCALAR_BY_DTYPE` (dtype -> ScalarInfo) is built on first use, with NumPy's dtypes only:
    bf16's and the f8 types' (ml_dtypes', whose import costs seconds) are recognised by name when a
    value has them (`scalar_for_dtype`), so that the first buffer of any other type never imports
    ml_dtypes."""
    if name == "SCALAR_BY_DTYPE":
        table = {s.dtype: s for s in SCALARS.values() if s.numpy_name not in ML_DTYPES}
        globals()[name] = table
        return table
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class SliceKindInfo:
    name: str  # "Slice", "DisjointSlice", ...
    rank: int  # 1, 2 or 3
    output: bool  # written by the kernel (so unaliased with every other argument)
    disjoint: bool  # writes only through this thread's witness
    atomic: bool


SLICE_KINDS: dict[str, SliceKindInfo] = {
    "Slice": SliceKindInfo("Slice", 1, output=False, disjoint=False, atomic=False),
    "DisjointSlice": SliceKindInfo("DisjointSlice", 1, output=True, disjoint=True, atomic=False),
    "Slice2D": SliceKindInfo("Slice2D", 2, output=False, disjoint=False, atomic=False),
    "DisjointSlice2D": SliceKindInfo("DisjointSlice2D", 2, output=True, disjoint=True, atomic=False),
    "Slice3D": SliceKindInfo("Slice3D", 3, output=False, disjoint=False, atomic=False),
    "DisjointSlice3D": SliceKindInfo("DisjointSlice3D", 3, output=True, disjoint=True, atomic=False),
    "AtomicSlice": SliceKindInfo("AtomicSlice", 1, output=True, disjoint=False, atomic=True),
}

WITNESS_TYPES = {"Index1D": 1, "Index2D": 2, "Index3D": 3}

# Functions in `anodize.thread` that make a witness, with the index space (domain) it belongs to.
WITNESS_MAKERS = {"index_1d": 1, "index_2d": 2, "index_3d": 3, "grid_stride": 1}

# The parts of a witness of each rank (`i.get()`, `ij.row`, `ijk.layer`), outermost axis first.
WITNESS_PARTS = {1: ("get",), 2: ("row", "col"), 3: ("layer", "row", "col")}

# Block-local witnesses (safe shared memory): `thread.index_in_block()` -> LocalIndex (the
# linear thread index over x, y and z), `thread.index_in_block_2d()` -> LocalIndex2D (`.row`
# from y, `.col` from x; needs block z = 1).  They index shared arrays only.
LOCAL_WITNESS_MAKERS = {"index_in_block": 1, "index_in_block_2d": 2}
LOCAL_WITNESS_TYPES = {"LocalIndex": 1, "LocalIndex2D": 2}
# `az.shared.<maker>`: a static array, dynamic shared memory (sized by the launch's
# `shared_mem`), block-shared atomics
SHARED_MAKERS = ("array", "dynamic_array", "atomic_array")
# the scopes a block-shared atomic (`az.shared.atomic_array`) takes; "block" is its default
SHARED_ATOMIC_SCOPES = ("block", "device", "system")

# Raw ids: unsafe tier only.
RAW_IDS = {
    "tid_x": ("tid", "x"),
    "tid_y": ("tid", "y"),
    "tid_z": ("tid", "z"),
    "block_idx_x": ("ctaid", "x"),
    "block_idx_y": ("ctaid", "y"),
    "block_idx_z": ("ctaid", "z"),
    "block_dim_x": ("ntid", "x"),
    "block_dim_y": ("ntid", "y"),
    "block_dim_z": ("ntid", "z"),
    "grid_dim_x": ("nctaid", "x"),
    "grid_dim_y": ("nctaid", "y"),
    "grid_dim_z": ("nctaid", "z"),
    "lane_id": ("laneid", ""),
}

WARP_OPS = {"shfl_down", "shfl_up", "shfl_xor", "shfl_idx", "ballot", "any", "all"}

# (which operations only `with az.unsafe():` may contain, and which are barriers: the
# declarations' `unsafe` and `barrier`, language/intrinsics.py)

# Safe collectives (called by every thread of the warp / block; each returns its result to every
# participating thread): canonical name -> its positional arity.  `block.scan` also takes the
# keyword `inclusive=` (a literal bool).  A block collective ends with a barrier.
COLLECTIVES = {"warp.reduce": 2, "block.reduce": 2, "block.scan": 2, "block.broadcast": 2}
BLOCK_COLLECTIVES = frozenset({"block.reduce", "block.scan", "block.broadcast"})
# The operator strings a reduction or scan takes; "and" / "or" are bitwise on integers,
# logical on bools.
COLLECTIVE_OPS = ("sum", "max", "min", "and", "or")
# The compiler's own shared scratch buffer of the collectives (apart from the user's shared
# memory): one 8-byte slot per warp of the block.
COLLECTIVE_SCRATCH = "__az_collective_scratch"
COLLECTIVE_SCRATCH_SLOTS = 32

# Per-block outputs: `thread.block_witness_1d()` (this block's witness over a DisjointSlice with
# one element per block) and `thread.is_block_leader()` (true on exactly thread 0 of the block).
BLOCK_WITNESS_MAKER = "block_witness_1d"
BLOCK_LEADER = "is_block_leader"
# Per-thread tiles of a 2-D output: `t = thread.tile_2d(TR, TC[, GR, GC])` (typer_thread_tiles.py);
# its methods `t.at(r, s)`, `t.load(src, dst, fill)`, `t.store(out, src)` (intrinsics.py `METHODS`).
TILE_MAKER = "tile_2d"
TILE_MAX_EXTENT = 1 << 20  # TR, TC at most this: `t.at(r, s)` then never overflows an i64

# Math functions callable as `math.f` or `az.math.f` (language/math_table.py, one row each):
# name -> arity; those whose result is `bool_`; those whose last argument is an integer exponent.
MATH_FUNCS = {f.name: f.arity for f in MATH.values()}
MATH_PREDICATES = frozenset(f.name for f in MATH.values() if f.predicate)
MATH_INT_EXPONENT = frozenset(f.name for f in MATH.values() if f.int_exponent)

# Memory-ordering statements, safe in every tier: qualified name -> kind.
# `az.threadfence()` orders this thread's memory accesses device-wide (`membar.gl`);
# `az.warp.sync()` waits for every lane of the warp (`bar.warp.sync 0xffffffff`).
FENCE_QUALNAMES = {"anodize.threadfence": "threadfence", "anodize.warp.sync": "warp_sync"}

BUILTIN_FUNCS = {"abs", "min", "max", "len", "range"}
# Builtins a kernel may call as a statement: `print(...)` (device printf) and `breakpoint()`.
DEBUG_BUILTINS = {"print", "breakpoint"}

# The methods of an `AtomicSlice` and a block-shared atomic array are declared in intrinsics.py
# (`METHODS`); which take integers only, the scopes and orderings their keywords take:
ATOMIC_INT_ONLY = {"and_", "or_", "xor", "compare_exchange"}
ATOMIC_SCOPES = ("device", "system")  # "block" is for block-shared atomics only
ATOMIC_ORDERS = ("relaxed", "acquire", "release", "acq_rel", "seq_cst")
# the orderings an operation admits (a read cannot release, a write cannot acquire)
ATOMIC_ORDERS_FOR = {"load": ("relaxed", "acquire", "seq_cst"), "store": ("relaxed", "release", "seq_cst")}

MAX_THREADS_PER_BLOCK = 1024


def scalar_for_dtype(dtype: object) -> ScalarInfo | None:
    """The scalar type of a NumPy-compatible dtype, or None if anodize has none."""
    import numpy

    try:
        d = numpy.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:  # "bfloat16" before ml_dtypes registered it: the type all the same
        return SCALARS[ML_DTYPES[dtype]] if isinstance(dtype, str) and dtype in ML_DTYPES else None
    table: dict[Any, ScalarInfo] = globals().get("SCALAR_BY_DTYPE") or __getattr__("SCALAR_BY_DTYPE")
    hit = table.get(d)
    if hit is None and d.name in ML_DTYPES and d.kind in "Vf":
        s = SCALARS[ML_DTYPES[d.name]]  # ml_dtypes' type, imported by whoever made the value
        return s if d.itemsize * 8 == s.mem_bits else None
    return hit

# the most bytes one `az.local.array` may hold per thread (registers, or the thread's local
# memory; the CPU backend keeps it on the host thread's stack)
LOCAL_ARRAY_MAX_BYTES = 16384
LOCAL_ARRAY_MAX_RANK = 3
