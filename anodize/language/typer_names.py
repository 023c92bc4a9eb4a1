"""The typer's names: what a name or attribute chain of a kernel means (the module's one symbol
table, symbols.py, under the function's own names), type annotations to compiler types, and
compile-time values (literals, module constants, `az.Constant` parameters)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from anodize.language import messages
from anodize.language.param_annotations import constant_param_type
from anodize.language.record_types import RecordError, RecordTy, record_of
from anodize.language.symbols import MISSING, Symbol
from anodize.language.types import BY_NAME, VOID, LocalArrayTy, ScalarTy, SliceTy, TupleTy, Ty, WitnessTy
from anodize.language.vocab import SLICE_KINDS

if TYPE_CHECKING:
    from anodize.language.typer_state import FnState

__all__ = ["NameResolver"]


class NameResolver:
    """Names, annotations and compile-time values of one function body (it reads the body's
    state only: a helper's signature is resolved with a state of its own, `signature_names`)."""

    def __init__(self, st: FnState):
        self.st = st

    def sym(self, node: ast.expr) -> Symbol:
        """What a name or attribute chain (not a local) refers to, from the module's one table."""
        st = self.st
        cls = node.__class__
        if cls is ast.Name:
            name = node.id  # type: ignore[attr-defined]
            if name in st.vars or name in st.slices or name in st.shared or name in st.arrays:
                return MISSING
        elif cls is not ast.Attribute:
            return MISSING
        s = st.symbols.resolve(node)
        if s.kind == "rebound":
            st.fail(messages.rebound(st.span(node), s.name, tuple(st.src.span(w) for w in s.where[:3])))
        return s

    def tag(self, node: ast.expr) -> tuple[str, ...] | None:
        """The kernel-language meaning of a name (`("scalar", "f32")`), else None."""
        s = self.sym(node)
        return s.tag if s.kind == "intrinsic" else None

    def record_type(self, s: Symbol, use: ast.AST) -> RecordTy:
        """The record type of an `@az.record` class (record_types.py); a declaration it cannot
        lay out is az-type where the kernel uses the record (`use`), naming the field."""
        assert s.cls is not None
        try:
            return record_of(self.st.symbols, s.cls)
        except RecordError as e:
            self.st.fail(messages.record_error(self.st.span(use), e, s.name, getattr(e.node, "lineno", 0)))

    def resolve_type(self, node: ast.expr | None, what: str) -> Ty:
        """A type annotation to a compiler type."""
        if node is None:
            self.st.fail(messages.signature(self.st.span(self.st.fdef), "annotation-missing", what=what))
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            self.st.fail(messages.quoted_annotation(self.st.span(node), node.value))
        if isinstance(node, ast.Constant) and node.value is None:
            return VOID
        if isinstance(node, ast.Subscript):
            base = self.tag(node.value)
            if base == ("tuple_type",):  # a helper's `-> tuple[f32, i32]` (typer_locals.py)
                return self.resolve_tuple_type(node)
            if base == ("constant_type",):
                c = constant_param_type(self.st.symbols, node)
                if c is None:
                    self.st.fail(messages.bad_constant_annotation(self.st.span(node)))
                return BY_NAME[c]
            elem = self.resolve_type(node.slice, what)
            if base and base[0] == "slice" and isinstance(elem, ScalarTy):
                return SliceTy(SLICE_KINDS[base[1]], elem)
            if base and base[0] == "slice" and isinstance(elem, RecordTy):  # `Slice[Rec]` (typer_records.py)
                if SLICE_KINDS[base[1]].atomic:
                    self.st.type_error(node, "record-atomic", name=ast.unparse(node))
                return SliceTy(SLICE_KINDS[base[1]], elem)  # type: ignore[arg-type]
            if base == ("local_array_type",) and isinstance(elem, ScalarTy):  # a helper's `LocalArray[T]`
                return LocalArrayTy(elem, ())
            self.st.type_error(node, "not-kernel-type", expr=ast.unparse(node))
        s = self.sym(node)
        if s.kind == "record":
            return self.record_type(s, node)
        if s.kind == "typevar":
            bound = self.st.k.spec.get(s.name)
            if bound is None:
                self.st.fail(messages.unspecialised_typevar(self.st.span(node), s.name, s.constraints))
            return BY_NAME[bound]
        if s.kind == "intrinsic" and s.name in ("builtins.int", "builtins.float", "builtins.bool"):
            alt = {"builtins.int": "i64", "builtins.float": "f64", "builtins.bool": "bool_"}[s.name]
            self.st.fail(messages.python_number_annotation(self.st.span(node), s.name[9:], alt))
        tag = s.tag if s.kind == "intrinsic" else None
        if tag and tag[0] == "scalar":
            return BY_NAME[tag[1]]
        if tag and tag[0] == "witness_type":
            return WitnessTy(int(tag[1]))
        if tag == ("block_witness_type",):
            return WitnessTy(1, block=True)
        if tag and tag[0] == "slice":
            self.st.type_error(node, "needs-element-type-f32", tag=tag[1])
        self.st.type_error(node, "not-kernel-type", expr=ast.unparse(node))

    def resolve_tuple_type(self, node: ast.Subscript) -> TupleTy:
        """`tuple[f32, i32]` (also `typing.Tuple[...]`): a tuple of scalars."""
        elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out: list[ScalarTy] = []
        for e in elts:
            if isinstance(e, ast.Constant) and e.value is Ellipsis:
                self.st.type_error(node, "tuple-annotation", expr=ast.unparse(node))
            t = self.resolve_type(e, "a tuple element")
            if not isinstance(t, ScalarTy):
                self.st.type_error(e, "tuple-element-scalar", help="tuple-scalars-help", ty=t)
            out.append(t)
        return TupleTy(tuple(out))

    def const_value(self, node: ast.expr) -> Any:
        """A compile-time value: a literal, a tuple of them, a module constant (every binding form
        `symbols.constant` reads), an `az.Constant` parameter, or arithmetic over those
        (`(TILE, TILE + 1)`, `BM * 2`)."""
        try:
            return ast.literal_eval(node)
        except ValueError:
            pass
        if isinstance(node, ast.Tuple):
            return tuple(self.const_value(e) for e in node.elts)
        env: dict[str, Any] = {}
        if self.st.is_kernel:
            own = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            env = {n: self.st.k.consts[n] for n in own if n in self.st.k.consts}
            unknown = self.st.k.unknown_values  # checked without a value: the specialisation checks the real one
            env.update({n: unknown.get(n, 1) for n in own if n in self.st.k.unknown_consts})
        got = self.st.symbols.constant(node, env)
        if got is not None:
            return got[0]
        self.st.type_error(node, "must-compile-time-constant", expr=ast.unparse(node))
