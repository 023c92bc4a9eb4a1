"""Record types (`@az.record`): a class of typed fields with the C layout of a NumPy
structured dtype built with `align=True` (docs/records.md).

    @az.record
    class Particle:
        pos: az.Array[f32, 3]
        vel: az.Array[f32, 3]
        mass: f32
        id: i32

Each field is a scalar, a fixed-size array of a scalar (`az.Array[T, n]`) or another record.
A field sits at the next multiple of its alignment (a scalar's size; an array's element's;
a record's largest field's), and the record's size is rounded up to a multiple of its
alignment: C's rule, and NumPy's for `align=True`.  Read once from the module's source
(`record_of`), never by importing it; the facade (`anodize.record`) builds the same layout
from the class at run time, so a record's `dtype` is the one the compiler assumed.
"""

from __future__ import annotations

import ast
import json
from typing import TYPE_CHECKING, Any

from anodize.language.catalogue import MESSAGES
from anodize.language.records import dataclass
from anodize.language.types import BY_NAME, ScalarTy
from anodize.language.vocab import ScalarInfo, scalar_for_dtype

if TYPE_CHECKING:
    from anodize.language.symbols import ModuleSymbols

__all__ = ["ArrayFieldTy", "RecordField", "RecordTy", "RecordError", "record_of", "layout", "ARRAY_MAX"]

ARRAY_MAX = 1 << 16  # the most elements one `az.Array` field may hold


@dataclass(frozen=True)
class ArrayFieldTy:
    """`az.Array[T, n]`: n scalars of T in a row (a field only)."""

    elem: ScalarTy
    n: int

    @property
    def size(self) -> int:
        return self.n * self.elem.info.mem_bits // 8

    @property
    def align(self) -> int:
        return self.elem.info.mem_bits // 8

    def __str__(self) -> str:
        return f"Array[{self.elem}, {self.n}]"


@dataclass(frozen=True)
class RecordField:
    name: str
    ty: Any  # ScalarTy | ArrayFieldTy | RecordTy
    offset: int  # bytes from the record's start


@dataclass(frozen=True)
class RecordTy:
    """A record type: its fields in declaration order, each at its C offset."""

    name: str
    fields: tuple[RecordField, ...]
    size: int
    align: int

    def field(self, name: str) -> RecordField | None:
        for f in self.fields:
            if f.name == name:
                return f
        return None

    def leaves(self, base: int = 0, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], ScalarTy, int]]:
        """Every scalar of the record, in layout order: (path, type, byte offset); an array's
        elements are named by their index (`("ids", "2")`)."""
        out: list[tuple[tuple[str, ...], ScalarTy, int]] = []
        for f in self.fields:
            at = base + f.offset
            if isinstance(f.ty, RecordTy):
                out.extend(f.ty.leaves(at, (*path, f.name)))
            elif isinstance(f.ty, ArrayFieldTy):
                step = f.ty.align
                out.extend(((*path, f.name, str(k)), f.ty.elem, at + k * step) for k in range(f.ty.n))
            else:
                out.append(((*path, f.name), f.ty, at))
        return out

    def spec(self) -> dict[str, Any]:
        """The layout as NumPy's dict form of a structured dtype (JSON-able)."""
        return {
            "name": self.name,
            "names": [f.name for f in self.fields],
            "formats": [_format(f.ty) for f in self.fields],
            "offsets": [f.offset for f in self.fields],
            "itemsize": self.size,
        }

    @property
    def info(self) -> ScalarInfo:
        """The element type the runtime compares: kind "r", its dtype the record's layout."""
        return ScalarInfo(self.name, "r", self.size * 8, self.size * 8, "record:" + json.dumps(self.spec(), sort_keys=True))

    def __str__(self) -> str:
        return self.name


def _format(ty: Any) -> Any:
    if isinstance(ty, RecordTy):
        return ty.spec()
    if isinstance(ty, ArrayFieldTy):
        return [ty.elem.info.numpy_name, ty.n]
    return ty.info.numpy_name


def dtype_of_spec(spec: dict[str, Any]) -> Any:
    """NumPy's structured dtype of a `RecordTy.spec()` (vocab.ScalarInfo.dtype of a record)."""
    import numpy as np

    def fmt(f: Any) -> Any:
        if isinstance(f, dict):
            return dtype_of_spec(f)
        if isinstance(f, list):
            return (_scalar_dtype(f[0]), (f[1],))
        return _scalar_dtype(f)

    return np.dtype({"names": spec["names"], "formats": [fmt(f) for f in spec["formats"]],
                     "offsets": spec["offsets"], "itemsize": spec["itemsize"]}, align=True)


def record_of_info(info: ScalarInfo) -> RecordTy:
    """The record type a `RecordTy.info` describes (a kernel parameter's element, ir.ParamSpec)."""
    return _from_spec(json.loads(info.numpy_name[len("record:"):]))


def _from_spec(spec: dict[str, Any]) -> RecordTy:
    fields = []
    for name, fmt, off in zip(spec["names"], spec["formats"], spec["offsets"]):
        if isinstance(fmt, dict):
            ty: Any = _from_spec(fmt)
        elif isinstance(fmt, list):
            ty = ArrayFieldTy(_scalar_ty(fmt[0]), fmt[1])
        else:
            ty = _scalar_ty(fmt)
        fields.append(RecordField(name, ty, off))
    return RecordTy(spec["name"], tuple(fields), spec["itemsize"], max(_align_of(f.ty) for f in fields))


