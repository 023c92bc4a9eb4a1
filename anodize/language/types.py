"""The compiler's types, and the arithmetic rules between them.

Scalar types wrap `anodize.language.vocab.ScalarInfo` (the one table of widths
and signedness).  The promotion rules below are the ones docs/language.md
("Types and arithmetic") documents; change both together.
"""

from __future__ import annotations

from functools import cached_property

from anodize.language.records import dataclass

from anodize.language.catalogue import MESSAGES

from anodize.language.vocab import SCALARS, ScalarInfo, SliceKindInfo


@dataclass(frozen=True)
class ScalarTy:
    info: ScalarInfo

    # (cached: a module has a handful of scalar types, each asked these ~20,000 times a
    # 10,000-line check; a cached value is a plain attribute of the instance, not a field)

    @cached_property
    def name(self) -> str:
        return self.info.name

    @cached_property
    def bits(self) -> int:
        return self.info.bits

    @cached_property
    def is_float(self) -> bool:
        return self.info.kind == "f"

    @cached_property
    def is_half(self) -> bool:
        return self.info.is_half

    @cached_property
    def is_f8(self) -> bool:
        return self.info.is_f8

    @cached_property
    def is_int(self) -> bool:
        return self.info.kind in ("i", "u")

    @cached_property
    def is_bool(self) -> bool:
        return self.info.kind == "b"

    @cached_property
    def signed(self) -> bool:
        return self.info.kind == "i"

    @cached_property
    def value_range(self) -> tuple[int, int]:
        """The values an integer type holds, read with its signedness (`ranges.type_range`)."""
        half = 1 << (self.bits - 1)
        return (-half, half - 1) if self.signed else (0, 2 * half - 1)

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class SliceTy:
    kind: SliceKindInfo
    elem: ScalarTy

    @property
    def rank(self) -> int:
        return self.kind.rank

    def __str__(self) -> str:
        return f"{self.kind.name}[{self.elem}]"


@dataclass(frozen=True)
class WitnessTy:
    rank: int  # 1: Index1D, 2: Index2D, 3: Index3D
    block: bool = False  # BlockWitness1D: this block's index (rank 1), usable only by the block's leader
    local: bool = False  # LocalIndex / LocalIndex2D: this thread's slot in its block (shared arrays only)
    # Tile2D (`thread.tile_2d(TR, TC, GR, GC)`): this thread's TR x TC elements, named by `t.at(r, s)`
    tile: tuple[int, int, int, int] | None = None

    def __str__(self) -> str:
        if self.tile is not None:
            return "Tile2D"
        if self.block:
            return "BlockWitness1D"
        if self.local:
            return "LocalIndex" if self.rank == 1 else "LocalIndex2D"
        return f"Index{self.rank}D"


@dataclass(frozen=True)
class SharedTy:
    elem: ScalarTy
    shape: tuple[int, ...]  # (0,) for dynamic shared memory
    atomic: bool = False  # `az.shared.atomic_array`: accessed only through its atomic methods

    @property
    def dynamic(self) -> bool:
        return self.shape == (0,)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __str__(self) -> str:
        return f"{'atomic_shared' if self.atomic else 'shared'}[{self.elem}, {self.shape}]"


@dataclass(frozen=True)
class LocalArrayTy:
    """A per-thread array (`az.local.array(shape, T)`); `shape` () in a helper's annotation
    `LocalArray[T]` (any shape: the parameter takes the argument's)."""

    elem: ScalarTy
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def __str__(self) -> str:
        return f"LocalArray[{self.elem}]" if not self.shape else f"LocalArray[{self.elem}, {self.shape}]"


@dataclass(frozen=True)
class TupleTy:
    """A tuple of scalars: a helper's `-> tuple[f32, i32]`, the value unpacked by `a, b = ...`."""

    elems: tuple[ScalarTy, ...]

    def __str__(self) -> str:
        return "tuple[" + ", ".join(str(e) for e in self.elems) + "]"


@dataclass(frozen=True)
class VoidTy:
    def __str__(self) -> str:
        return "None"


