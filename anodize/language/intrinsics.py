"""The kernel language's intrinsics, each declared once: its canonical name, its tag (what the
typer and the symbol table call it: `("witness", "index_1d")`, `("scalar", "f32")`, ...) and
its effects, which the checker's abstract interpreter reads instead of naming calls itself:

- `thread_dependent`: its result may differ between threads (the kernel reads a thread's identity);
- `varies`: between which threads its result may differ: "uniform" (equal on every thread of a
  block), "warp" (equal on the lanes of one warp), "lane" (may differ between lanes);
- `barrier`: every thread of the block must reach it (a barrier, or a collective ending with one);
- `warp_wide`: every lane of the warp must reach it (shuffles, votes, `warp.reduce`, `warp.sync`);
- `unsafe`: only inside `with az.unsafe():`;
- `witness`: it makes this thread's witness of the index space of that rank (0: none);
- `loop_only`: only as the iterable of a `for` loop (`range`, `thread.grid_stride`);
- `writes`: the position of the argument whose elements it writes (`tile.store`'s destination);
- `arity`: its positional arguments (min, max), where the vocabulary fixes them;
- `keywords`: the keyword arguments it takes (`block.scan`'s `inclusive=`, `tile.load`'s `other=`);
- `callable`: a kernel may call it (False for the types and decorators that are no call);
- `receiver`: a value method's: the kind of value it is called on (below; "" for a function);
- `mutates`: a value method writes the elements of the value it is called on.

    decl = INTRINSICS.get(canonical(qualname))   # symbols.intrinsic(name) is decl.tag

The methods of kernel values (`a.add(j, v)`, `w.get()`, `t.at(r, s)`) are declared the same
way, by the kind of value they are called on and their name (`METHODS`, `method`):

    decl = method("atomic_slice", "add")   # None: no such method of that kind of value

Receivers: "slice" (every slice parameter), "atomic_slice" (an `AtomicSlice`), "shared_atomic"
(an `az.shared.atomic_array`), "witness" (a grid or block witness), "local_witness"
(`thread.index_in_block()`'s), "thread_tile" (`thread.tile_2d(...)`'s), and the Tile model's
"tile_id" (`tile.program_id_1d()`'s) and "tile" (a tile value).

Adding an intrinsic: its vocabulary entry (vocab.py / tile_ops.py / math_table.py), its
row in `_declare` when the tables do not give it, and its typing (typer_*.py); a value method:
its row in `_declare_methods` and its typing."""

from __future__ import annotations

from typing import Literal

from .math_table import MATH
from .records import dataclass
from .tile_ops import TILE_OPS
from .vocab import (
    BLOCK_COLLECTIVES, BLOCK_LEADER, BLOCK_WITNESS_MAKER, BUILTIN_FUNCS, COLLECTIVES, DEBUG_BUILTINS, FENCE_QUALNAMES,
    LOCAL_WITNESS_MAKERS, RAW_IDS, SCALARS, SLICE_KINDS, TILE_MAKER, WARP_OPS, WITNESS_MAKERS, WITNESS_TYPES,
)  # fmt: skip

__all__ = ["Intrinsic", "INTRINSICS", "METHODS", "canonical", "method"]

Varies = Literal["uniform", "warp", "lane"]


@dataclass(frozen=True)
class Intrinsic:
    name: str  # canonical: `thread.index_1d`, `az.f32`, `math.sqrt`, `builtins.len`
    tag: tuple[str, ...]
    thread_dependent: bool = False
    varies: Varies = "uniform"
    barrier: bool = False
    warp_wide: bool = False
    unsafe: bool = False
    witness: int = 0
    loop_only: bool = False
    writes: int | None = None
    arity: tuple[int, int] | None = None
    keywords: frozenset[str] = frozenset()
    callable: bool = True
    receiver: str = ""
    mutates: bool = False

    @property
    def kind(self) -> str:
        """The tag's kind (`"witness"`, `"raw"`, `"math"`, ...): what a front end dispatches on."""
        return self.tag[0]

    @property
    def exact_arity(self) -> int:
        """The one count of positional arguments it declares (it declares one, not a range)."""
        assert self.arity is not None and self.arity[0] == self.arity[1], self
        return self.arity[0]

    def takes(self, n: int) -> bool:
        """Do `n` positional arguments fit its declared arity (any, when it declares none)?"""
        return self.arity is None or self.arity[0] <= n <= self.arity[1]


# ---- canonical names ---------------------------------------------------------------------

_CANONICAL: dict[str, str] = {}
_PREFIXES = (
    ("anodize.thread.", "thread."),
    ("anodize.warp.", "warp."),
    ("anodize.block.", "block."),
    ("anodize.grid.", "grid."),
    ("anodize.shared.", "shared."),
    ("anodize.local.", "local."),
    ("anodize.math.", "math."),
    ("anodize.tile.", "tile."),
    ("anodize.types.", "az."),
    ("anodize.kernel.", "az."),
    ("anodize.runtime.config.", "az."),
    ("anodize.", "az."),
)


