"""The typer's subscripts and expressions: slice, shared-array and table accesses with their
bounds proofs, names, constants, arithmetic with the promotion rules, comparisons and
conversions.  `ExprTyper` is the typer's collaborator for them (`FnTyper.exprs`, typer_fn.py)."""

from __future__ import annotations

import ast
import struct
from typing import TYPE_CHECKING, Any

from anodize.language import ir, messages
from anodize.language.ranges import ZERO, Lin
from anodize.language.record_types import RecordTy
from anodize.language.diagnostics import Diagnostic
from anodize.language.halfbits import round_half
from anodize.language.types import BOOL, BY_NAME, F16, F64, I64, PromotionError, ScalarTy, SliceTy, Ty, WitnessTy, implicitly_converts, promote
from anodize.language.vocab import WITNESS_PARTS

from anodize.language.typer_base import _AXES_TEXT, _BINOPS, _CMPOPS, _Silent, _fold, _wrap_int

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper


class ExprTyper:
    """Subscripts and expressions of one function body."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

    # ---- subscripts ------------------------------------------------------------------------
    def disjoint_error(self, node: ast.expr, name: str, sty: SliceTy, access: str) -> Diagnostic:
        return messages.disjoint_index(
            self.st.span(node), name, sty.kind.name, ast.unparse(node), access, messages.NOT_OWN_WITNESS, domain=sty.rank
        )

    def index_of(
        self, sty: SliceTy, name: str, node: ast.expr, *, disjoint: bool, access: str = "read"
    ) -> tuple[tuple[ir.Expr, ...], bool]:
        """The index expressions of `name[node]`, and whether a check is still needed."""
        if sty.rank >= 2 and isinstance(node, ast.Tuple):
            if disjoint:
                self.st.fail(self.disjoint_error(node, name, sty, access))
            if len(node.elts) != sty.rank:
                self.st.type_error(node, "index-nd", name=name, rank=sty.rank, axes=_AXES_TEXT[sty.rank][1:-1])
            index = tuple(self.as_index(self.expr(e), e) for e in node.elts)
            return index, not self.fn.ranges.slice_in_range(name, index)
        e = self.expr(node)
        self.fn.shared_mem.on_slice(e, node, name)
        if isinstance(e.ty, WitnessTy) and e.ty.tile is not None and disjoint:
            self.st.fail(self.disjoint_error(node, name, sty, access))  # a tile is not an index
        self.fn.thread_tiles.reject_tile_use(e, node)
        if isinstance(e.ty, WitnessTy):
            if disjoint:
                self.fn.collectives.check_block_access(e, node, name, access)
            if e.ty.rank != sty.rank:
                self.st.type_error(node, "witness-rank-mismatch", ty=e.ty, rank=sty.rank, name=name)
            proven = isinstance(node, ast.Name) and (node.id, name) in self.st.facts
            return (e,), not (proven or self.fn.ranges.slice_in_range(name, (e,)))
        if disjoint:
            self.st.fail(self.disjoint_error(node, name, sty, access))
        if sty.rank >= 2:
            self.st.type_error(node, "index-nd-slice-or-witness", name=name, rank=sty.rank, axes=_AXES_TEXT[sty.rank][1:-1])
        index = (self.as_index(e, node),)
        return index, not self.fn.ranges.slice_in_range(name, index)

    def as_index(self, e: ir.Expr, node: ast.expr) -> ir.Expr:
        if isinstance(e.ty, WitnessTy) and e.ty.rank == 1:
            return ir.WitnessPart(e, "get", I64, e.span)
        if not isinstance(e.ty, ScalarTy) or e.ty.is_float:
            self.st.type_error(node, "index-must-integer-found", ty=e.ty)
        return self.cast(e, I64)

    def subscript(self, node: ast.Subscript, *, for_update: bool = False) -> ir.Expr:
        v = node.value
        if isinstance(v, ast.Name) and self.fn.records.record_slice(v.id):  # `p[i]` of `Slice[Rec]`
            return self.fn.records.read_element(v.id, node)
        if isinstance(v, (ast.Attribute, ast.Subscript)) and self.fn.records.rooted(v):  # `p[i].ids[k]`
            return self.fn.records.array_element(node)
        if (
            isinstance(v, ast.Attribute)
            and v.attr == "shape"
            and isinstance(v.value, ast.Name)
            and (v.value.id in self.st.slices or v.value.id in self.st.shared)
        ):
            axis = self.fn.names.const_value(node.slice)
            name = v.value.id
            if name in self.st.shared:
                shape = self.st.shared[name].shape
                if not isinstance(axis, int) or not 0 <= axis < len(shape) or self.st.shared[name].dynamic:
                    self.st.type_error(node.slice, "shape-constant-axis", name=name, axis=axis)
                return ir.Const(shape[axis], I64, self.st.span(node), weak=True)
            sty = self.st.slices[name]
            if not isinstance(axis, int) or not 0 <= axis < sty.rank:
                self.st.type_error(node.slice, "shape-axis-es-index", name=name, rank=sty.rank)
            return ir.Len(ir.SliceRef(name, sty, self.st.span(v.value)), axis, I64, self.st.span(node))
        if isinstance(v, ast.Name) and v.id in self.st.arrays:
            return self.fn.local_values.local_read(v, node)
        if isinstance(v, ast.Name) and v.id in self.st.shared:
            self.fn.shared_mem.plain_access(v.id, node, "read")
            arr = self.fn.shared_mem.shared_ref(v.id, v)
            index = self.shared_index(arr, node.slice)
            span = self.st.span(node)
            if self.shared_in_range(arr, index):
                return ir.SharedRead(arr, index, False, -1, arr.ty.elem, span)
            return ir.SharedRead(arr, index, True, self.st.k.site(span, "read", f"shared {v.id}"), arr.ty.elem, span)
        if isinstance(v, (ast.Name, ast.Attribute)) and not (isinstance(v, ast.Name) and v.id in self.st.slices):
            table = self.fn.names.sym(v)
            if table.kind == "table" and table.table is not None:
                return self.table_read(table.name, table.table, node)
        if not (isinstance(v, ast.Name) and v.id in self.st.slices):
            if isinstance(v, ast.Name) and v.id in self.st.failed_names:
                raise _Silent  # an array whose declaration was refused: reported there
            self.st.unsupported(node, "indexing", help="slice-parameters-shared-arrays", expr=ast.unparse(v))
        name = v.id
        sty = self.st.slices[name]
        if sty.kind.atomic:
            self.st.fail(messages.atomic_plain(self.st.span(node), name, "read"))
        index, checked = self.index_of(sty, name, node.slice, disjoint=sty.kind.disjoint)
        span = self.st.span(node)
        site = self.st.k.site(span, "read", name) if checked else -1
        return ir.Read(ir.SliceRef(name, sty, self.st.span(v)), index, checked, site, sty.elem, span)

    def table_read(self, name: str, table: Any, node: ast.Subscript) -> ir.Expr:
        """`TABLE[i]`: a bounds-checked read of a module-level constant table."""
        if isinstance(node.slice, ast.Tuple):
            self.st.type_error(node.slice, "table-1d-index", name=name)
        index = (self.as_index(self.expr(node.slice), node.slice),)
        span = self.st.span(node)
        ty = BY_NAME[table.scalar]
        if isinstance(index[0], ir.Const) and 0 <= int(index[0].value) < len(table.values):
            return ir.Const(table.values[int(index[0].value)], ty, span)
        proven = self.fn.ranges.index_in_range(index, [Lin(ZERO, len(table.values))])
        site = -1 if proven else self.st.k.site(span, "read", f"table {name}")
        return ir.TableRead(name, table.values, index, not proven, site, ty, span)

    def shared_in_range(self, arr: ir.SharedRef, index: tuple[ir.Expr, ...]) -> bool:
        """A static shared array's index proven in range (a dynamic one's size is the launch's
        `shared_mem`, unknown here: never proven, so every access is checked on the device)."""
        if arr.ty.dynamic:
            return False
        if self.fn.shared_mem.witness_in_range(arr, index):  # `buf[w]` inside the contract's block
            return True
        if self.fn.ranges.index_in_range(index, [Lin(ZERO, d) for d in arr.ty.shape]):
            return True
        return self.fn.shared_mem.slots_in_range(arr, index)  # `buf[w + j * 256]`: the slot forms

    def shared_index(self, arr: ir.SharedRef, node: ast.expr) -> tuple[ir.Expr, ...]:
        rank = len(arr.ty.shape)
        if not isinstance(node, ast.Tuple):  # a block-local witness: one part per axis
            e = self.expr(node)
            parts = self.fn.shared_mem.shared_index(arr, e, node)
            if parts is not None:
                return parts
            if rank == 1:
                return (self.as_index(e, node),)
        if rank == 2:
            if not isinstance(node, ast.Tuple) or len(node.elts) != 2:
                self.st.type_error(node, "shared-2d-index")
            return tuple(self.as_index(self.expr(e), e) for e in node.elts)
        return (self.as_index(self.expr(node), node),)

    def store(self, target: ast.Subscript, value: ir.Expr, node: ast.AST) -> ir.Stmt:
        v = target.value
        span = self.st.span(target)
        if isinstance(v, ast.Name) and v.id in self.st.arrays:
            return self.fn.local_values.local_store(target, value, node)
        if isinstance(v, ast.Name) and v.id in self.st.shared:
            self.fn.shared_mem.plain_access(v.id, target, "written")
            arr = self.fn.shared_mem.shared_ref(v.id, v)
            if self.st.unsafe:
                self.st.k.unsafe_shared.add(arr.name)
            index = self.shared_index(arr, target.slice)
            value = self.coerce(value, arr.ty.elem, node, f"an element of `{v.id}`")
            if self.shared_in_range(arr, index):
                return ir.SharedWrite(arr, index, value, False, -1, self.st.span(node))
            return ir.SharedWrite(arr, index, value, True, self.st.k.site(span, "write", f"shared {v.id}"), self.st.span(node))
        if not (isinstance(v, ast.Name) and v.id in self.st.slices):
            if isinstance(v, ast.Name) and v.id in self.st.failed_names:
                raise _Silent  # an array whose declaration was refused: reported there
            self.st.unsupported(target, "assign-to", target=ast.unparse(target))
        name = v.id
        sty = self.st.slices[name]
        if sty.kind.atomic:
            self.st.fail(messages.atomic_plain(span, name, "write"))
        if not sty.kind.output:
            self.st.fail(messages.shared_write(span, name, sty.kind.name, "how-write-to"))
        index, checked = self.index_of(sty, name, target.slice, disjoint=True, access="written")
        value = self.coerce(value, sty.elem, node, f"an element of `{name}`")
        site = self.st.k.site(span, "write", name) if checked else -1
        return ir.Write(ir.SliceRef(name, sty, self.st.span(v)), index, value, checked, site, self.st.span(node))

    # ---- expressions -----------------------------------------------------------------------
    def expr(self, node: ast.expr) -> ir.Expr:
        return self.fn.visit(node)  # type: ignore[no-any-return]

    def visit_Constant(self, node: ast.Constant) -> ir.Expr:
        v = node.value
        span = self.st.span(node)
        if isinstance(v, bool):
            return ir.Const(v, BOOL, span, weak=True)
        if isinstance(v, int):
            return ir.Const(v, I64, span, weak=True)
        if isinstance(v, float):
            return ir.Const(v, F64, span, weak=True)
        self.st.fail(messages.unsupported_literal(span, v))

    def load_name(self, node: ast.Name) -> ir.Expr:
        name = node.id
        st = self.st
        span = st.span(node)
        if name in st.arrays:  # a local array: indexed, or passed to a helper (typer_locals.py)
            return self.fn.local_values.local_ref(name, node)
        if name in st.vars:
            ty = st.vars[name]
            if isinstance(ty, RecordTy):  # a record local: its leaves (typer_records.py)
                return self.fn.records.load_local(name, node)
            if name in st.past_loop:
                self.st.type_error(node, "grid-stride-after-loop", help="grid-stride-after-loop-help", name=name)
            return ir.Local(name, ty, span)
        if name in st.slices:
            return ir.SliceRef(name, st.slices[name], span)
        if name in st.shared:
            return self.fn.shared_mem.shared_ref(name, node)
        if name in st.failed_names:
            raise _Silent
        if st.is_kernel and name in st.k.consts:
            return self.py_constant(st.k.consts[name], node)
        return self.module_value(node)

    def module_value(self, node: ast.expr) -> ir.Expr:
        """A module-level name read as a value: a constant, from the module's source."""
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(root, ast.Name) and root.id in self.st.failed_names:
            raise _Silent  # `t.T` of a local whose assignment was refused: reported there
        s = self.fn.names.sym(node)
        text = ast.unparse(node)
        span = self.st.span(node)
        if s.kind == "constant":
            if s.scalar is not None:  # a NumPy scalar keeps its type: `SCALE = np.float32(0.5)`
                return self.cast(ir.Const(s.value, F64 if BY_NAME[s.scalar].is_half else BY_NAME[s.scalar], span), BY_NAME[s.scalar])  # type: ignore[arg-type]
            return self.py_constant(s.value, node)
        if s.kind == "missing":
            self.st.type_error(node, "name-undefined", help="assign-before", name=text)
        if s.kind == "table":
            self.st.fail(messages.module_value(span, text, "module-table", name=text))
        if s.kind in ("function", "intrinsic"):
            self.st.unsupported(node, "name-as-value", name=text)
        if "." in s.name and not s.name.startswith(("az.", "thread.", "warp.", "shared.", "math.")):
            self.st.fail(messages.module_value(span, text, "module-foreign"))
        self.st.fail(messages.module_value(span, text, "module-not-constant"))

    def py_constant(self, obj: Any, node: ast.AST) -> ir.Expr:
        span = self.st.span(node)
        if isinstance(obj, bool):
            return ir.Const(obj, BOOL, span, weak=True)
        if isinstance(obj, int):
            return ir.Const(int(obj), I64, span, weak=True)
        if isinstance(obj, float):
            return ir.Const(float(obj), F64, span, weak=True)
        self.st.unsupported(node, "using-value", help="kernels-read-module-constants", expr=ast.unparse(node))

    def visit_Name(self, node: ast.Name) -> ir.Expr:
        return self.load_name(node)

    def visit_Attribute(self, node: ast.Attribute) -> ir.Expr:
        if self.fn.records.rooted(node.value):  # a record's field: `p[i].x`, `r.v`
            base = self.expr(node.value)
            if isinstance(base, ir.RecordValue):
                return self.fn.records.member(base, node)
        if isinstance(node.value, ast.Name) and node.value.id in self.st.vars:
            base = self.load_name(node.value)
            if isinstance(base.ty, WitnessTy) and base.ty.rank >= 2 and base.ty.tile is None and node.attr in WITNESS_PARTS[base.ty.rank]:
                return ir.WitnessPart(base, node.attr, I64, self.st.span(node))
            self.st.type_error(node, "no-attribute", ty=base.ty, attr=node.attr)
        if isinstance(node.value, ast.Name) and node.value.id in self.st.slices and node.attr == "shape":
            self.st.unsupported(node, "shape-value", help="index-m-shape-0")
        return self.module_value(node)

    def visit_Subscript(self, node: ast.Subscript) -> ir.Expr:
        return self.subscript(node)

    def visit_Tuple(self, node: ast.Tuple) -> ir.Expr:
        self.st.unsupported(node, "tuple-value", help="tuples-2d-only")

    # -- arithmetic --------------------------------------------------------------------------
    def cast(self, e: ir.Expr, ty: ScalarTy) -> ir.Expr:
        if e.ty == ty:
            return e
        if isinstance(e, ir.Const) and isinstance(e.ty, ScalarTy):
            v = e.value
            if ty.is_float:
                return ir.Const(self._float_in_range(e, ty), ty, e.span, weak=e.weak)
            if ty.is_bool:
                return ir.Const(bool(v), ty, e.span, weak=e.weak)
            if isinstance(v, float):
                if v != v or v in (float("inf"), float("-inf")):
                    return ir.Cast(e, ty, e.span)
                v = int(v)
            return ir.Const(_wrap_int(int(v), ty), ty, e.span, weak=e.weak)
        if isinstance(e.ty, WitnessTy):
            if e.ty.rank != 1:
                raise PromotionError("witness-not-number", ty=e.ty, parts=" or ".join(f"`.{p}`" for p in WITNESS_PARTS[e.ty.rank]))
            e = ir.WitnessPart(e, "get", I64, e.span)
            if ty == I64:
                return e
        return ir.Cast(e, ty, e.span)

    def _float_in_range(self, e: ir.Const, ty: ScalarTy) -> float:
        """A literal's value as the float type `ty` holds it; `az-type` when a finite literal is
        out of the type's range (it would round to infinity: `10**400`, `1e39` as an f32)."""
        v = e.value
        try:
            f = float(v)
        except OverflowError:
            f = float("inf")
        if ty.is_half:
            out = round_half(f, ty.name) if f == f and abs(f) != float("inf") else f
        elif ty.bits == 32:
            try:
                out = struct.unpack("<f", struct.pack("<f", f))[0]
            except OverflowError:
                out = float("inf")
        else:
            out = f
        if abs(out) == float("inf") and not (isinstance(v, float) and abs(v) == float("inf")):
            text = repr(v) if not isinstance(v, int) or abs(v) < 10**24 else f"{str(v)[:12]}... ({len(str(abs(v)))} digits)"
            self.st.fail(messages.type_error(e.span, "literal-out-of-range", label="out of range", help="literal-out-of-range-help",
                                          value=text, ty=ty))
        return out if ty.is_half else f

    def numeric(self, e: ir.Expr, node: ast.AST) -> ir.Expr:
        """A scalar operand (a 1-D witness in arithmetic reads as its int)."""
        if isinstance(e.ty, WitnessTy) and e.ty.rank == 1:
            return ir.WitnessPart(e, "get", I64, e.span)
        if not isinstance(e.ty, ScalarTy):
            self.st.type_error(node, "not-a-number", ty=e.ty)
        return e

    def as_int(self, e: ir.Expr) -> ir.Expr:
        if isinstance(e.ty, WitnessTy):
            return ir.WitnessPart(e, "get", I64, e.span)
        return e

    def unify(self, a: ir.Expr, b: ir.Expr, node: ast.AST) -> ScalarTy:
        """The common type of two scalar operands, with weak literals adopting the other's type
        (an f8's promoted one, f16: `x + 0.1` does not round 0.1 to an f8)."""
        ta, tb = a.ty, b.ty
        assert isinstance(ta, ScalarTy) and isinstance(tb, ScalarTy)
        wa = isinstance(a, ir.Const) and a.weak
        wb = isinstance(b, ir.Const) and b.weak
        try:
            if wa and not wb:
                if ta.is_float and not tb.is_float:
                    return F64
                return _arith(tb if not (tb.is_bool and not ta.is_bool) else ta)
            if wb and not wa:
                if tb.is_float and not ta.is_float:
                    return F64
                return _arith(ta if not (ta.is_bool and not tb.is_bool) else tb)
            return promote(ta, tb)
        except PromotionError as exc:
            self.st.fail(messages.promotion_error(self.st.span(node), exc))

    def binop(self, op: str, a: ir.Expr, b: ir.Expr, node: ast.AST) -> ir.Expr:
        a = self.numeric(a, node)
        b = self.numeric(b, node)
        span = self.st.span(node)
        if isinstance(a, ir.Const) and isinstance(b, ir.Const) and a.weak and b.weak:
            folded = _fold(op, a.value, b.value)
            if folded is not None:
                return self.py_constant(folded, node) if not isinstance(folded, bool) else ir.Const(folded, BOOL, span, weak=True)
        ty = self.unify(a, b, node)
        if op in ("&", "|", "^") and a.ty == b.ty == BOOL:
            return ir.BinOp(op, a, b, BOOL, span)
        if ty.is_bool:
            ty = I64
        if op == "/":
            if not ty.is_float:
                ty = F64
            return ir.BinOp(op, self.cast(a, ty), self.cast(b, ty), ty, span)
        if op in ("<<", ">>", "&", "|", "^") and ty.is_float:
            self.st.type_error(node, "needs-integer-operands-found", op=op, left=a.ty, right=b.ty)
        if op in ("<<", ">>"):
            lty = a.ty if not (isinstance(a, ir.Const) and a.weak) else ty
            assert isinstance(lty, ScalarTy)
            if lty.is_bool:
                lty = I64
            return ir.BinOp(op, self.cast(a, lty), self.cast(b, lty), lty, span)
        if op == "**":
            if ty.is_float:
                return ir.MathCall("pow", (self.cast(a, ty), self.cast(b, ty)), ty, span)
            if isinstance(b, ir.Const) and isinstance(b.value, int) and 0 <= b.value <= 64:
                result: ir.Expr = ir.Const(1, ty, span)
                base = self.cast(a, ty)
                for _ in range(int(b.value)):
                    result = base if isinstance(result, ir.Const) else ir.BinOp("*", result, base, ty, span)
                return result
            self.st.unsupported(node, "integer-non-constant-negative", help="math-pow-floats")
        site = -1
        if op in ("//", "%") and ty.is_int:
            site = self.st.k.site(span, "divide", "")
        return ir.BinOp(op, self.cast(a, ty), self.cast(b, ty), ty, span, site)

    def visit_BinOp(self, node: ast.BinOp) -> ir.Expr:
        op = _BINOPS.get(type(node.op))
        if op is None:
            self.fn.generic_visit(node.op)
        return self.binop(op, self.expr(node.left), self.expr(node.right), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ir.Expr:
        span = self.st.span(node)
        if isinstance(node.op, ast.Not):
            inner = self.truth(self.expr(node.operand), node.operand)
            if isinstance(inner, ir.Const):
                return ir.Const(not inner.value, BOOL, span, weak=inner.weak)
            return ir.UnaryOp("not", inner, BOOL, span)
        e = self.numeric(self.expr(node.operand), node.operand)
        assert isinstance(e.ty, ScalarTy)
        if isinstance(node.op, ast.UAdd):
            return e
        if isinstance(e, ir.Const) and e.weak:
            v = e.value
            if isinstance(node.op, ast.USub):
                return self.py_constant(-v, node)
            if isinstance(node.op, ast.Invert) and not isinstance(v, float):
                return self.py_constant(~int(v), node)
        ty = I64 if e.ty.is_bool else _arith(e.ty)
        if isinstance(node.op, ast.USub):
            return ir.UnaryOp("-", self.cast(e, ty), ty, span)
        if isinstance(node.op, ast.Invert):
            if ty.is_float:
                self.st.type_error(node, "needs-integer-operand-found", ty=ty)
            return ir.UnaryOp("~", self.cast(e, ty), ty, span)
        self.fn.generic_visit(node.op)

    def truth(self, e: ir.Expr, node: ast.AST) -> ir.Expr:
        e = self.numeric(e, node)
        if e.ty == BOOL:
            return e
        if isinstance(e, ir.Const):
            return ir.Const(bool(e.value), BOOL, e.span, weak=e.weak)
        assert isinstance(e.ty, ScalarTy)
        return ir.Compare(("!=",), (e, ir.Const(0, e.ty, e.span)), BOOL, e.span, (e.ty,))

    def visit_BoolOp(self, node: ast.BoolOp) -> ir.Expr:
        op = "and" if isinstance(node.op, ast.And) else "or"
        values = tuple(self.truth(self.expr(v), v) for v in node.values)
        return ir.BoolOp(op, values, BOOL, self.st.span(node))

    def visit_Compare(self, node: ast.Compare) -> ir.Expr:
        span = self.st.span(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            c = self.contains(node.left, node.comparators[0], node)
            return c if isinstance(node.ops[0], ast.In) else ir.UnaryOp("not", c, BOOL, span)
        operands = [self.numeric(self.expr(o), o) for o in [node.left, *node.comparators]]
        ops: list[str] = []
        types: list[ScalarTy] = []
        for i, op in enumerate(node.ops):
            sym = _CMPOPS.get(type(op))
            if sym is None:
                self.fn.generic_visit(op)
            ops.append(sym)
            types.append(self.unify(operands[i], operands[i + 1], node))
        if all(isinstance(o, ir.Const) for o in operands):
            vals = [o.value for o in operands]  # type: ignore[union-attr]
            res = all(_fold(op, x, y) for op, x, y in zip(ops, vals, vals[1:], strict=False))
            return ir.Const(bool(res), BOOL, span, weak=True)
        return ir.Compare(tuple(ops), tuple(operands), BOOL, span, tuple(types))

    def contains(self, wnode: ast.expr, snode: ast.expr, node: ast.AST) -> ir.Expr:
        w = self.expr(wnode)
        if not (isinstance(snode, ast.Name) and snode.id in self.st.slices):
            self.st.unsupported(node, "other-than-witness-slice")
        sty = self.st.slices[snode.id]
        if isinstance(w.ty, WitnessTy) and w.ty.tile is not None and sty.kind.disjoint:
            self.st.fail(self.disjoint_error(node, snode.id, sty, "tested"))  # (the checker's code and span)
        self.fn.thread_tiles.reject_tile_use(w, wnode)
        if not isinstance(w.ty, WitnessTy) or w.ty.rank != sty.rank:
            want = f"Index{sty.rank}D"
            self.st.type_error(wnode, "needs-witness-found", name=snode.id, want=want, ty=w.ty)
        return ir.Contains(w, ir.SliceRef(snode.id, sty, self.st.span(snode)), BOOL, self.st.span(node))

    def visit_IfExp(self, node: ast.IfExp) -> ir.Expr:
        cond = self.truth(self.expr(node.test), node.test)
        # each arm is evaluated only where the test says (every backend branches), so the
        # test's facts narrow it as an `if` statement's do: `a[r, k] if 0 <= r < a.shape[0]
        # and ... else 0.0` needs no bounds check (an expression assigns nothing to kill)
        saved, saved_r = set(self.st.facts), self.st.rfacts
        try:
            self.st.facts = saved | self.fn.stmts.witness_guard_facts(node.test, negated=False)
            self.st.rfacts = saved_r | self.fn.ranges.guard_facts(cond, False)
            a = self.numeric(self.expr(node.body), node.body)
            self.st.facts = saved | self.fn.stmts.witness_guard_facts(node.test, negated=True)
            self.st.rfacts = saved_r | self.fn.ranges.guard_facts(cond, True)
            b = self.numeric(self.expr(node.orelse), node.orelse)
        finally:
            self.st.facts, self.st.rfacts = saved, saved_r
        ty = self.unify(a, b, node)
        return ir.IfExp(cond, self.cast(a, ty), self.cast(b, ty), ty, self.st.span(node))

    def coerce(self, e: ir.Expr, ty: Ty, node: ast.AST, what: str) -> ir.Expr:
        """`e` stored into a location of type `ty` (a local, an element, an argument)."""
        if e.ty == ty:
            return e
        if isinstance(ty, ScalarTy) and isinstance(e.ty, WitnessTy) and e.ty.rank == 1:
            e = ir.WitnessPart(e, "get", I64, e.span)
        if isinstance(ty, ScalarTy) and isinstance(e.ty, ScalarTy):
            if isinstance(e, ir.Const) and e.weak:
                if ty.is_int and isinstance(e.value, float):
                    self.st.type_error(node, "float-literal-stored-into", help="cast-it", what=what, ty=ty)
                return self.cast(e, ty)
            if implicitly_converts(e.ty, ty):
                return self.cast(e, ty)
            self.st.type_error(
                node,
                "store-into-type-without",
                help="convert-explicitly", got=e.ty, what=what, want=ty,
            )
        self.st.type_error(node, "expected-found", want=ty, what=what, got=e.ty)

    # -- calls -------------------------------------------------------------------------------


def _arith(ty: ScalarTy) -> ScalarTy:
    """The type an operand of `ty` computes in: an f8's is f16 (language/types.py `promote`)."""
    return F16 if ty.is_f8 else ty