Ty = ScalarTy | SliceTy | WitnessTy | SharedTy | LocalArrayTy | TupleTy | VoidTy

F32 = ScalarTy(SCALARS["f32"])
F64 = ScalarTy(SCALARS["f64"])
I32 = ScalarTy(SCALARS["i32"])
I64 = ScalarTy(SCALARS["i64"])
U32 = ScalarTy(SCALARS["u32"])
U64 = ScalarTy(SCALARS["u64"])
BOOL = ScalarTy(SCALARS["bool_"])
F16 = ScalarTy(SCALARS["f16"])
BF16 = ScalarTy(SCALARS["bf16"])
I8 = ScalarTy(SCALARS["i8"])
I16 = ScalarTy(SCALARS["i16"])
U8 = ScalarTy(SCALARS["u8"])
U16 = ScalarTy(SCALARS["u16"])
F8E4M3 = ScalarTy(SCALARS["f8e4m3"])
F8E5M2 = ScalarTy(SCALARS["f8e5m2"])
VOID = VoidTy()

BY_NAME: dict[str, ScalarTy] = {name: ScalarTy(info) for name, info in SCALARS.items()}
_SIGNED_BY_BITS = {8: I8, 16: I16, 32: I32, 64: I64}


class PromotionError(Exception):
    """Two operand types with no implicit common type (e.g. `u64` with `i64`).

    `key` names an `az-type` message of the catalogue (anodize/language/catalogue.py) and
    `values` fill it; `messages.promotion_error` turns it into a located diagnostic."""

    def __init__(self, key: str, **values: object):
        super().__init__(MESSAGES[key].format(**values))
        self.key = key
        self.values = values


def promote(a: ScalarTy, b: ScalarTy) -> ScalarTy:
    """The common type of a binary arithmetic operation between two typed operands.

    * bool with bool gives i64 for arithmetic (comparisons and bit ops keep bool elsewhere);
      bool with anything else gives the other type
    * a float with an int gives the float type (f32 stays f32, as in CUDA C), except that
      a half type (f16, bf16) with an int gives f32
    * floats: the wider one; f16 with bf16 (neither holds the other) gives f32
    * ints of one signedness: the wider one (i8 with i8 stays i8 and wraps, as in NumPy;
      no C-style promotion to int)
    * signed with unsigned: the signed type if it is wider, else the narrowest signed type
      wider than the unsigned one (u8: i16, u16: i32, u32: i64, as NumPy does); u64 with
      a signed type needs an explicit cast
    * an f8 type (f8e4m3, f8e5m2) is f16 first (f16 holds every f8 value): f8 with f8 gives
      f16, with f32 f32, with bf16 f32
    """
    if a.is_f8:
        a = F16
    if b.is_f8:
        b = F16
    if a == b:
        return I64 if a.is_bool else a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if a.bits == b.bits:  # f16 with bf16
                return F32
            return a if a.bits >= b.bits else b
        f = a if a.is_float else b
        return F32 if f.is_half else f
    if a.signed == b.signed:
        return a if a.bits >= b.bits else b
    s, u = (a, b) if a.signed else (b, a)
    if s.bits > u.bits:
        return s
    if u.bits < 64:
        return _SIGNED_BY_BITS[u.bits * 2]
    raise PromotionError("mixing-needs-cast", a=a, b=b)


def implicitly_converts(src: ScalarTy, dst: ScalarTy) -> bool:
    """Whether a value of `src` may be stored into a `dst` location (a local, an element,
    a helper argument, a return value) without a cast: identity, bool to anything, any
    int to any int (wrapping, as a cast does), int to float, and a float to a wider float
    (f16 or bf16 to f32 or f64, f32 to f64).  Float to int, f64 to f32, f32 to a half type
    and f16 to bf16 (or back) lose information and need an explicit cast, as does any
    conversion to an f8 type but from bool (`f8e4m3(x)`: it rounds and saturates)."""
    if src == dst or src.is_bool:
        return True
    if dst.is_f8:
        return False
    if dst.is_float:
        return src.is_int or src.bits < dst.bits
    return dst.is_int and src.is_int