def canonical(qualname: str) -> str:
    """`anodize.thread.index_1d` -> `thread.index_1d`, `anodize.types.Slice` -> `az.Slice`."""
    hit = _CANONICAL.get(qualname)
    if hit is None:
        hit = qualname
        if qualname.startswith("anodize"):
            for prefix, short in _PREFIXES:
                if qualname.startswith(prefix):
                    hit = short + qualname[len(prefix) :]
                    break
        if len(_CANONICAL) < 65536:
            _CANONICAL[qualname] = hit
    return hit


# ---- the declarations --------------------------------------------------------------------

# raw ids that differ between the threads of one block (the rest are block-uniform)
_THREAD_VARYING_IDS = ("tid_x", "tid_y", "tid_z", "lane_id")
# warp operations whose result is the same on every lane (a vote); a shuffle gives each its own
_WARP_VOTES = ("ballot", "any", "all")


def _declare() -> dict[str, Intrinsic]:
    out: dict[str, Intrinsic] = {}

    def add(name: str, *tag: str, **effects: object) -> None:
        out[name] = Intrinsic(name, tuple(tag), **effects)  # type: ignore[arg-type]

    for n, rank in WITNESS_MAKERS.items():
        grid = n == "grid_stride"
        add(f"thread.{n}", "witness", n, thread_dependent=True, varies="lane", witness=rank, loop_only=grid, arity=None if grid else (0, 0))
    for n in RAW_IDS:
        add(f"thread.{n}", "raw", n, thread_dependent=True, varies="lane" if n in _THREAD_VARYING_IDS else "uniform", unsafe=True, arity=(0, 0))
    for n in WARP_OPS:
        vote = n in _WARP_VOTES  # `warp.ballot(p)`; a shuffle `warp.shfl_down(v, k)`
        add(f"warp.{n}", "warp", n, thread_dependent=True, varies="warp" if vote else "lane", warp_wide=True, unsafe=True, arity=(1, 1) if vote else (2, 2))
    for n, f in MATH.items():
        add(f"math.{n}", "math", n, arity=(f.arity, f.arity))
    for qual, kind in FENCE_QUALNAMES.items():  # az.threadfence(), az.warp.sync(): safe
        add(canonical(qual), "fence", kind, warp_wide=kind == "warp_sync", arity=(0, 0))
    add("az.syncthreads", "barrier", barrier=True, arity=(0, 0))
    # every thread of the grid (a cooperative kernel's): a barrier for the block's rules too
    add("grid.sync", "barrier", "grid", barrier=True, arity=(0, 0))
    for n, arity in COLLECTIVES.items():  # az.warp.reduce, az.block.reduce/scan/broadcast: safe
        block = n in BLOCK_COLLECTIVES
        scan = n == "block.scan"
        add(n, "collective", n, thread_dependent=scan or not block, varies="lane" if scan else "uniform" if block else "warp",
            barrier=block, warp_wide=not block, arity=(arity, arity), keywords=frozenset({"inclusive"} if scan else ()))  # fmt: skip
    add(f"thread.{BLOCK_WITNESS_MAKER}", "block_witness", thread_dependent=True, varies="lane", witness=1, arity=(0, 0))
    add(f"thread.{BLOCK_LEADER}", "block_leader", thread_dependent=True, varies="lane", arity=(0, 0))
    add(f"thread.{TILE_MAKER}", "thread_tile", thread_dependent=True, varies="lane", witness=2, arity=(2, 4))
    add("az.BlockWitness1D", "block_witness_type")
    add("az.unsafe", "unsafe", arity=(0, 0))
    add("shared.array", "shared_array")
    add("local.array", "local_array")  # az.local.array(shape, T): per-thread (typer_locals.py)
    add("az.LocalArray", "local_array_type", callable=False)
    add("local.LocalArray", "local_array_type", callable=False)
    add("builtins.tuple", "tuple_type", callable=False)  # a helper's `-> tuple[f32, i32]`
    add("typing.Tuple", "tuple_type", callable=False)
    add("shared.dynamic_array", "shared_array", "dynamic")
    add("shared.atomic_array", "shared_array", "atomic")
    for n, rank in LOCAL_WITNESS_MAKERS.items():  # block-local witnesses (safe shared memory)
        add(f"thread.{n}", "local_witness", str(rank), thread_dependent=True, varies="lane", arity=(0, 0))
    for n in SCALARS:
        add(f"az.{n}", "scalar", n)
    for n in SLICE_KINDS:
        add(f"az.{n}", "slice", n, callable=False)
    for n, rank in WITNESS_TYPES.items():
        add(f"az.{n}", "witness_type", str(rank))
    add("builtins.int", "scalar", "i64")
    add("builtins.float", "scalar", "f64")
    add("builtins.bool", "scalar", "bool_")
    for n in ("abs", "min", "max", "len", "range"):
        add(f"builtins.{n}", "builtin", n, loop_only=n == "range", arity=(1, 1) if n in ("abs", "len") else None)
    add("az.Constant", "constant_type", callable=False)
    add("az.bitcast", "bitcast", arity=(2, 2))  # `az.bitcast(x, T)`: the bits of x as T (one size)
    add("typing.cast", "typecast", arity=(2, 2))  # `cast(T, x)`: a conversion to T (the spelling type checkers accept)
    for n in DEBUG_BUILTINS:
        add(f"builtins.{n}", n)
    add("az.kernel", "decorator", "kernel", callable=False)
    add("az.func", "decorator", "func", callable=False)
    add("az.launch_contract", "decorator", "launch_contract", callable=False)
    add("az.record", "decorator", "record", callable=False)  # `@az.record` classes (record_types.py)
    add("az.Array", "array_type", callable=False)  # a record's `az.Array[T, n]` field
    add("az.Bundle", "bundle_base", callable=False)  # `class State(az.Bundle)`: slices of several roles
    add("az.tile_kernel", "decorator", "tile_kernel", callable=False)  # the Tile model: a kernel (tile_vocab.py)
    add("az.Kernel", "decorator", "kernel", callable=False)  # `Kernel(fn)` is `az.kernel(fn)`
    for n, op in TILE_OPS.items():  # the Tile model's ops, declared with their typing (tile_ops.py)
        add(f"tile.{n}", "tile", n, arity=op.arity, keywords=op.keywords, writes=op.writes)
    assert set(BUILTIN_FUNCS) <= {n.split(".")[-1] for n in out}
    return out


