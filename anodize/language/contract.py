"""Launch contracts: the `requires` grammar, its parser and its restricted evaluator.

`requires` may use only `len(p)`, `p.shape[k]`, integer scalar parameters,
integer literals, `+ - * //`, comparisons (chained too) and `and`.  The parser
turns the lambda's `ast` into the small tree below; the runtime evaluates that
tree (never `eval`) in 64-bit signed arithmetic that rejects overflow, and
codegen reads equalities from it to remove bounds checks.
"""

from __future__ import annotations

import ast
from typing import Any
import operator
from collections.abc import Callable, Mapping
from dataclasses import field
from anodize.language.records import dataclass

from anodize.language.catalogue import MESSAGES

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


class RequiresSyntaxError(Exception):
    """A `requires` outside its grammar; `node` locates it in the lambda's source."""

    def __init__(self, key: str, node: ast.AST, **values: object):
        self.message = MESSAGES[key].format(**values)
        super().__init__(self.message)
        self.key = key  # an `az-contract` message of the catalogue, filled by `values`
        self.values = values
        self.node = node


class RequiresOverflow(ArithmeticError):
    pass


# ---- expression tree -------------------------------------------------------------------


@dataclass(frozen=True)
class Len:
    param: str

    def text(self) -> str:
        return f"len({self.param})"


@dataclass(frozen=True)
class Shape:
    param: str
    axis: int

    def text(self) -> str:
        return f"{self.param}.shape[{self.axis}]"


@dataclass(frozen=True)
class Param:
    name: str

    def text(self) -> str:
        return self.name


@dataclass(frozen=True)
class Const:
    value: int

    def text(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class BinOp:
    op: str  # "+", "-", "*", "//"
    left: Expr
    right: Expr

    def text(self) -> str:
        return f"{_paren(self.left)} {self.op} {_paren(self.right)}"


@dataclass(frozen=True)
class Neg:
    operand: Expr

    def text(self) -> str:
        return f"-{_paren(self.operand)}"


Expr = Len | Shape | Param | Const | BinOp | Neg


def _paren(e: Expr) -> str:
    return f"({e.text()})" if isinstance(e, BinOp) else e.text()


@dataclass(frozen=True)
class Relation:
    """One comparison `left op right`; a chained comparison becomes several."""

    op: str  # "==", "!=", "<", "<=", ">", ">="
    left: Expr
    right: Expr
    source: str  # the relation as written, for messages

    def text(self) -> str:
        return f"{self.left.text()} {self.op} {self.right.text()}"


@dataclass(frozen=True)
class Requires:
    params: tuple[str, ...]
    relations: tuple[Relation, ...]
    source: str = ""

    def names(self) -> set[str]:
        out: set[str] = set()

        def walk(e: Expr) -> None:
            if isinstance(e, (Len, Shape, Param)):
                out.add(e.param if not isinstance(e, Param) else e.name)
            elif isinstance(e, BinOp):
                walk(e.left)
                walk(e.right)
            elif isinstance(e, Neg):
                walk(e.operand)

        for r in self.relations:
            walk(r.left)
            walk(r.right)
        return out


@dataclass(frozen=True)
class SharedMem:
    """`shared_mem=lambda <params>: <bytes>`: the least dynamic shared memory a launch needs.
    `block` (when a parameter of the lambda) is the block's thread count."""

    params: tuple[str, ...]
    expr: Expr
    source: str


@dataclass(frozen=True)
class OutputDecl:
    """One output a launcher allocates: `"c": ((len(a),), f32)`; `shape` in the `requires`
    grammar over the inputs, `dtype` a scalar type name."""

    name: str
    shape: tuple[Expr, ...]
    dtype: str


@dataclass(frozen=True)
class Outputs:
    """`outputs=lambda a, b: {"c": ((len(a),), f32)}`: how `k[cfg].call(a, b)` allocates the
    kernel's output parameters from its inputs (runtime/outputs.py)."""

    params: tuple[str, ...]
    decls: tuple[OutputDecl, ...]
    source: str

    def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.decls)


@dataclass(frozen=True)
class Contract:
    domain: int
    block: tuple[int, ...] | None  # CUDA order (x, y); None when not fixed
    requires: Requires | None = None
    min_compute_capability: tuple[int, int] | None = None
    shared_mem: SharedMem | None = None
    # blocks of `block` that must fit on one SM at once: a register budget for the compiler
    # (`.minnctapersm`), no change to what the kernel computes
    min_blocks_per_sm: int | None = None
    outputs: Outputs | None = None  # how `k[cfg].call(...)` allocates the outputs
    # `cooperative=True`: the kernel may call `az.grid.sync()`; its launches are cooperative
    # (every block resident at once, refused when the grid cannot be)
    cooperative: bool | None = None

    @property
    def block_threads(self) -> int | None:
        if self.block is None:
            return None
        n = 1
        for b in self.block:
            n *= b
        return n


