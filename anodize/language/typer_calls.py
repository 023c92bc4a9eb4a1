"""The typer's calls: intrinsics (casts, builtins, math, witnesses, warp operations),
slice methods and `@az.func` helpers (typed per call, inlined by the lowering).  `CallTyper` is
the typer's collaborator for them (`FnTyper.calls`, typer_fn.py)."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from anodize.language import ir, messages
from anodize.language.intrinsics import INTRINSICS, WRITE_UNCHECKED, Intrinsic, method
from anodize.language.record_types import RecordTy
from anodize.language.foreign_decl import ForeignDecl
from anodize.language.symbols import Symbol
from anodize.language.types import BOOL, BY_NAME, F16, F64, I32, I64, U32, LocalArrayTy, ScalarTy, SharedTy, SliceTy, Ty, WitnessTy, promote
from anodize.language.vocab import MATH_INT_EXPONENT, MATH_PREDICATES, RAW_IDS, TILE_MAKER, WITNESS_MAKERS

from anodize.language.typer_base import _Silent

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper


# the 1-D witnesses, whose `.get()` is their index
_ONE_D = (WitnessTy(1), WitnessTy(1, block=True), WitnessTy(1, local=True))


def _receiver(ty: WitnessTy) -> str:
    """The kind of value a witness is to its methods (language/intrinsics.py `METHODS`)."""
    return "thread_tile" if ty.tile is not None else "local_witness" if ty.local else "witness"


class CallTyper:
    """Calls of one function body (`visit_Call`)."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

    def visit_Call(self, node: ast.Call) -> ir.Expr:
        span = self.st.span(node)
        f = node.func
        ctag = self.fn.names.tag(f) if isinstance(f, (ast.Name, ast.Attribute)) else None
        if ctag is not None and ctag[0] == "collective":  # takes `inclusive=`: before the keyword check
            return self.fn.collectives.collective(ctag[1], node)
        if isinstance(f, (ast.Name, ast.Attribute)) and (rs := self.fn.names.sym(f)).kind == "record":  # `Rec(x=..., v=...)`
            return self.fn.records.construct(self.fn.names.record_type(rs, f), node)
        if node.keywords and not self.fn.effects.takes_keywords(node):
            self.st.unsupported(node.keywords[0], "keyword-arguments-kernel-call", help="atomic-keywords-only")
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            owner = f.value.id
            if owner in self.st.vars and isinstance(wty := self.st.vars[owner], WitnessTy):
                decl = method(_receiver(wty), f.attr)
                if decl is not None and decl.kind == "tile_at":
                    return self.fn.thread_tiles.tile_at(f.value, node, decl)
                if decl is not None and decl.kind == "tile_io":
                    return self.fn.thread_tiles.tile_io(f.value, node, decl)
                if decl is not None and decl.kind == "witness_get" and decl.takes(len(node.args)) and wty in _ONE_D:  # `i.get()`
                    return ir.WitnessPart(self.fn.exprs.load_name(f.value), "get", I64, span)
                self.st.type_error(node, "no-method-local", ty=wty, attr=f.attr)
            if owner in self.st.slices:
                return self.slice_method(owner, f.attr, node)
            if owner in self.st.shared:  # a block-shared atomic array's methods
                return self.fn.shared_mem.atomic_method(owner, f.attr, node)
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Call) and (decl := method("witness", f.attr)) is not None and decl.kind == "witness_get" and decl.takes(len(node.args)):
            # `thread.index_1d().get()` in one expression: the witness's index, as through a name
            inner = self.fn.expr(f.value)
            if inner.ty in _ONE_D:
                return ir.WitnessPart(inner, "get", I64, span)
            self.st.type_error(node, "no-method-local", ty=inner.ty, attr=f.attr)
        if isinstance(f, ast.Attribute) and method("slice", f.attr) is WRITE_UNCHECKED:
            self.st.unsupported(node, "write-unchecked-value")
        obj = self.fn.names.sym(f)
        if obj.kind == "missing":
            root = f
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in self.st.failed_names:
                raise _Silent  # a method of a local whose assignment was refused: reported there
            self.st.type_error(f, "callee-undefined", callee=ast.unparse(f))
        if obj.kind == "typevar":  # `T(x)`: a cast to this specialisation's scalar
            return self.cast_call(self.fn.names.resolve_type(f, "the cast"), node)  # type: ignore[arg-type]
        if obj.kind == "function" and obj.fn_kind == "func":
            return self.helper_call(obj, node)
        if obj.kind == "function" and obj.fn_kind == "kernel":
            self.st.unsupported(node, "calling-kernel-from-kernel", help="make-callee-az-func")
        if obj.kind == "foreign" and obj.foreign is not None:
            return self.foreign_call(obj.name, obj.foreign, node)
        tag = obj.tag if obj.kind == "intrinsic" else None
        if tag is None or tag[0] == "decorator":
            self.st.unsupported(node, "calling", help="kernels-call-az-func", callee=ast.unparse(f))
        kind = tag[0]
        if kind == "scalar":
            return self.cast_call(BY_NAME[tag[1]], node)
        if kind == "typecast":  # `cast(T, x)`: converts `x` to `T` (a type variable or a scalar)
            if len(node.args) != 2:
                self.st.type_error(node, "cast-two-arguments", help="cast-spelling")
            ty = self.fn.names.resolve_type(node.args[0], "the cast")
            if not isinstance(ty, ScalarTy):
                self.st.type_error(node.args[0], "cast-to-scalar", ty=ty)
            one = ast.Call(func=node.func, args=[node.args[1]], keywords=[])
            return self.cast_call(ty, ast.copy_location(one, node))
        if kind == "bitcast":
            return self.bitcast_call(node)
        if kind == "builtin":
            return self.builtin(tag[1], node)
        if kind == "math":
            return self.math_call(tag[1], node)
        if kind == "witness":
            return self.witness(tag[1], node)
        if kind == "local_witness":  # thread.index_in_block(), thread.index_in_block_2d()
            return self.fn.shared_mem.local_witness(int(tag[1]), node)
        if kind == "block_witness":
            return self.fn.collectives.block_witness(node)
        if kind == "block_leader":
            return self.fn.collectives.block_leader(node)
        if kind == "thread_tile":  # thread.tile_2d(TR, TC[, GR, GC])
            return self.fn.thread_tiles.make_tile(node)
        if kind == "raw":
            self.st.need_unsafe(node, f"`thread.{tag[1]}()`")
            self.arity(node, INTRINSICS[obj.name])
            reg, axis = RAW_IDS[tag[1]]
            return ir.RawId(reg, axis, I32, span)
        if kind == "warp":
            return self.warp(tag[1], node)
        if kind == "barrier":
            self.st.unsupported(node, "syncthreads-value")
        if kind == "fence":
            self.st.unsupported(node, "fence-value", call=ast.unparse(f))
        if kind in ("print", "breakpoint"):
            self.st.unsupported(node, "statement-call-value", help="statement-call-own", call=kind)
        if kind == "shared_array":
            self.st.unsupported(node, "shared-array-outside-plain")
        if kind == "local_array":
            self.st.unsupported(node, "local-array-outside-plain")
        self.st.unsupported(node, "calling", callee=ast.unparse(f))

    def arity(self, node: ast.Call, want: int | Intrinsic, name: str = "") -> None:
        """`node` takes `want` positional arguments: a count, or an intrinsic's declared arity."""
        n = want if isinstance(want, int) else want.exact_arity
        if len(node.args) != n:
            self.st.type_error(node, "arity", name=name or ast.unparse(node.func), n=n, s='s' if n != 1 else '', got=len(node.args))

    def cast_call(self, ty: ScalarTy, node: ast.Call) -> ir.Expr:
        self.arity(node, 1, ty.name)
        e = self.fn.exprs.numeric(self.fn.expr(node.args[0]), node.args[0])
        if ty.is_bool:
            return self.fn.exprs.truth(e, node)
        if isinstance(e, ir.Const) and isinstance(e.value, float) and ty.is_int and (e.value != e.value or abs(e.value) == float("inf")):
            return ir.Cast(e, ty, self.st.span(node))
        out = self.fn.exprs.cast(e, ty)
        if isinstance(out, ir.Const):
            return ir.Const(out.value, ty, self.st.span(node), weak=False)
        return out

    def bitcast_call(self, node: ast.Call) -> ir.Expr:
        """`az.bitcast(x, T)`: the bits of `x` read as `T`, a scalar of `x`'s size.  A weak
        literal takes its default type first (`1.0` is an f64, `1` an i64)."""
        if len(node.args) != 2:
            self.st.type_error(node, "bitcast-two-arguments")
        ty = self.fn.names.resolve_type(node.args[1], "the bitcast")
        if not isinstance(ty, ScalarTy):
            self.st.type_error(node.args[1], "bitcast-to-scalar", ty=ty)
        e = self.fn.exprs.numeric(self.fn.expr(node.args[0]), node.args[0])
        src = e.ty
        assert isinstance(src, ScalarTy)
        if src.is_bool or ty.is_bool:
            self.st.type_error(node, "bitcast-bool", help="bitcast-bool-help")
        if src.bits != ty.bits:
            self.st.type_error(node, "bitcast-sizes", help="bitcast-same-size", src=src, sb=src.bits, dst=ty, db=ty.bits)
        if src == ty:
            return e
        return ir.Bitcast(e, ty, self.st.span(node))

    def builtin(self, name: str, node: ast.Call) -> ir.Expr:
        span = self.st.span(node)
        if name == "len":
            self.arity(node, INTRINSICS["builtins.len"], "len")
            a = node.args[0]
            if isinstance(a, ast.Name) and a.id in self.st.slices:
                return ir.Len(ir.SliceRef(a.id, self.st.slices[a.id], self.st.span(a)), 0, I64, span)
            if isinstance(a, ast.Name) and a.id in self.st.arrays:  # a local array: its first axis
                return ir.Const(self.st.arrays[a.id].shape[0], I64, span, weak=True)
            if isinstance(a, ast.Name) and a.id in self.st.shared and not self.st.shared[a.id].dynamic:
                return ir.Const(self.st.shared[a.id].shape[0], I64, span, weak=True)
            if isinstance(a, (ast.Name, ast.Attribute)):
                table = self.fn.names.sym(a)
                if table.kind == "table" and table.table is not None:
                    return ir.Const(len(table.table.values), I64, span, weak=True)
            self.st.type_error(a, "len-takes-slice-parameter")
        if name == "abs":
            self.arity(node, INTRINSICS["builtins.abs"], "abs")
            e = self.fn.exprs.numeric(self.fn.expr(node.args[0]), node.args[0])
            assert isinstance(e.ty, ScalarTy)
            if isinstance(e, ir.Const) and e.weak:
                return self.fn.exprs.py_constant(abs(e.value), node)
            ty = I64 if e.ty.is_bool else e.ty
            if ty.is_int and not ty.signed:
                return self.fn.exprs.cast(e, ty)
            return ir.UnaryOp("abs", self.fn.exprs.cast(e, ty), ty, span)
        if name in ("min", "max"):
            if len(node.args) < 2:
                self.st.type_error(node, "takes-two-more-arguments", name=name)
            acc = self.fn.exprs.numeric(self.fn.expr(node.args[0]), node.args[0])
            for a in node.args[1:]:
                b = self.fn.exprs.numeric(self.fn.expr(a), a)
                if isinstance(acc, ir.Const) and isinstance(b, ir.Const) and acc.weak and b.weak:
                    acc = self.fn.exprs.py_constant((min if name == "min" else max)(acc.value, b.value), node)
                    continue
                ty = self.fn.exprs.unify(acc, b, node)
                if ty.is_bool:
                    ty = I64
                acc = ir.BinOp(name, self.fn.exprs.cast(acc, ty), self.fn.exprs.cast(b, ty), ty, span)
            return acc
        self.st.unsupported(node, "call-here", help="range-allowed-loop-s", name=name)

    def math_call(self, name: str, node: ast.Call) -> ir.Expr:
        self.arity(node, INTRINSICS[f"math.{name}"], f"math.{name}")
        args = [self.fn.exprs.numeric(self.fn.expr(a), a) for a in node.args]
        span = self.st.span(node)
        if name in MATH_INT_EXPONENT:  # ldexp(x, n): a float and an integer exponent, kept as it is
            e = args[-1]
            assert isinstance(e.ty, ScalarTy)
            if e.ty.is_float:
                self.st.type_error(node.args[-1], "math-int-exponent", name=name)
            args[-1] = self.fn.exprs.cast(e, I32) if e.ty.is_bool or (isinstance(e, ir.Const) and e.weak) else e
            x = args[0]
            ty = x.ty if x.ty.is_float and not (isinstance(x, ir.Const) and x.weak) else F64  # type: ignore[union-attr]
            ty = F16 if ty.is_f8 else ty  # an f8 computes as an f16 (types.py `promote`)
            return ir.MathCall(name, (self.fn.exprs.cast(x, ty), args[-1]), ty, span)  # type: ignore[arg-type]
        strong = [a.ty for a in args if not (isinstance(a, ir.Const) and a.weak) and a.ty.is_float]  # type: ignore[union-attr]
        ty = F64
        if strong:
            ty = strong[0]  # type: ignore[assignment]
            for t in strong[1:]:
                ty = promote(ty, t)  # type: ignore[arg-type]
            ty = F16 if ty.is_f8 else ty
        cast = tuple(self.fn.exprs.cast(a, ty) for a in args)
        return ir.MathCall(name, cast, BOOL if name in MATH_PREDICATES else ty, span)

    def witness(self, name: str, node: ast.Call) -> ir.Expr:
        if name == "grid_stride":
            self.st.unsupported(node, "thread-grid-stride-outside")
        self.arity(node, INTRINSICS[f"thread.{name}"], f"thread.{name}")
        rank = WITNESS_MAKERS[name]
        self.note_rank(rank, node)
        return ir.MakeWitness(rank, self.rank_site(node), WitnessTy(rank), self.st.span(node))

    def note_rank(self, rank: int, node: ast.AST) -> None:
        c = self.st.k.contract
        if c is not None and c.domain != rank:
            called = ast.unparse(node.func) if isinstance(node, ast.Call) else ""
            maker = "thread.grid_stride()" if called.endswith("grid_stride") else f"thread.index_{rank}d()"
            if called.endswith("block_witness_1d"):
                maker = "thread.block_witness_1d()"
            if called.endswith(TILE_MAKER):
                maker = f"thread.{TILE_MAKER}()"
            self.st.fail(messages.index_domain(self.st.span(node), maker, rank, c.domain, None))
        self.st.k.ranks.add(rank)

    def rank_site(self, node: ast.AST) -> int:
        if self.st.k.contract is not None:
            return -1
        return self.st.k.site(self.st.span(node), "rank", "")

    def warp(self, name: str, node: ast.Call) -> ir.Expr:
        self.st.need_unsafe(node, f"`warp.{name}`")
        self.st.k.uses_warp = True
        span = self.st.span(node)
        decl = INTRINSICS[f"warp.{name}"]
        if decl.varies == "warp":  # a vote: one predicate, the same result on every lane
            self.arity(node, decl, f"warp.{name}")
            pred = self.fn.exprs.truth(self.fn.expr(node.args[0]), node.args[0])
            return ir.WarpOp(name, (pred,), U32 if name == "ballot" else BOOL, span)
        self.arity(node, decl, f"warp.{name}")
        v = self.fn.exprs.numeric(self.fn.expr(node.args[0]), node.args[0])
        k = self.fn.exprs.numeric(self.fn.expr(node.args[1]), node.args[1])
        assert isinstance(v.ty, ScalarTy) and isinstance(k.ty, ScalarTy)
        if k.ty.is_float:
            self.st.type_error(node.args[1], "lane-argument-warp-must", name=name)
        ty = I64 if v.ty.is_bool else v.ty
        if ty.bits < 32:
            wide = "f32" if ty.is_float else "i32"
            self.st.type_error(node.args[0], "warp-narrow-value", help="convert-it-and-back", name=name, ty=ty, wide=wide)
        return ir.WarpOp(name, (self.fn.exprs.cast(v, ty), self.fn.exprs.cast(k, I32)), ty, span)

    def slice_method(self, name: str, attr: str, node: ast.Call) -> ir.Expr:
        if method("slice", attr) is WRITE_UNCHECKED:
            self.st.unsupported(node, "write-unchecked-value")
        return self.fn.effects.atomic_method(name, attr, node)

    def foreign_call(self, name: str, decl: ForeignDecl, node: ast.Call) -> ir.Expr:
        """`f(x, y)` of a foreign device function: its arguments cast to the declared scalar types
        as a helper's are (foreign_decl.py)."""
        if decl.error == "literal":
            self.st.unsupported(node, "foreign-decl-literal", help="foreign-decl-form", name=name)
        if decl.error == "scalars":
            self.st.unsupported(node, "foreign-decl-scalars", help="foreign-decl-form", name=name)
        if len(node.args) != len(decl.params):
            self.st.type_error(node, "helper-arity", hname=name, n=len(decl.params), got=len(node.args))
        args = []
        for (pname, scalar), n in zip(decl.params, node.args, strict=True):
            e = self.fn.expr(n)
            if not isinstance(e.ty, ScalarTy):
                self.st.type_error(n, "helper-arg-type", hname=name, want=scalar, arg=pname, ty=e.ty)
            args.append(self.fn.exprs.coerce(e, BY_NAME[scalar], n, f"parameter `{pname}`"))
        return ir.ForeignCall(name, decl.symbol, tuple(args), BY_NAME[decl.ret], self.st.span(node))

    def helper_call(self, helper: Symbol, node: ast.Call) -> ir.Expr:
        args = [self.fn.expr(a) for a in node.args]
        fdef = helper.fn
        assert fdef is not None
        hname = fdef.name
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            self.st.fail(messages.signature(self.st.span(fdef), "helper-takes-plain-positional"))
        if len(a.args) != len(args):
            self.st.type_error(node, "helper-arity", hname=hname, n=len(a.args), got=len(args))
        sub = self.fn.signature_names(fdef)
        ptypes: dict[str, Ty] = {}
        final: list[ir.Expr] = []
        for p, e, n in zip(a.args, args, node.args, strict=True):
            want = sub.resolve_type(p.annotation, f"parameter `{p.arg}`") if p.annotation is not None else None
            if isinstance(e.ty, SliceTy):
                if want is not None and want != e.ty:
                    self.st.type_error(n, "helper-arg-type", hname=hname, want=want, arg=p.arg, ty=e.ty)
                ptypes[p.arg] = e.ty
                final.append(e)
                continue
            if isinstance(e, ir.RecordValue) or isinstance(want, RecordTy):  # a record: its leaves (typer_records.py)
                if not isinstance(e, ir.RecordValue) or (want is not None and want != e.ty):
                    self.st.type_error(n, "helper-arg-type", hname=hname, want=want, arg=p.arg, ty=e.ty)
                ptypes[p.arg] = e.ty
                final.extend(e.leaves)
                continue
            if isinstance(e.ty, SharedTy):
                self.st.unsupported(n, "passing-shared-array-helper")
            self.fn.thread_tiles.reject_tile_arg(e, n, want, p.arg, hname)  # a tile stays in its kernel
            if isinstance(e.ty, LocalArrayTy) or isinstance(want, LocalArrayTy):  # by reference
                if not isinstance(e.ty, LocalArrayTy) or (want is not None and not (isinstance(want, LocalArrayTy) and want.elem == e.ty.elem)):
                    self.st.type_error(n, "helper-arg-type", help="local-array-param-help", hname=hname, want=want, arg=p.arg, ty=e.ty)
                ptypes[p.arg] = e.ty
                final.append(e)
                continue
            if want is None:
                want = e.ty if not (isinstance(e, ir.Const) and e.weak) else e.ty
            final.append(self.fn.exprs.coerce(e, want, n, f"parameter `{p.arg}`"))
            ptypes[p.arg] = want
        # proofs flow into the helper: a proven (witness, slice) pair passed as two parameters
        facts: set[tuple[str, str]] = set()
        for pw, nw in zip(a.args, node.args, strict=True):
            if isinstance(ptypes[pw.arg], WitnessTy) and isinstance(nw, ast.Name):
                for ps, ns in zip(a.args, node.args, strict=True):
                    if isinstance(ptypes[ps.arg], SliceTy) and isinstance(ns, ast.Name) and (nw.id, ns.id) in self.st.facts:
                        facts.add((pw.arg, ps.arg))
        key = (fdef, tuple(ptypes.values()), frozenset(facts))
        fir = self.st.k.helpers.get(key)
        if fir is None:
            if fdef in self.st.k.stack:
                self.st.unsupported(node, "recursion-calls-itself", hname=hname)
            ret = sub.resolve_type(fdef.returns, "the return") if fdef.returns is not None else None
            fir = self.fn.compile_helper(fdef, ptypes, ret, facts)
            self.st.k.helpers[key] = fir
        if id(fir) in self.st.k.record_returns and node is not self.st.record_call_site:
            self.st.unsupported(node, "record-call-here", help="record-call-bind", name=hname)
        return ir.Call(fir, tuple(final), fir.ret, self.st.span(node))
