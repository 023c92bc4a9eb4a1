"""What a kernel parameter's annotation declares, read through the module's symbol table
(symbols.py): a slice kind and its element, a scalar, a witness, a local array, an
`az.Constant[...]`, or a type variable (`typevars_of`: a generic kernel's)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .symbols import ModuleSymbols


class _Unresolved:
    """What a part of an annotation that is not a name reads as: symbols.py's `MISSING` (kind
    "missing", no name, no tag).  Not imported from there: the launch path reads contracts
    (contract_schema.py) through this module, and symbols.py and the front end it pulls in
    are no part of a launch (a built package's first launch skips them)."""

    kind, name, tag, constraints = "missing", "", (), ()


MISSING: Any = _Unresolved()


def annotation_kind(symbols: ModuleSymbols, ann: ast.expr | None) -> tuple[str, str | None, str | None]:
    """(kind, slice kind, scalar) of a parameter annotation; kind: slice | scalar | witness | bad.

    Only the kernel language's own names count: `int`/`float` are not kernel types (use `i64`/`f64`)."""
    if ann is None:
        return "bad", None, None
    base, elem = (ann.value, ann.slice) if isinstance(ann, ast.Subscript) else (ann, None)
    sym = symbols.resolve(base) if isinstance(base, (ast.Name, ast.Attribute)) else MISSING
    tag = sym.tag if sym.kind == "intrinsic" and sym.name.startswith("az.") else ()
    if tag and tag[0] == "slice":
        scalar = None
        if elem is not None and isinstance(elem, (ast.Name, ast.Attribute)):
            es = symbols.resolve(elem)
            if es.kind == "intrinsic" and es.name.startswith("az.") and es.tag[0] == "scalar":
                scalar = es.tag[1]
            elif es.kind == "typevar":
                scalar = "~" + es.name  # a type variable: one scalar per specialisation
            elif es.kind == "record":
                scalar = "@" + es.name  # an `@az.record` class (record_types.py)
        return "slice", tag[1], scalar
    if elem is None and tag and tag[0] == "scalar":
        return "scalar", None, tag[1]
    if tag == ("local_array_type",):  # a helper's `LocalArray[T]`: the caller's local array, by reference
        es = symbols.resolve(elem) if isinstance(elem, (ast.Name, ast.Attribute)) else MISSING
        if es.kind == "intrinsic" and es.tag and es.tag[0] == "scalar":
            return "local", None, es.tag[1]
        return ("local", None, "~" + es.name) if es.kind == "typevar" else ("bad", None, None)
    if elem is not None and tag and tag[0] == "constant_type":
        c = constant_param_type(symbols, ann)
        return ("scalar", None, c) if c is not None else ("bad", None, None)
    if elem is None and sym.kind == "record":  # a record by value
        return "scalar", None, "@" + sym.name
    if elem is None and sym.kind == "typevar":
        return "scalar", None, "~" + sym.name
    if elem is None and tag and tag[0] == "witness_type":
        return "witness", None, tag[1]
    if elem is None and tag == ("block_witness_type",):  # BlockWitness1D: a 1-D witness (of its own space)
        return "witness", None, "1"
    return "bad", None, None


def constant_param_type(symbols: ModuleSymbols, ann: ast.expr | None) -> str | None:
    """`az.Constant[int]` -> "i64" (`[float]` -> "f64", `[bool]` -> "bool_"); None otherwise."""
    if not isinstance(ann, ast.Subscript) or not isinstance(ann.value, (ast.Name, ast.Attribute)):
        return None
    base = symbols.resolve(ann.value)
    if not (base.kind == "intrinsic" and base.tag == ("constant_type",)):
        return None
    inner = symbols.resolve(ann.slice) if isinstance(ann.slice, (ast.Name, ast.Attribute)) else MISSING
    return {"builtins.int": "i64", "builtins.float": "f64", "builtins.bool": "bool_"}.get(inner.name) if inner.kind == "intrinsic" else None


def typevars_of(symbols: ModuleSymbols, fdef: ast.FunctionDef) -> dict[str, tuple[str, ...]]:
    """The type variables a kernel's parameters name, with their constraints (source order)."""
    out: dict[str, tuple[str, ...]] = {}
    for p in fdef.args.args:
        for n in _named(p.annotation) if p.annotation is not None else ():
            s = symbols.resolve(n)
            if s.kind == "typevar":
                out.setdefault(s.name, s.constraints)
    return out


def _named(ann: ast.expr) -> list[ast.expr]:
    """The names and attribute chains of an annotation, as `ast.walk` meets them (`Slice[T]`,
    `f32`: without a walk; any other form walked)."""
    if isinstance(ann, ast.Name):
        return [ann]
    if isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and isinstance(ann.slice, ast.Name):
        return [ann.value, ann.slice]
    return [n for n in ast.walk(ann) if isinstance(n, (ast.Name, ast.Attribute))]


def constant_params(symbols: ModuleSymbols, fdef: ast.FunctionDef) -> dict[str, str]:
    """name -> scalar ("i64", "f64", "bool_") of each `az.Constant[...]` parameter."""
    out = {}
    for p in fdef.args.args:
        c = constant_param_type(symbols, p.annotation)
        if c is not None:
            out[p.arg] = c
    return out