# ---- parser ------------------------------------------------------------------------------

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}
_CMPOPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}


def parse_requires(lam: ast.Lambda, source: str | None = None) -> Requires:
    """Parse a `requires=lambda ...: ...`; raise RequiresSyntaxError at the offending node."""
    args = lam.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
        raise RequiresSyntaxError("requires-must-lambda-plain", lam)
    params = tuple(a.arg for a in args.args)
    rels: list[Relation] = []
    body = lam.body
    parts = body.values if isinstance(body, ast.BoolOp) and isinstance(body.op, ast.And) else [body]
    for part in parts:
        rels.extend(_parse_relation(part, params, source))
    text = _segment(source, body)
    return Requires(params, tuple(rels), text or ast.unparse(body))


def _segment(source: Any, node: ast.AST) -> str | None:
    """`node`'s text: `source` is the module's `syntax.Source` (its lines are split once), the
    text the lambda was parsed from, or None."""
    if source is None:
        return None
    if hasattr(source, "code"):
        return str(source.code(node))
    return ast.get_source_segment(source, node)


def parse_shared_mem(lam: ast.Lambda, source: str | None = None) -> SharedMem:
    """Parse a `shared_mem=lambda ...: <bytes>` (the `requires` expression grammar; `block`
    may be a parameter); raise RequiresSyntaxError at the offending node."""
    args = lam.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
        raise RequiresSyntaxError("shared-mem-plain-lambda", lam)
    params = tuple(a.arg for a in args.args)
    expr = _parse_expr(lam.body, params)
    text = _segment(source, lam.body)
    return SharedMem(params, expr, text or ast.unparse(lam.body))


def parse_outputs(lam: ast.Lambda, scalar: Callable[[ast.expr], str | None], source: str | None = None) -> Outputs:
    """Parse `outputs=lambda <inputs>: {"name": ((<len>, ...), <dtype>), ...}`; each length in
    the `requires` grammar, each dtype a scalar type (`scalar` names it, None when it is not one).
    Raise RequiresSyntaxError at the offending node."""
    args = lam.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
        raise RequiresSyntaxError("outputs-plain-lambda", lam)
    params = tuple(a.arg for a in args.args)
    body = lam.body
    if not isinstance(body, ast.Dict):
        raise RequiresSyntaxError("outputs-not-dict", body)
    decls = []
    for k, v in zip(body.keys, body.values, strict=True):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)):
            raise RequiresSyntaxError("outputs-key", k if k is not None else v)
        if not (isinstance(v, ast.Tuple) and len(v.elts) == 2 and isinstance(v.elts[0], ast.Tuple)):
            raise RequiresSyntaxError("outputs-entry", v, name=k.value)
        shape = tuple(_parse_expr(e, params) for e in v.elts[0].elts)
        dtype = scalar(v.elts[1])
        if dtype is None:
            raise RequiresSyntaxError("outputs-dtype-name", v.elts[1], expr=ast.unparse(v.elts[1]))
        decls.append(OutputDecl(k.value, shape, dtype))
    return Outputs(params, tuple(decls), _segment(source, body) or ast.unparse(body))


def launch_requires(contract: Contract, shared_mem: int, block_threads: int) -> Requires | None:
    """The relations a launch with `shared_mem` bytes of dynamic shared memory and blocks of
    `block_threads` threads must satisfy: `requires`, and `shared_mem >= <the contract's bytes>`."""
    sm = contract.shared_mem
    if sm is None:
        return contract.requires
    base = contract.requires

    def subst(e: Expr) -> Expr:
        if isinstance(e, Param) and e.name == "block":
            return Const(block_threads)
        if isinstance(e, BinOp):
            return BinOp(e.op, subst(e.left), subst(e.right))
        if isinstance(e, Neg):
            return Neg(subst(e.operand))
        return e

    rel = Relation(">=", Const(shared_mem), subst(sm.expr), f"shared_mem >= {sm.source}")
    params = tuple(dict.fromkeys([*(base.params if base else ()), *(p for p in sm.params if p != "block")]))
    relations = (base.relations if base else ()) + (rel,)
    text = f"{base.source} and shared_mem >= {sm.source}" if base else f"shared_mem >= {sm.source}"
    return Requires(params, relations, text)