INTRINSICS: dict[str, Intrinsic] = _declare()

# the two loop iterables (`loop_only`), by tag: a grid-stride loop's witnesses, a range's ints
GRID_STRIDE = INTRINSICS["thread.grid_stride"].tag
RANGE = INTRINSICS["builtins.range"].tag


# ---- the methods of values -----------------------------------------------------------------

# the methods of an `AtomicSlice` and of a block-shared atomic array: each returns the element's
# old value (`load` its value, `store` None) and takes the keywords `scope=` and `order=`; the
# positional arguments are the index, then `(expected, new)` for a compare-and-swap, the value
# for the others, none for a load
_ATOMICS = {"add": 2, "sub": 2, "min": 2, "max": 2, "exchange": 2, "and_": 2, "or_": 2, "xor": 2, "compare_exchange": 3, "load": 1, "store": 2}


def _declare_methods() -> dict[tuple[str, str], Intrinsic]:
    out: dict[tuple[str, str], Intrinsic] = {}

    def add(receiver: str, name: str, *tag: str, **effects: object) -> None:
        out[receiver, name] = Intrinsic(f"{receiver}.{name}", tuple(tag), receiver=receiver, **effects)  # type: ignore[arg-type]

    for n, args in _ATOMICS.items():
        for receiver, kind in (("atomic_slice", "atomic_op"), ("shared_atomic", "shared_atomic")):
            add(receiver, n, kind, n, thread_dependent=True, varies="lane", arity=(args, args),
                keywords=frozenset({"scope", "order"}), mutates=n != "load")  # fmt: skip
    add("slice", "write_unchecked", "unchecked_write", unsafe=True, arity=(2, 2), mutates=True)  # a statement
    for receiver in ("witness", "local_witness"):  # `i.get()`: the index of a 1-D witness
        add(receiver, "get", "witness_get", varies="lane", arity=(0, 0))
    add("thread_tile", "at", "tile_at", varies="lane", arity=(2, 2))  # `t.at(r, s)`: an Index2D
    add("thread_tile", "load", "tile_io", "load", arity=(3, 3))  # `t.load(src, dst, fill)`
    add("thread_tile", "store", "tile_io", "store", arity=(2, 2))  # `t.store(out, src)`
    add("tile_id", "get", "tile_id_get", arity=(0, 0))  # `pid.get()`: a 1-D program id's index
    add("tile", "reshape", "tile_method", "reshape", arity=(1, 1))
    add("tile", "astype", "tile_method", "astype", arity=(1, 1))
    return out


METHODS: dict[tuple[str, str], Intrinsic] = _declare_methods()


def method(receiver: str, name: str) -> Intrinsic | None:
    """The declaration of the method `name` of a value of kind `receiver`, None when it has none."""
    return METHODS.get((receiver, name))


# a slice's `s.write_unchecked(i, v)`: a statement, unsafe
WRITE_UNCHECKED = METHODS["slice", "write_unchecked"]
# the names of an `AtomicSlice`'s methods, in declaration order (its messages list them)
ATOMIC_METHOD_NAMES = tuple(n for (r, n) in METHODS if r == "atomic_slice")