def _align_of(ty: Any) -> int:
    return ty.align if isinstance(ty, (RecordTy, ArrayFieldTy)) else ty.info.mem_bits // 8


def _scalar_ty(numpy_name: str) -> ScalarTy:
    for s in BY_NAME.values():
        if s.info.numpy_name == numpy_name:
            return s
    raise ValueError(numpy_name)


def _scalar_dtype(numpy_name: str) -> Any:
    for s in BY_NAME.values():
        if s.info.numpy_name == numpy_name:
            return s.info.dtype
    raise ValueError(numpy_name)


def layout(name: str, fields: list[tuple[str, Any]]) -> RecordTy:
    """C layout of `fields` (name, ScalarTy | ArrayFieldTy | RecordTy) in order."""
    off, align, out = 0, 1, []
    for fname, ty in fields:
        a = ty.align if isinstance(ty, (RecordTy, ArrayFieldTy)) else ty.info.mem_bits // 8
        size = ty.size if isinstance(ty, (RecordTy, ArrayFieldTy)) else ty.info.mem_bits // 8
        off = -(-off // a) * a
        out.append(RecordField(fname, ty, off))
        off += size
        align = max(align, a)
    return RecordTy(name, tuple(out), -(-off // align) * align, align)


class RecordError(Exception):
    """A record declaration the compiler cannot lay out: `key` names an az-type message of the
    catalogue, at `node` (a field's annotation or the class)."""

    def __init__(self, node: ast.AST, key: str, **values: object):
        super().__init__(MESSAGES[key].format(**values))
        self.node, self.key, self.values = node, key, values


def record_of(symbols: ModuleSymbols, cls: ast.ClassDef, _seen: tuple[str, ...] = ()) -> RecordTy:
    """The record type an `@az.record` class declares (cached per class); RecordError when a
    field is not a scalar, an `az.Array[T, n]` of one, or another record of the module."""
    cache: dict[ast.ClassDef, RecordTy] = symbols.records
    hit = cache.get(cls)
    if hit is not None:
        return hit
    if cls.name in _seen:
        raise RecordError(cls, "record-recursive", name=cls.name)
    fields: list[tuple[str, Any]] = []
    for st in cls.body:
        if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            continue  # a docstring
        if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name) and st.value is None):
            raise RecordError(st, "record-body", name=cls.name)
        fields.append((st.target.id, _field_type(symbols, st.annotation, (*_seen, cls.name))))
    if not fields:
        raise RecordError(cls, "record-empty", name=cls.name)
    out = cache[cls] = layout(cls.name, fields)
    return out


def _field_type(symbols: ModuleSymbols, ann: ast.expr, seen: tuple[str, ...]) -> Any:
    if isinstance(ann, (ast.Name, ast.Attribute)):
        s = symbols.resolve(ann)
        if s.kind == "intrinsic" and s.tag and s.tag[0] == "scalar" and s.name.startswith("az."):
            return BY_NAME[s.tag[1]]
        if s.kind == "record" and s.cls is not None:
            return record_of(symbols, s.cls, seen)
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, (ast.Name, ast.Attribute)):
        s = symbols.resolve(ann.value)
        if s.kind == "intrinsic" and s.tag == ("array_type",):
            parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
            elem = _field_type(symbols, parts[0], seen) if len(parts) == 2 else None
            n = symbols.constant(parts[1]) if len(parts) == 2 else None
            if not isinstance(elem, ScalarTy) or n is None or not isinstance(n[0], int) or isinstance(n[0], bool) or not 0 < n[0] <= ARRAY_MAX:
                raise RecordError(ann, "record-array-field", expr=ast.unparse(ann), limit=ARRAY_MAX)
            return ArrayFieldTy(elem, int(n[0]))
    raise RecordError(ann, "record-field-type", expr=ast.unparse(ann))


def record_from_dtype(dtype: Any, name: str = "Record") -> RecordTy | None:
    """The record type of a NumPy structured dtype, None when a field has no anodize type or
    the layout is not C's (a packed dtype: build it with `align=True`)."""
    if dtype.fields is None:
        return None
    fields: list[tuple[str, Any]] = []
    for fname in dtype.names:
        fdt = dtype.fields[fname][0]
        if fdt.subdtype is not None:
            base, shape = fdt.subdtype
            info = scalar_for_dtype(base)
            if info is None or len(shape) != 1:
                return None
            fields.append((fname, ArrayFieldTy(ScalarTy(info), int(shape[0]))))
        elif fdt.fields is not None:
            inner = record_from_dtype(fdt, fname)
            if inner is None:
                return None
            fields.append((fname, inner))
        else:
            info = scalar_for_dtype(fdt)
            if info is None:
                return None
            fields.append((fname, ScalarTy(info)))
    rec = layout(name, fields)
    got = [dtype.fields[f.name][1] for f in rec.fields]
    if got != [f.offset for f in rec.fields] or dtype.itemsize != rec.size:
        return None
    return rec