def _parse_relation(node: ast.expr, params: tuple[str, ...], source: str | None) -> list[Relation]:
    if isinstance(node, ast.BoolOp):
        raise RequiresSyntaxError("allowed-requires-joins-relations", node)
    if not isinstance(node, ast.Compare):
        raise RequiresSyntaxError(
            "requires-must-comparisons-joined", node, expr=ast.unparse(node)
        )
    operands = [node.left, *node.comparators]
    exprs = [_parse_expr(o, params) for o in operands]
    out = []
    for op, (l_node, r_node), (le, re_) in zip(
        node.ops, zip(operands, operands[1:]), zip(exprs, exprs[1:]), strict=True
    ):
        sym = _CMPOPS.get(type(op))
        if sym is None:
            raise RequiresSyntaxError("comparison-allowed-requires", node, op=type(op).__name__)
        if len(node.ops) == 1:
            src = _segment(source, node) or ast.unparse(node)
        else:
            src = f"{ast.unparse(l_node)} {sym} {ast.unparse(r_node)}"
        out.append(Relation(sym, le, re_, src))
    return out


def _parse_expr(node: ast.expr, params: tuple[str, ...]) -> Expr:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Const(node.value)
    if isinstance(node, ast.Name):
        if node.id not in params:
            raise RequiresSyntaxError("requires-not-param", node, name=node.id)
        return Param(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return Neg(_parse_expr(node.operand, params))
    if isinstance(node, ast.BinOp):
        sym = _BINOPS.get(type(node.op))
        if sym is None:
            raise RequiresSyntaxError(
                "operator-allowed-requires", node, expr=ast.unparse(node)
            )
        return BinOp(sym, _parse_expr(node.left, params), _parse_expr(node.right, params))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Name)
    ):
        name = node.args[0].id
        if name not in params:
            raise RequiresSyntaxError("requires-not-param", node.args[0], name=name)
        return Len(name)
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "shape"
        and isinstance(node.value.value, ast.Name)
        and isinstance(node.slice, ast.Constant)
        and type(node.slice.value) is int
        and node.slice.value in (0, 1, 2)
    ):
        name = node.value.value.id
        if name not in params:
            raise RequiresSyntaxError("requires-not-param", node.value.value, name=name)
        return Shape(name, node.slice.value)
    raise RequiresSyntaxError(
        "allowed-requires-len-p",
        node, expr=ast.unparse(node),
    )


# ---- evaluator ---------------------------------------------------------------------------


def _checked(v: int) -> int:
    if v < I64_MIN or v > I64_MAX:
        raise RequiresOverflow(v)
    return v


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by zero in `requires`")
    return a // b


_ARITH: dict[str, Callable[[int, int], int]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": _floordiv,
}
COMPARISONS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass
class Env:
    """What the evaluator may read: lengths, 2-D shapes and integer scalars by parameter."""

    lengths: Mapping[str, int] = field(default_factory=dict)
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    scalars: Mapping[str, int] = field(default_factory=dict)


def eval_expr(e: Expr, env: Env) -> int:
    if isinstance(e, Const):
        return _checked(e.value)
    if isinstance(e, Len):
        return env.lengths[e.param]
    if isinstance(e, Shape):
        return env.shapes[e.param][e.axis]
    if isinstance(e, Param):
        return _checked(int(env.scalars[e.name]))
    if isinstance(e, Neg):
        return _checked(-eval_expr(e.operand, env))
    return _checked(_ARITH[e.op](eval_expr(e.left, env), eval_expr(e.right, env)))


def first_violation(req: Requires, env: Env) -> tuple[Relation, int, int] | None:
    """The first relation that does not hold, with both sides' values; None when all hold.

    Raises RequiresOverflow or ZeroDivisionError when a side cannot be computed in i64."""
    for rel in req.relations:
        left = eval_expr(rel.left, env)
        right = eval_expr(rel.right, env)
        if not COMPARISONS[rel.op](left, right):
            return rel, left, right
    return None


def equal_lengths(req: Requires | None) -> list[set[str]]:
    """Classes of parameters whose lengths `requires` proves equal (`len(a) == len(c)`).

    Codegen uses them to turn a guard on one slice into a proof for the others."""
    if req is None:
        return []
    classes: list[set[str]] = []
    for rel in req.relations:
        if rel.op == "==" and isinstance(rel.left, Len) and isinstance(rel.right, Len):
            a, b = rel.left.param, rel.right.param
            hit = [c for c in classes if a in c or b in c]
            merged = {a, b}.union(*hit)
            classes = [c for c in classes if c not in hit] + [merged]
    return classes
