"""Typing of safe shared memory (`SharedTyper`, the typer's `FnTyper.shared_mem`, typer_fn.py).

* `buf = az.shared.array(shape, T)` (a constant shape of one or two axes; 0 is an error
  outside `with az.unsafe():`, where it still means dynamic shared memory),
  `buf = az.shared.dynamic_array(T)` (sized by the launch's `shared_mem`; every dynamic
  array of a kernel is one region) and `h = az.shared.atomic_array(shape, T)` (block-shared
  atomics: the methods of `AtomicSlice`, scope "block" by default).  Shared arrays and
  `az.syncthreads()` need no `unsafe`: the phase discipline (writes at the thread's own
  slot, reads of an array written in the same barrier interval at the reader's own slot)
  is the checker's `az-shared-race` (checker/safe_shared.py).
* `thread.index_in_block()` -> `LocalIndex` (the linear thread index in the block, over x,
  y and z) and `thread.index_in_block_2d()` -> `LocalIndex2D` (`.row` from y, `.col` from x;
  the block must have z = 1: a contract of domain 1 or 2 makes it so at launch, a literal
  3-D block with z > 1 is an error here, and otherwise the device checks it and faults).
  They index shared arrays only (a 2-D one as `tile[w]`); every access stays
  bounds-checked, so a shared array smaller than the block faults, never corrupts.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from anodize.language import ir, messages
from anodize.language.intrinsics import INTRINSICS, METHODS
from anodize.language.ranges import ZERO, Lin, Prover, type_range
from anodize.language.typer_effects import ATOMIC_SHAPES
from anodize.language.types import I64, VOID, ScalarTy, SharedTy, WitnessTy
from anodize.language.vocab import ATOMIC_INT_ONLY, ATOMIC_ORDERS, ATOMIC_ORDERS_FOR, SHARED_ATOMIC_SCOPES

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper

_AXES = {1: "`j`", 2: "`(row, col)` (or a `LocalIndex2D`)"}


__all__ = ["SharedTyper"]


class SharedTyper:
    """Safe shared memory of one function body (module docstring)."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

    def shared_ref(self, name: str, node: ast.AST) -> ir.SharedRef:
        """The shared array a body names `name`, under its kernel-unique name."""
        return ir.SharedRef(self.st.shared_unique.get(name, name), self.st.shared[name], self.st.span(node))

    def decl_args(self, call: ast.Call, variant: str) -> tuple[ast.expr | None, ast.expr, bool]:
        """(shape node or None for dynamic, dtype node, atomic) of a shared-array maker call."""
        if variant == "dynamic":
            if len(call.args) != 1 or call.keywords:
                self.st.fail(messages.type_error(self.st.span(call), "dynamic-array-takes-dtype"))
            return None, call.args[0], False
        if len(call.args) != 2 or call.keywords:
            self.st.fail(messages.type_error(self.st.span(call), "atomic-array-takes-shape" if variant == "atomic" else "shared-array-takes-shape"))
        return call.args[0], call.args[1], variant == "atomic"

    def check_decl(self, call: ast.Call, shape_node: ast.expr | None, ty: SharedTy) -> None:
        """A zero shape outside `unsafe` (dynamic memory has its own maker) and an atomic array's
        element type."""
        if shape_node is not None and 0 in ty.shape and (ty.atomic or not self.st.unsafe):
            self.st.fail(messages.type_error(self.st.span(shape_node), "shared-zero-shape", help="dynamic-array-spelling"))
        if ty.atomic and (ty.elem.is_bool or ty.elem.info.mem_bits not in (32, 64)):
            self.st.fail(messages.type_error(self.st.span(call), "shared-atomic-elem", elem=ty.elem))

    def local_witness(self, rank: int, node: ast.Call) -> ir.Expr:
        """`thread.index_in_block()` / `thread.index_in_block_2d()`."""
        shown = "thread.index_in_block" + ("_2d" if rank == 2 else "")
        self.fn.calls.arity(node, INTRINSICS[shown], shown)
        site = -1
        if rank == 2:
            contract = self.st.k.contract
            block = contract.block if contract is not None else None
            if block is not None and len(block) == 3 and block[2] != 1:
                self.st.fail(messages.type_error(self.st.span(node), "local-witness-2d-block", help="local-witness-2d-help", block=tuple(block)))
            # a contract of domain 1 or 2 (checked at launch: every dimension beyond it is 1) or a
            # literal block with z = 1 fixes z = 1; otherwise the device checks it (fail closed)
            fixed = contract is not None and (contract.domain <= 2 or (block is not None and len(block) < 3) or (block is not None and block[2] == 1))
            if not fixed:
                site = self.st.k.site(self.st.span(node), "thread.index_in_block_2d() needs a block with z = 1", "")
        return ir.MakeWitness(rank, site, WitnessTy(rank, local=True), self.st.span(node))

    def shared_index(self, arr: ir.SharedRef, e: ir.Expr, node: ast.expr) -> tuple[ir.Expr, ...] | None:
        """A shared array indexed by a block-local witness: its parts, one per axis (None when `e`
        is no local witness)."""
        ty = e.ty
        if not (isinstance(ty, WitnessTy) and ty.local):
            return None
        rank = len(arr.ty.shape)
        if ty.rank != rank:
            self.st.fail(messages.type_error(self.st.span(node), "local-witness-rank", ty=ty, rank=ty.rank, name=arr.name.split(".")[0], got=rank))
        if rank == 1:
            return (ir.WitnessPart(e, "get", I64, e.span),)
        return (ir.WitnessPart(e, "row", I64, e.span), ir.WitnessPart(e, "col", I64, e.span))

    def _part_bounds(self, arr: ir.SharedRef, index: tuple[ir.Expr, ...]) -> dict[str, int] | None:
        """Each block-local witness part's extent (`get`, `row`, `col`) under the contract's
        literal block, or None where no static access can be proven (no literal block, a
        dynamic array, an index of another rank)."""
        contract = self.st.k.contract
        block = contract.block if contract is not None else None
        if block is None or arr.ty.dynamic or len(index) != len(arr.ty.shape):
            return None
        bx, by, bz = (tuple(block) + (1, 1, 1))[:3]
        return {"get": bx * by * bz, "row": by, "col": bx}

    def witness_in_range(self, arr: ir.SharedRef, index: tuple[ir.Expr, ...]) -> bool:
        """A static shared access whose every axis is in range: a part of a block-local witness
        (`w.get()`, `w.row`, `w.col`) within the contract's literal block on that axis (the launch
        enforces the contract's block, and a literal block makes the witness exact, never
        poisoned), or an index the range prover bounds (`kk` of `for kk in range(16)`); at least
        one axis a witness part (the rest is `shared_in_range`'s)."""
        bound = self._part_bounds(arr, index)
        if bound is None:
            return False
        seen = False
        for e, extent in zip(index, arr.ty.shape):
            if isinstance(e, ir.WitnessPart) and isinstance(e.witness.ty, WitnessTy) and e.witness.ty.local:
                if bound[e.part] > extent:
                    return False
                seen = True
            elif not self.fn.ranges.index_in_range((e,), [Lin(ZERO, extent)]):
                return False
        return seen

    def slots_in_range(self, arr: ir.SharedRef, index: tuple[ir.Expr, ...]) -> bool:
        """A static shared access whose every axis lies in the array by interval arithmetic over
        machine integers: sums and products of block-local witness parts (within the contract's
        literal block, as `witness_in_range`), constants, the variable of an enclosing `for j in range(4)`
        of constants that its body never assigns, and integers the range prover bounds, each
        subexpression fitting its type, so
        nothing wraps: the multi-slot forms `s[w + j * 256]`, `tile[w.row + j * 8, w.col]`."""
        bound = self._part_bounds(arr, index)
        if bound is None:
            return False
        p = self.fn.ranges.prover()
        for e, extent in zip(index, arr.ty.shape):
            got = self._interval(e, bound, p)
            if got is None or got[0] < 0 or got[1] > extent - 1:
                return False
        return True

    def _interval(self, e: ir.Expr, bound: dict[str, int], p: Prover) -> tuple[int, int] | None:
        """`(lo, hi)` of `e`'s machine value (equal to the mathematical one: every node fits its
        type), or None."""
        ty = e.ty
        if not (isinstance(ty, ScalarTy) and ty.is_int):
            return None
        out: tuple[int, int] | None
        if isinstance(e, ir.WitnessPart) and isinstance(e.witness.ty, WitnessTy) and e.witness.ty.local:
            out = (0, bound[e.part] - 1)
        elif isinstance(e, ir.BinOp) and e.op in ("+", "*"):
            a, b = self._interval(e.left, bound, p), self._interval(e.right, bound, p)
            if a is None or b is None:
                return None
            if e.op == "+":
                out = (a[0] + b[0], a[1] + b[1])
            else:
                corners = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
                out = (min(corners), max(corners))
        elif isinstance(e, ir.Cast):
            out = self._interval(e.value, bound, p)
        elif isinstance(e, ir.Local) and e.name in self.st.loop_ranges:
            out = self.st.loop_ranges[e.name]
        else:
            lin = self.fn.ranges.linear(e, p)
            out = p.bounds(lin) if lin is not None else None
        if out is None:
            return None
        lo, hi = type_range(ty)
        return out if lo <= out[0] and out[1] <= hi else None

    def on_slice(self, e: ir.Expr, node: ast.expr, name: str) -> None:
        """A block-local witness never indexes a slice (it is the same in every block)."""
        if isinstance(e.ty, WitnessTy) and e.ty.local:
            self.st.fail(messages.type_error(self.st.span(node), "local-witness-slice", help="local-witness-global", ty=e.ty, name=name))

    def plain_access(self, name: str, node: ast.AST, access: str) -> None:
        """`h[j]` of a block-shared atomic array: only its methods reach it."""
        if self.st.shared[name].atomic:
            self.st.fail(messages.type_error(self.st.span(node), "shared-atomic-plain", help="shared-atomic-methods", name=name, access=access))

    def takes_keywords(self, node: ast.Call) -> bool:
        f = node.func
        return (
            isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id in self.st.shared
            and self.st.shared[f.value.id].atomic
            and (decl := METHODS.get(("shared_atomic", f.attr))) is not None
            and bool(decl.keywords)
        )

    def atomic_method(self, name: str, method: str, node: ast.Call) -> ir.Expr:
        """`h.add(j, v)` and the other `AtomicSlice` methods on a block-shared atomic array."""
        sty: SharedTy = self.st.shared[name]
        span = self.st.span(node)
        if not sty.atomic:
            self.st.fail(messages.type_error(self.st.span(node), "no-method-local", ty=sty, attr=method))
        decl = METHODS.get(("shared_atomic", method))
        if decl is None:
            self.st.fail(messages.type_error(self.st.span(node), "shared-atomic-method", method=method))
        scope, order = self.options(name, method, node)
        shape = ATOMIC_SHAPES[decl.exact_arity]
        if not decl.takes(len(node.args)) or any(isinstance(a, ast.Starred) for a in node.args):
            count = f"{len(node.args)} argument{'s' if len(node.args) != 1 else ''}"
            self.st.fail(messages.type_error(self.st.span(node), "atomic-arity", name=name, method=method, shape=shape, count=count))
        elem = sty.elem
        if method in ATOMIC_INT_ONLY and elem.is_float:
            self.st.fail(messages.type_error(self.st.span(node), "atomic-int-only", method=method, name=name, elem=elem))
        arr = self.shared_ref(name, node.func.value)  # type: ignore[attr-defined]
        a0 = node.args[0]
        rank = len(sty.shape)
        if rank == 2 and isinstance(a0, ast.Tuple) and len(a0.elts) == 2:
            index = tuple(self.fn.exprs.as_index(self.fn.expr(x), x) for x in a0.elts)
        else:
            e = self.fn.expr(a0)
            index = self.shared_index(arr, e, a0)  # type: ignore[assignment]
            if index is None:
                if rank != 1:
                    self.st.fail(messages.type_error(self.st.span(a0), "shared-atomic-index", name=name, rank=rank, method=method, axes=_AXES[rank]))
                index = (self.fn.exprs.as_index(e, a0),)
        what = f"an element of `{name}`"
        value = None if method == "load" else self.fn.exprs.coerce(self.fn.expr(node.args[-1]), elem, node.args[-1], what)
        expected = self.fn.exprs.coerce(self.fn.expr(node.args[1]), elem, node.args[1], what) if method == "compare_exchange" else None
        proven = self.fn.exprs.shared_in_range(arr, index)
        site = -1 if proven else self.st.k.site(span, "atomic", f"shared {name}")
        self.st.k.uses_shared = True
        ty = VOID if method == "store" else elem
        return ir.SharedAtomic(method.rstrip("_"), arr, index, value, not proven, site, ty, span, expected, scope, order)

    def options(self, name: str, method: str, node: ast.Call) -> tuple[str, str]:
        """`scope=` (block, the default; device; system) and `order=` of a block-shared atomic."""
        got = {"scope": "block", "order": "relaxed"}
        for kw in node.keywords:
            if kw.arg is None:
                self.st.fail(messages.unsupported(self.st.span(kw), "argument-unpacking"))
            if kw.arg not in got:
                self.st.fail(messages.unsupported(self.st.span(kw), "atomic-keyword", help="atomic-keywords", kw=kw.arg))
            v = kw.value
            text = v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else None
            choices = "use one of " + ", ".join(f'`{kw.arg}="{x}"`' for x in (SHARED_ATOMIC_SCOPES if kw.arg == "scope" else ATOMIC_ORDERS))
            if text is None:
                self.st.fail(messages.type_error(self.st.span(v), "keyword-string-literal", help="atomic-choices", kw=kw.arg, choices=choices))
            assert text is not None and kw.arg is not None
            if kw.arg == "scope" and text not in SHARED_ATOMIC_SCOPES:
                self.st.fail(messages.type_error(self.st.span(v), "atomic-unknown-scope", help="atomic-choices", text=text, choices=choices))
            if kw.arg == "order":
                if text not in ATOMIC_ORDERS:
                    self.st.fail(messages.type_error(self.st.span(v), "atomic-unknown-order", help="atomic-choices", text=text, choices=choices))
                fits = ATOMIC_ORDERS_FOR.get(method, ATOMIC_ORDERS)
                if text not in fits:
                    self.st.fail(messages.atomic_order(self.st.span(kw), method, text, fits))
            got[kw.arg] = text
        return got["scope"], got["order"]
