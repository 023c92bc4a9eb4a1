"""The compiler's types, and the arithmetic rules between them.

Scalar types wrap `anodize.language.vocab.ScalarInfo` (the one table of widths
and signedness).  The promotion rules below are the ones docs/language.md
("Types and arithmetic") documents; change both together.
"""

from __future__ import annotations

from dataclasses import dataclass

from anodize.language.catalogue import MESSAGES

from anodize.language.vocab import SCALARS, ScalarInfo, SliceKindInfo


@dataclass(frozen=True)
class ScalarTy:
    info: ScalarInfo

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def bits(self) -> int:
        return self.info.bits

    @property
    def is_float(self) -> bool:
        return self.info.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.info.kind in ("i", "u")

    @property
    def is_bool(self) -> bool:
        return self.info.kind == "b"

    @property
    def signed(self) -> bool:
        return self.info.kind == "i"

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
    rank: int  # 1: Index1D, 2: Index2D
    block: bool = False  # BlockWitness1D: this block's index (rank 1), usable only by the block's leader

    def __str__(self) -> str:
        if self.block:
            return "BlockWitness1D"
        return "Index1D" if self.rank == 1 else "Index2D"


@dataclass(frozen=True)
class SharedTy:
    elem: ScalarTy
    shape: tuple[int, ...]  # (0,) for dynamic shared memory

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
        return f"shared[{self.elem}, {self.shape}]"


@dataclass(frozen=True)
class VoidTy:
    def __str__(self) -> str:
        return "None"


Ty = ScalarTy | SliceTy | WitnessTy | SharedTy | VoidTy

F32 = ScalarTy(SCALARS["f32"])
F64 = ScalarTy(SCALARS["f64"])
I32 = ScalarTy(SCALARS["i32"])
I64 = ScalarTy(SCALARS["i64"])
U32 = ScalarTy(SCALARS["u32"])
U64 = ScalarTy(SCALARS["u64"])
BOOL = ScalarTy(SCALARS["bool_"])
VOID = VoidTy()

BY_NAME: dict[str, ScalarTy] = {t.name: t for t in (F32, F64, I32, I64, U32, U64, BOOL)}


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
    * a float with an int gives the float type (f32 stays f32, as in CUDA C)
    * f32 with f64 gives f64
    * ints of one signedness: the wider one
    * signed with unsigned: the signed type if it is wider, else i64 when the unsigned
      type is narrower than 64 bits; u64 with a signed type needs an explicit cast
    """
    if a == b:
        return I64 if a.is_bool else a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            return a if a.bits >= b.bits else b
        return a if a.is_float else b
    if a.signed == b.signed:
        return a if a.bits >= b.bits else b
    s, u = (a, b) if a.signed else (b, a)
    if s.bits > u.bits:
        return s
    if u.bits < 64:
        return I64
    raise PromotionError("mixing-needs-cast", a=a, b=b)


def implicitly_converts(src: ScalarTy, dst: ScalarTy) -> bool:
    """Whether a value of `src` may be stored into a `dst` location (a local, an element,
    a helper argument, a return value) without a cast: identity, bool to anything, any
    int to any int (wrapping, as a cast does), int to float, and f32 to f64.  Float to
    int and f64 to f32 lose information and need an explicit cast."""
    if src == dst or src.is_bool:
        return True
    if dst.is_float:
        return src.is_int or src.bits <= dst.bits
    return dst.is_int and src.is_int
