"""Launch configurations, typed by rank.

Block and grid tuples are in CUDA order `(x, y, z)`; shapes are `(rows, cols)` or
`(layers, rows, cols)`.  `for_shape((rows, cols), block=(bx, by))` launches
`grid = (ceil(cols / bx), ceil(rows / by))`, so `index_2d` maps x to the column
and y to the row; `for_shape((layers, rows, cols), block=(bx, by, bz))` launches
`grid = (ceil(cols / bx), ceil(rows / by), ceil(layers / bz))` (`index_3d`: z is the layer).

A config's rank is the number of extents it was built with: `LaunchConfig(g, b)` with
ints is rank 1, with tuples the longer tuple's length (`(x, y, 1)` is rank 3).
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from anodize.language.errors import LaunchError
from anodize.language.records import dataclass

R = TypeVar("R", Literal[1], Literal[2], Literal[3])

Dim3 = tuple[int, int, int]


def _dim3(v: int | tuple[int, ...], what: str) -> Dim3:
    t = (v,) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else ()
    if not 1 <= len(t) <= 3 or not all(isinstance(x, int) and not isinstance(x, bool) for x in t):
        raise LaunchError(f"`{what}` must be an int or a tuple of 1 to 3 ints, got {v!r}")
    if any(x < 1 for x in t):
        raise LaunchError(f"every dimension of `{what}` must be at least 1, got {v!r}")
    return tuple(int(x) for x in (t + (1, 1))[:3])  # type: ignore[return-value]


def _exact_dim3(v: Any) -> Dim3 | None:
    """`v` as `(x, y, z)` when it is an `int` >= 1 or a tuple of 1 to 3 of them, each exactly an
    `int` (never a bool, a float or a NumPy integer: they compare and hash equal to ints, so a
    key made of them would find an int's entry); None otherwise (then `_dim3` decides)."""
    if type(v) is int:
        return (v, 1, 1) if v >= 1 else None
    if type(v) is tuple:
        n = len(v)
        if n == 1:
            x = v[0]
            return (x, 1, 1) if type(x) is int and x >= 1 else None
        if n == 2:
            x, y = v
            return (x, y, 1) if type(x) is int and type(y) is int and x >= 1 and y >= 1 else None
        if n == 3:
            x, y, z = v
            if type(x) is int and type(y) is int and type(z) is int and x >= 1 and y >= 1 and z >= 1:
                return v  # type: ignore[no-any-return]
    return None


# Every config is interned: equal arguments give the very same object, so a launch that builds
# its config inline (`k[LaunchConfig.for_tiles((n,), (1024,))](...)`) finds the kernel's launcher
# by identity, as a held one does.  The key is flat, `(gx, gy, gz, bx, by, bz, shared_mem, rank)`,
# of exact ints only (see `_exact_dim3`; a subclass's keys start with the class); bounded.
_INTERN: dict[tuple[Any, ...], Any] = {}
_INTERN_MAX = 4096
_TILES_2D: dict[tuple[int, int, int, int], Any] = {}  # `for_tiles((rows, cols), (tile_rows, tile_cols))`, by the four ints


def _make(key: tuple[Any, ...]) -> Any:
    """The config of a flat key that `_INTERN` lacks: made, remembered, returned."""
    cls, k = (key[0], key[1:]) if len(key) == 9 else (LaunchConfig, key)
    hit = object.__new__(cls)
    grid, block = k[0:3], k[3:6]
    object.__setattr__(hit, "grid", grid)
    object.__setattr__(hit, "block", block)
    object.__setattr__(hit, "shared_mem", k[6])
    object.__setattr__(hit, "rank", k[7])
    object.__setattr__(hit, "_hash", hash((grid, block, k[6], k[7])))
    if len(_INTERN) >= _INTERN_MAX:
        _INTERN.clear()  # the configs made so far stay valid, equal to new ones, only not shared
    _INTERN[key] = hit
    return hit


@dataclass(frozen=True, init=False)
class LaunchConfig(Generic[R]):
    """`grid` and `block` in CUDA order; `rank` is the launch's index-space rank (1, 2 or 3):
    the number of extents it was built with.  Immutable and interned: equal arguments give
    the same object (so a config built inline on every launch costs a lookup, not a check)."""

    grid: Dim3
    block: Dim3
    shared_mem: int = 0
    rank: int = 1

    def __new__(cls, grid: int | tuple[int, ...], block: int | tuple[int, ...], shared_mem: int = 0) -> LaunchConfig[Any]:
        if type(grid) is int and type(block) is int and type(shared_mem) is int and cls is LaunchConfig:
            if grid >= 1 and block >= 1 and shared_mem >= 0:  # `LaunchConfig(blocks, threads)`
                key = (grid, 1, 1, block, 1, 1, shared_mem, 1)
                return _INTERN.get(key) or _make(key)  # type: ignore[no-any-return]
        g: Dim3
        b: Dim3
        eg, eb = _exact_dim3(grid), _exact_dim3(block)
        if eg is not None and eb is not None and type(shared_mem) is int and shared_mem >= 0:
            g, b = eg, eb
        else:
            g, b = _dim3(grid, "grid"), _dim3(block, "block")
            if not isinstance(shared_mem, int) or shared_mem < 0:
                raise LaunchError(f"`shared_mem` must be a non-negative int, got {shared_mem!r}")
            shared_mem = int(shared_mem)
        given = max(
            1 if isinstance(grid, int) else len(grid),
            1 if isinstance(block, int) else len(block),
        )
        full: tuple[Any, ...] = (*g, *b, shared_mem, given) if cls is LaunchConfig else (cls, *g, *b, shared_mem, given)
        return _INTERN.get(full) or _make(full)  # type: ignore[no-any-return]

    def __init__(self, grid: int | tuple[int, ...], block: int | tuple[int, ...], shared_mem: int = 0):
        pass  # made (and checked) by `__new__`

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined, no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        r = self.rank  # the extents it was built with: the same rank back
        return (type(self), (self.grid[:r] if r > 1 else self.grid[0], self.block[:r] if r > 1 else self.block[0], self.shared_mem))

    @staticmethod
    def for_num_elems(n: int, block: int | None = None, shared_mem: int = 0) -> LaunchConfig[Literal[1]]:
        """A 1-D launch with at least one thread per element.  Without `block`, a kernel whose
        contract fixes a block launches with that block (the grid recomputed as ceil(n / block));
        any other launch uses 256."""
        if block is None:
            if type(n) is int and type(shared_mem) is int and n >= 0 and shared_mem >= 0:
                return _by_default((n,), shared_mem)
            block = 256
        if type(n) is int and type(block) is int and type(shared_mem) is int and n >= 0 and block >= 1 and shared_mem >= 0:
            key = (-(-n // block) or 1, 1, 1, block, 1, 1, shared_mem, 1)
            return _INTERN.get(key) or _make(key)  # type: ignore[no-any-return]
        if not isinstance(n, int) or n < 0:
            raise LaunchError(f"`n` must be a non-negative int, got {n!r}")
        if not isinstance(block, int) or block < 1:
            raise LaunchError(f"`block` must be a positive int, got {block!r}")
        return LaunchConfig(max(1, -(-n // block)), block, shared_mem)

    @staticmethod
    def for_shape(
        shape: tuple[int, int] | tuple[int, int, int], block: tuple[int, ...] | None = None, shared_mem: int = 0
    ) -> LaunchConfig[Any]:
        """A 2-D launch over `(rows, cols)` with `block` in CUDA order `(bx, by)` (default
        (16, 16)), or a 3-D launch over `(layers, rows, cols)` with `block=(bx, by, bz)`
        (default (8, 8, 4)).  The config's rank is the number of extents of `shape`."""
        if block is None and type(shape) is tuple and type(shared_mem) is int and shared_mem >= 0:
            hit = _BY_DEFAULT.get((shape, shared_mem))  # the block left to the kernel's contract
            if hit is not None and (len(shape) == 2 and type(shape[0]) is int and type(shape[1]) is int or _exact_extents(shape)):
                return hit
            if _exact_extents(shape):
                return _by_default(shape, shared_mem)
        if type(shape) is tuple and len(shape) == 2 and type(shared_mem) is int and shared_mem >= 0:  # the usual form
            bx, by = (16, 16) if block is None else block if type(block) is tuple and len(block) == 2 else (0, 0)
            r, c = shape
            if type(r) is int and type(c) is int and type(bx) is int and type(by) is int and r >= 0 and c >= 0 and bx >= 1 and by >= 1:
                key = (-(-c // bx) or 1, -(-r // by) or 1, 1, bx, by, 1, shared_mem, 2)
                return _INTERN.get(key) or _make(key)  # type: ignore[no-any-return]
        if (
            not isinstance(shape, tuple)
            or len(shape) not in (2, 3)
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
        ):
            raise LaunchError(
                f"`shape` must be a (rows, cols) or (layers, rows, cols) tuple of non-negative ints, got {shape!r}"
            )
        if block is None:
            block = (16, 16) if len(shape) == 2 else (8, 8, 4)
        if not isinstance(block, tuple) or len(block) != len(shape):
            want = "(bx, by)" if len(shape) == 2 else "(bx, by, bz)"
            raise LaunchError(f"`block` must be a {want} tuple for a {len(shape)}-D shape, got {block!r}")
        extents = shape[::-1]  # CUDA order: cols (x), rows (y), layers (z)
        grid = tuple(max(1, -(-n // b)) for n, b in zip(extents, block, strict=True))
        return LaunchConfig(grid, block, shared_mem)

    @staticmethod
    def for_tiles(shape: int | tuple[int, ...], tile_shape: int | tuple[int, ...]) -> LaunchConfig[Any]:
        """One program per tile of `shape` (`(n,)`, `(rows, cols)` or `(layers, rows, cols)`) cut
        into `tile_shape` tiles: `grid = (ceil(cols / tile_cols), ceil(rows / tile_rows),
        ceil(layers / tile_layers))` in CUDA order.  For `@az.tile_kernel` kernels, which fill
        in their own block."""
        if type(shape) is tuple and type(tile_shape) is tuple:  # the usual forms, exact ints: no more to check
            if len(shape) == 2 and len(tile_shape) == 2:  # (first: a grid function calls this on every launch)
                (r, c), (tr, tc) = shape, tile_shape
                if type(r) is int and type(c) is int and type(tr) is int and type(tc) is int and r >= 0 and c >= 0 and tr >= 1 and tc >= 1:
                    dims = (r, c, tr, tc)  # (exact ints, checked: no True == 1 or 2.0 == 2 in the memo)
                    hit = _TILES_2D.get(dims)
                    if hit is not None:
                        return hit  # type: ignore[no-any-return]
                    key = (-(-c // tc) or 1, -(-r // tr) or 1, 1, 1, 1, 1, 0, 2)
                    if len(_TILES_2D) >= _INTERN_MAX:
                        _TILES_2D.clear()
                    hit = _TILES_2D[dims] = _INTERN.get(key) or _make(key)
                    return hit  # type: ignore[no-any-return]
            elif len(shape) == 1 and len(tile_shape) == 1:
                n1, t1 = shape[0], tile_shape[0]
                if type(n1) is int and type(t1) is int and n1 >= 0 and t1 >= 1:
                    key = (-(-n1 // t1) or 1, 1, 1, 1, 1, 1, 0, 1)
                    return _INTERN.get(key) or _make(key)  # type: ignore[no-any-return]
        s = (shape,) if isinstance(shape, int) else tuple(shape)
        t = (tile_shape,) if isinstance(tile_shape, int) else tuple(tile_shape)
        ok = lambda v, lo: isinstance(v, int) and not isinstance(v, bool) and v >= lo  # noqa: E731
        if not 1 <= len(s) <= 3 or len(t) != len(s) or not all(ok(v, 0) for v in s) or not all(ok(v, 1) for v in t):
            raise LaunchError(
                f"`for_tiles` takes a 1-D, 2-D or 3-D shape and a tile shape of the same rank (positive ints), got {shape!r} and {tile_shape!r}"
            )
        grid = tuple(max(1, -(-n // b)) for n, b in zip(s[::-1], t[::-1], strict=True))
        return LaunchConfig(grid if len(grid) > 1 else grid[0], (1,) * len(grid) if len(grid) > 1 else 1)

    @property
    def threads_per_block(self) -> int:
        """The block's thread count (x * y * z)."""
        return self.block[0] * self.block[1] * self.block[2]

    def __repr__(self) -> str:
        return f"LaunchConfig(grid={self.grid}, block={self.block}, shared_mem={self.shared_mem}, rank={self.rank})"


_DEFAULT_BLOCK = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}


class DefaultBlockConfig(LaunchConfig[Any]):
    """A config of `for_num_elems(n)` or `for_shape(shape)` built without `block`: it launches
    with the default block (256; (16, 16); (8, 8, 4)), except that a kernel whose contract
    fixes a block takes that block instead (`with_block`: the grid recomputed over `extents`).
    Interned by `(extents, shared_mem)`, and equal only to a config of the same extents: two
    element counts with one default grid differ under another block."""

    extents: tuple[int, ...]  # the shape it was built over, as given (n,) or (rows, cols) ...

    def __eq__(self, other: object) -> bool:
        return self is other or (
            type(other) is DefaultBlockConfig and other.extents == self.extents and other.shared_mem == self.shared_mem
        )

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined, no-any-return]

    def __reduce__(self) -> tuple[Any, ...]:
        if len(self.extents) == 1:
            return (LaunchConfig.for_num_elems, (self.extents[0], None, self.shared_mem))
        return (LaunchConfig.for_shape, (self.extents, None, self.shared_mem))

    def with_block(self, block: tuple[int, ...]) -> LaunchConfig[Any]:
        """This config with `block` (a contract's, CUDA order) instead of the default one."""
        if len(self.extents) == 1:
            return LaunchConfig.for_num_elems(self.extents[0], block[0], self.shared_mem)
        return LaunchConfig.for_shape(self.extents, block, self.shared_mem)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        fn = "for_num_elems" if len(self.extents) == 1 else "for_shape"
        arg = self.extents[0] if len(self.extents) == 1 else self.extents
        return f"LaunchConfig.{fn}({arg!r}) (grid={self.grid}, block={self.block}, shared_mem={self.shared_mem}, rank={self.rank})"


def _exact_extents(shape: tuple[Any, ...]) -> bool:
    """`shape` is 2 or 3 exact non-negative ints (never a bool or a NumPy integer)."""
    return len(shape) in (2, 3) and all(type(x) is int and x >= 0 for x in shape)


_BY_DEFAULT: dict[tuple[tuple[int, ...], int], DefaultBlockConfig] = {}


def _by_default(extents: tuple[int, ...], shared_mem: int) -> DefaultBlockConfig:
    """The interned default-block config over `extents` (exact non-negative ints)."""
    key = (extents, shared_mem)
    hit = _BY_DEFAULT.get(key)
    if hit is not None:
        return hit
    block = _DEFAULT_BLOCK[len(extents)]
    plain = (
        LaunchConfig.for_num_elems(extents[0], block[0], shared_mem)
        if len(extents) == 1
        else LaunchConfig.for_shape(extents, block, shared_mem)  # type: ignore[arg-type]
    )
    made = object.__new__(DefaultBlockConfig)
    for field in ("grid", "block", "shared_mem", "rank"):
        object.__setattr__(made, field, getattr(plain, field))
    object.__setattr__(made, "extents", extents)
    object.__setattr__(made, "_hash", hash(key))
    if len(_BY_DEFAULT) >= _INTERN_MAX:
        _BY_DEFAULT.clear()
    _BY_DEFAULT[key] = made
    return made
