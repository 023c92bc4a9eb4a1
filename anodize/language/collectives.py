"""Typing of the safe collectives and of per-block outputs (`CollectiveTyper`, the typer's
`FnTyper.collectives`, typer_fn.py).

* `s = az.warp.reduce(v, op)`, `az.block.reduce(v, op)`, `az.block.scan(v, op,
  inclusive=True)`, `az.block.broadcast(v, src)`: only as the whole value of an
  assignment to a local name, so every thread that reaches the statement evaluates it
  (no short-circuit or conditional expression can skip it).  A block collective needs
  the contract's literal `block`, a multiple of 32 threads (az-warp-divergence here; for
  `warp.reduce` the checker's warp rule asks the same); it uses the compiler's
  scratch buffer (`vocab.COLLECTIVE_SCRATCH`, one slot per warp) and ends with a barrier.
  Whether every thread reaches it is the checker's (az-barrier-divergence,
  az-warp-divergence).
* `thread.block_witness_1d()`: this block's index as a witness over a `DisjointSlice`
  with one element per block; every access through it must be lexically under
  `if thread.is_block_leader():` (thread (0, 0, 0) of the block), otherwise
  az-disjoint-index.  `thread.is_block_leader()` is `tid.x == 0 and tid.y == 0 and tid.z == 0`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from anodize.language import ir, messages
from anodize.language.intrinsics import INTRINSICS
from anodize.language.types import BOOL, I32, I64, ScalarTy, SharedTy, WitnessTy
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, static_shared_bytes
from anodize.language.vocab import (
    BLOCK_COLLECTIVES,
    COLLECTIVE_OPS,
    COLLECTIVE_SCRATCH,
    COLLECTIVE_SCRATCH_SLOTS,
)

if TYPE_CHECKING:
    from anodize.language.typer_fn import FnTyper

# two halves of one slot per warp: the GPU lowering alternates between them, so a collective
# needs no barrier after its reads of the scratch (codegen/llvm/collectives.py); the CPU uses the first
SCRATCH_TY = SharedTy(I64, (2 * COLLECTIVE_SCRATCH_SLOTS,))


class CollectiveTyper:
    """The safe collectives and per-block outputs of one function body (module docstring)."""

    def __init__(self, fn: FnTyper):
        self.fn = fn
        self.st = fn.st

    def collective(self, name: str, node: ast.Call) -> ir.Expr:
        """Type one collective call."""
        shown = f"az.{name}"
        if node is not self.st.collective_site:
            self.st.fail(messages.type_error(self.st.span(node), "collective-statement", help="collective-assign", name=shown))
        inclusive = True
        decl = INTRINSICS[name]
        for kw in node.keywords:
            if kw.arg not in decl.keywords:  # `block.scan`'s `inclusive=`
                self.st.fail(messages.unsupported(self.st.span(kw), "keyword-arguments-kernel-call", help="collective-inclusive-kw"))
            flag = kw.value.value if isinstance(kw.value, ast.Constant) else None
            if not isinstance(flag, bool):
                self.st.fail(messages.type_error(self.st.span(kw.value), "collective-inclusive", help="collective-inclusive-kw"))
            inclusive = bool(flag)
        self.fn.calls.arity(node, decl, shown)  # every collective declares it
        # a block collective needs the block's size (its scratch slots, its warp count); for
        # `warp.reduce` the checker asks for whole warps, as for every full-warp operation
        threads = self.block_threads(name, node) if name in BLOCK_COLLECTIVES else 0
        v = self.fn.exprs.numeric(self.fn.expr(node.args[0]), node.args[0])
        ty = v.ty
        assert isinstance(ty, ScalarTy)
        if not ty.is_bool and ty.bits < 32:  # 8/16-bit ints and the half types: shuffles move 32 or 64 bits
            wide = "f32" if ty.is_float else "i32"
            self.st.fail(messages.type_error(self.st.span(node.args[0]), "collective-narrow-value", help="convert-it-and-back", name=shown, ty=ty, wide=wide))
        op, src = "", 0
        if name == "block.broadcast":
            got = self.fn.names.const_value(node.args[1])
            if type(got) is not int or not 0 <= got < threads:
                self.st.fail(messages.type_error(self.st.span(node.args[1]), "broadcast-src", help="broadcast-src-constant", threads=threads, got=got))
            src = got
        else:
            a = node.args[1]
            given = a.value if isinstance(a, ast.Constant) else None
            if not (isinstance(given, str) and given in COLLECTIVE_OPS):
                self.st.fail(messages.type_error(self.st.span(a), "collective-op", help="collective-ops", name=shown, got=ast.unparse(a)))
            op = str(given)
            if op in ("and", "or") and ty.is_float:
                self.st.fail(messages.type_error(self.st.span(node.args[0]), "collective-bitwise-float", help="collective-and-or", op=op, ty=ty))
            if op in ("sum", "max", "min") and ty.is_bool:
                self.st.fail(messages.type_error(self.st.span(node.args[0]), "collective-bool-arith", help="collective-and-or", op=op))
        k = self.st.k
        k.uses_warp = True  # the CPU backend runs each thread on its own host thread
        if name in BLOCK_COLLECTIVES:
            k.uses_barrier = True
            k.uses_shared = True
            k.shared[COLLECTIVE_SCRATCH] = SCRATCH_TY
            nbytes = static_shared_bytes(k.shared)
            if nbytes > STATIC_SHARED_MAX_BYTES:
                self.st.fail(messages.type_error(self.st.span(node), "shared-too-large", help="shared-too-large", name=shown, nbytes=nbytes,
                                           limit=STATIC_SHARED_MAX_BYTES))
        return ir.Collective(name, op, v, threads, ty, inclusive, src, self.st.span(node))

    def block_threads(self, name: str, node: ast.Call) -> int:
        """The contract's literal block size; a located az-warp-divergence error when there is
        none or it is not a whole number of warps."""
        contract = self.st.k.contract
        threads = contract.block_threads if contract is not None else None
        if threads is None or threads % 32 != 0 or threads > 32 * COLLECTIVE_SCRATCH_SLOTS:
            block = contract.block if contract is not None else None
            what = "`az." + name + "`"
            self.st.fail(messages.warp_block(self.st.span(node), what, self.st.k.kernel_name, block, None,
                                       has_contract=contract is not None))
        assert threads is not None
        return int(threads)

    def block_witness(self, node: ast.Call) -> ir.Expr:
        self.fn.calls.arity(node, INTRINSICS["thread.block_witness_1d"], "thread.block_witness_1d")
        self.fn.calls.note_rank(1, node)
        return ir.MakeWitness(1, self.fn.calls.rank_site(node), WitnessTy(1, block=True), self.st.span(node))

    def block_leader(self, node: ast.Call) -> ir.Expr:
        self.fn.calls.arity(node, INTRINSICS["thread.is_block_leader"], "thread.is_block_leader")
        span = self.st.span(node)
        zero = ir.Const(0, I32, span)
        parts = tuple(
            ir.Compare(("==",), (ir.RawId("tid", axis, I32, span), zero), BOOL, span, (I32,)) for axis in "xyz"
        )
        return ir.BoolOp("and", parts, BOOL, span)

    def is_leader_test(self, test: ast.expr) -> bool:
        """`if thread.is_block_leader():` (alone, or as one operand of an `and`)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return any(self.is_leader_test(v) for v in test.values)
        return (
            isinstance(test, ast.Call)
            and isinstance(test.func, (ast.Name, ast.Attribute))
            and not test.args
            and not test.keywords
            and self.fn.names.tag(test.func) == ("block_leader",)
        )

    def check_block_access(self, e: ir.Expr, node: ast.expr, name: str, access: str) -> None:
        """An access of a `DisjointSlice` through a block witness: only under the leader test."""
        if isinstance(e.ty, WitnessTy) and e.ty.block and not self.st.leader:
            self.st.fail(messages.block_witness_access(self.st.span(node), name, ast.unparse(node), access))
