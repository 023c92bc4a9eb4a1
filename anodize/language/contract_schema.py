"""The launch contract's schema: each field of `@launch_contract(...)` declared once, in `FIELDS`.

A field's declaration says everything about it: its keyword (and its type, for the
decorator's signature: `LaunchContractArgs` mirrors `FIELDS` for type checkers, a test keeps
them equal), whether it is required, whether the compiled code depends on it (`codegen`: a
disk-cache entry carries it, and a cached artifact is taken only under the same value),
whether a tile kernel may state it, how it is read and validated from source (`read`), how
it is encoded in a cache entry or a built package (`encode`/`decode`), how the mypy plugin
reads it at a launch site (`mypy`) and how a foreign kernel's live decorator value is read
(`live`).  Everything else derives from `FIELDS`:

    contract, diags = read_contract(front, fdef)     # the one reading (the checker's az-contract,
                                                     # the typer, codegen, `Kernel.contract`)
    encode_contract(contract) / decode_contract(d)   # runtime/artifact_store.py, runtime/prebuilt.py
    checker/mypy/kernels.py contract_of              # the plugin's launch-site facts
    anodize/foreign.py                               # a foreign kernel's contract

`block=` may name module constants (`block=(TILE, TILE)`), resolved here from the source.
Adding a field: docs/architecture.md, "How to add a contract field".
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, NotRequired, Required, TypedDict

from anodize.language import messages
from anodize.language.contract import (
    BinOp, Const, Contract, Expr, Len, Neg, OutputDecl, Outputs, Param, Relation, Requires, RequiresSyntaxError, Shape,
    SharedMem, parse_outputs, parse_requires, parse_shared_mem,
)
from anodize.language.diagnostics import Diagnostic, Span
from anodize.language.param_annotations import annotation_kind
from anodize.language.records import dataclass
from anodize.language.vocab import MAX_THREADS_PER_BLOCK, SLICE_KINDS

if TYPE_CHECKING:
    from anodize.language.front import ModuleFront

__all__ = ["ContractField", "FIELDS", "FIELD_NAMES", "LaunchContractArgs", "read_contract", "contract_decorators",
           "encode_contract", "decode_contract"]

_INT_SCALARS = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}


class Reading:
    """The state of one contract's reading: what the field readers share."""

    def __init__(self, front: ModuleFront, fdef: ast.FunctionDef, deco: ast.expr):
        self.front = front
        self.fdef = fdef
        self.deco = deco
        self.diags: list[Diagnostic] = []
        self.values: dict[str, Any] = {}  # the fields read so far (`block` reads `domain`)

    @cached_property
    def params(self) -> dict[str, tuple[str, str | None, str | None]]:
        """name -> (kind, slice kind, scalar) of each parameter: what the `requires`, `shared`
        and `grid` readers check (read when one of them is, not for every contract)."""
        return _params(self.front, self.fdef)

    def say(self, node: ast.AST | Span, key: str, help: str | None = None, **values: object) -> None:
        """An `az-contract` diagnostic: `key` and `help` name texts of the message catalogue."""
        span = node if isinstance(node, Span) else self.front.src.span(node)
        self.diags.append(messages.contract(span, key, help=help or "contract-example", **values))


@dataclass(frozen=True)
class ContractField:
    """One field of the launch contract (a `Contract` attribute of the same name)."""

    name: str  # the `@launch_contract` keyword and the `Contract` attribute
    annotation: str  # the keyword's type, as `LaunchContractArgs` spells it
    read: Callable[[Reading, ast.expr], Any]  # the value from source, or None after `Reading.say`
    encode: Callable[[Any], Any]  # a value (never None) -> JSON
    decode: Callable[[Any], Any]  # JSON -> the value (raises KeyError/TypeError/ValueError on a bad entry)
    codegen: bool  # the compiled code depends on it
    missing: Callable[[Reading], None] | None = None  # a required field's: says it is absent
    tile: bool = True  # a tile kernel may state it (its block is the compiler's)
    mypy: str | None = None  # how the plugin reads it at a launch site: "int", "block", "requires"
    live: str | None = None  # how a foreign kernel's decorator value is read: "domain", "block", "lambda", "pair"


def contract_decorators(front: ModuleFront, fdef: ast.FunctionDef) -> list[ast.expr]:
    """`fdef`'s `launch_contract` decorators (an alias's call in its place; then those that
    module-level calls apply: `k = az.launch_contract(...)(az.kernel(fdef))`)."""
    syms = front.symbols
    return [syms.decorator_node(d) for d in syms.decorators(fdef) if syms.decorator_kind(d) == "launch_contract"]


def read_contract(front: ModuleFront, fdef: ast.FunctionDef) -> tuple[Contract | None, list[Diagnostic]]:
    """The contract of `fdef` (None when it has none or it is malformed) and its diagnostics."""
    decos = contract_decorators(front, fdef)
    if not decos:
        return None, []
    src = front.src
    r = Reading(front, fdef, decos[0])
    say = r.say
    for extra in decos[1:]:
        say(src.decorator_span(extra), "kernel-most-launch-contract", "merge-two-contracts")
    deco = decos[0]
    if front.symbols.function_kind(fdef) != "kernel":
        say(src.decorator_span(deco), "launch-contract-which-kernel", "add-kernel-remove-contract", name=fdef.name)
        return None, r.diags
    if not isinstance(deco, ast.Call):
        say(src.decorator_span(deco), "launch-contract-needs-arguments")
        return None, r.diags
    args: dict[str, ast.expr] = {}
    for a in deco.args:
        say(a, "launch-contract-takes-keyword", "write-domain-block")
    for kw in deco.keywords:
        if kw.arg is None:
            say(kw.value, "launch-contract-takes-keyword", "write-domain-block")
        elif kw.arg not in FIELD_NAMES:
            say(src.keyword_name_span(kw), "unknown-contract-argument", "use-contract-fields", arg=kw.arg, fields=_field_list())
        else:
            args[kw.arg] = kw.value
    if front.symbols.tile_decorator(fdef) is not None:  # the compiler picks a tile kernel's block
        for f in FIELDS:
            if not f.tile and f.name in args:
                say(args[f.name], "tile-contract-no-block", "tile-contract-example", arg=f.name)
                del args[f.name]
    for f in FIELDS:
        node = args.get(f.name)
        if node is None:
            if f.missing is not None:
                f.missing(r)
            r.values[f.name] = None
        else:
            r.values[f.name] = f.read(r, node)
    if r.diags or any(f.missing is not None and r.values[f.name] is None for f in FIELDS):
        return None, r.diags
    return Contract(**r.values), r.diags


def _field_list() -> str:
    names = [f"`{f.name}`" for f in FIELDS]
    return ", ".join(names[:-1]) + " or " + names[-1]


# ---- the codec: a contract as JSON (no pickle), field by field --------------------------------


def encode_contract(c: Contract | None) -> Any:
    """`c` as JSON: every field (None as null)."""
    if c is None:
        return None
    out = {}
    for f in FIELDS:
        v = getattr(c, f.name)
        out[f.name] = None if v is None else f.encode(v)
    return out


def decode_contract(d: Any) -> Contract | None:
    """The contract `encode_contract` wrote (a field it lacks -- an older entry's -- is None)."""
    if d is None:
        return None
    return Contract(**{f.name: None if d.get(f.name) is None else f.decode(d[f.name]) for f in FIELDS})


def codegen_view(c: Contract | None) -> tuple[Any, ...] | None:
    """The fields of `c` the compiled code depends on (a cached artifact is taken only when the
    source's contract has the same)."""
    return None if c is None else tuple(getattr(c, f.name) for f in FIELDS if f.codegen)


def _ints_json(v: tuple[int, ...]) -> list[int]:
    return [int(x) for x in v]


def _ints_from_json(v: Any) -> tuple[int, ...]:
    return tuple(int(x) for x in v)


def _int(v: Any) -> int:
    if type(v) is not int:
        raise TypeError(f"not an int: {v!r}")
    return v


def _pair_from_json(v: Any) -> tuple[int, int]:
    a, b = v
    return (int(a), int(b))


def _expr_json(e: Expr) -> Any:
    if isinstance(e, Len):
        return ["len", e.param]
    if isinstance(e, Shape):
        return ["shape", e.param, e.axis]
    if isinstance(e, Param):
        return ["param", e.name]
    if isinstance(e, Const):
        return ["const", e.value]
    if isinstance(e, Neg):
        return ["neg", _expr_json(e.operand)]
    return ["binop", e.op, _expr_json(e.left), _expr_json(e.right)]


def _expr_from_json(e: Any) -> Expr:
    tag = e[0]
    if tag == "len":
        return Len(str(e[1]))
    if tag == "shape":
        return Shape(str(e[1]), int(e[2]))
    if tag == "param":
        return Param(str(e[1]))
    if tag == "const":
        return Const(int(e[1]))
    if tag == "neg":
        return Neg(_expr_from_json(e[1]))
    if tag == "binop" and e[1] in ("+", "-", "*", "//"):
        return BinOp(e[1], _expr_from_json(e[2]), _expr_from_json(e[3]))
    raise ValueError(f"unknown `requires` node {tag!r} in a cache entry")


def _requires_json(r: Requires) -> Any:
    return {"params": list(r.params), "source": r.source,
            "relations": [[x.op, _expr_json(x.left), _expr_json(x.right), x.source] for x in r.relations]}


def _requires_from_json(r: Any) -> Requires:
    rels = tuple(Relation(op, _expr_from_json(left), _expr_from_json(right), src) for op, left, right, src in r["relations"])
    return Requires(tuple(r["params"]), rels, r["source"])


def _shared_json(sm: SharedMem) -> Any:
    return {"params": list(sm.params), "expr": _expr_json(sm.expr), "source": sm.source}


def _shared_from_json(sm: Any) -> SharedMem:
    return SharedMem(tuple(sm["params"]), _expr_from_json(sm["expr"]), sm["source"])


def _outputs_json(o: Outputs) -> Any:
    return {"params": list(o.params), "source": o.source,
            "decls": [[d.name, [_expr_json(e) for e in d.shape], d.dtype] for d in o.decls]}


def _outputs_from_json(o: Any) -> Outputs:
    decls = tuple(OutputDecl(str(n), tuple(_expr_from_json(e) for e in shape), str(dt)) for n, shape, dt in o["decls"])
    return Outputs(tuple(o["params"]), decls, o["source"])


# ---- the field readers (from source) -----------------------------------------------------------


MAX_THREADS_PER_SM = 2048  # every architecture the compiler targets (sm_70 to sm_120: 1536 to 2048)


def read_min_blocks(r: Reading, node: ast.expr) -> int | None:
    """`min_blocks_per_sm=N`: N blocks of the contract's literal block resident on one SM at
    once (the compiler caps registers to fit them: PTX `.minnctapersm N`)."""
    say, block = r.say, r.values["block"]
    v = _ints(r.front, node)
    if v is None or isinstance(node, ast.Tuple) or not 1 <= v[0] <= 32:
        say(node, "min-blocks-per-sm-must", "write-min-blocks-per-sm")
        return None
    if block is None:
        say(node, "min-blocks-per-sm-needs-block", "write-min-blocks-per-sm")
        return None
    threads = 1
    for b in block:
        threads *= b
    if threads * v[0] > MAX_THREADS_PER_SM:
        say(node, "min-blocks-per-sm-too-many", "write-min-blocks-per-sm", n=v[0], threads=threads, limit=MAX_THREADS_PER_SM)
        return None
    return v[0]


def read_cooperative(r: Reading, node: ast.expr) -> bool | None:
    """`cooperative=True`: the kernel may call `az.grid.sync()`, and each launch is cooperative
    (every block of the grid resident at once; refused when the GPU cannot hold them)."""
    say = r.say
    if not (isinstance(node, ast.Constant) and isinstance(node.value, bool)):
        say(node, "cooperative-must", "write-cooperative")
        return None
    return node.value


def _bool(v: Any) -> bool:
    if type(v) is not bool:
        raise TypeError(f"not a bool: {v!r}")
    return v


def _params(front: ModuleFront, fdef: ast.FunctionDef) -> dict[str, tuple[str, str | None, str | None]]:
    """name -> (kind, slice kind, scalar) of each parameter (kind: slice | scalar | witness | bad)."""
    out = {}
    a = fdef.args
    for p in (*a.posonlyargs, *a.args, *a.kwonlyargs):
        out[p.arg] = annotation_kind(front.symbols, p.annotation)
    return out


def _ints(front: ModuleFront, node: ast.expr) -> tuple[int, ...] | None:
    """An int or a tuple of ints (literals or module constants), as a tuple; None otherwise."""
    elts = node.elts if isinstance(node, ast.Tuple) else [node]
    out = []
    for e in elts:
        v = front.symbols.constant(e)
        if v is None or type(v[0]) is not int:
            return None
        out.append(v[0])
    return tuple(out)


def no_domain(r: Reading) -> None:
    say = r.say
    say(r.deco, "contract-domain", "add-domain-1-2")


def read_domain(r: Reading, node: ast.expr) -> int | None:
    say = r.say
    v = _ints(r.front, node)
    if v is None or isinstance(node, ast.Tuple) or v[0] not in (1, 2, 3):
        say(node, "domain-must-1-2", "domain-1-thread-index", domain=r.front.src.quote(node))
        return None
    return v[0]


def read_compute_capability(r: Reading, node: ast.expr) -> tuple[int, int] | None:
    say = r.say
    v = _ints(r.front, node)
    if v is None or len(v) != 2 or min(v) < 0 or not isinstance(node, ast.Tuple):
        say(node, "min-compute-capability-must", "write-min-compute-capability")
        return None
    return (v[0], v[1])


def read_block(r: Reading, bv: ast.expr) -> tuple[int, ...] | None:
    if isinstance(bv, ast.Constant) and bv.value is None:
        return None
    say, domain = r.say, r.values["domain"]
    dims = _ints(r.front, bv)
    if dims is None or not 1 <= len(dims) <= 3:
        say(bv, "block-must-int-tuple")
        return None
    if any(x < 1 for x in dims):
        say(bv, "every-block-dimension-must")
        return None
    rank = len(dims)
    while rank > 1 and dims[rank - 1] == 1 and domain is not None and rank > domain:
        rank -= 1  # trailing 1s: `block=(256, 1)` is a 1-D block
    if domain is not None and rank != domain:
        say(bv, "block-rank-domain",
            "block-example", rank=rank, domain=domain)
        return None
    total = 1
    for x in dims:
        total *= x
    if total > MAX_THREADS_PER_BLOCK:
        say(bv, "block-threads-block-holds",
            "block-example-16", total=total, limit=MAX_THREADS_PER_BLOCK)
        return None
    return dims[:rank]


def read_requires(r: Reading, node: ast.expr) -> Requires | None:
    front, fdef, params, say, diags = r.front, r.fdef, r.params, r.say, r.diags
    if not isinstance(node, ast.Lambda):
        say(node, "requires-must-lambda-over", "requires-example")
        return None
    try:
        req = parse_requires(node, front.src)
    except RequiresSyntaxError as e:
        diags.append(messages.requires_syntax(front.src.span(e.node), e))
        return None
    ok = True
    for a in node.args.args:
        if a.arg not in params:
            say(a, "requires-names-which-parameter", "parameter-names", arg=a.arg, name=fdef.name)
            return None
    for rel in req.relations:
        for term in _walk(rel.left) + _walk(rel.right):
            bad = _misuse(term, params)
            if bad is None:
                continue
            ok = False
            name = _term_param(term)
            kind, skind, _ = params[name]
            if bad == "len":
                say(node, "len-requires-slice", "requires-example", name=name)
            elif bad == "shape-rank":
                say(node, "shape-requires-2-d", "use-len", name=name, axis=term.axis)
            elif bad == "shape-axis":
                say(node, "shape-axis-out-of-range", name=name, axis=term.axis, rank=SLICE_KINDS[skind].rank)
            else:
                say(node, "requires-must-integer-scalar", "use-len" if kind == "slice" else "requires-example", name=name)
    return req if ok else None


def read_shared_mem(r: Reading, node: ast.expr) -> SharedMem | None:
    front, fdef, params, say, diags = r.front, r.fdef, r.params, r.say, r.diags
    if not isinstance(node, ast.Lambda):
        say(node, "shared-mem-not-lambda", "shared-mem-example")
        return None
    for a in node.args.args:
        if a.arg != "block" and a.arg not in params:
            say(a, "shared-mem-unknown-name", "shared-mem-example", name=a.arg, kernel=fdef.name)
            return None
    try:
        sm = parse_shared_mem(node, front.src)
    except RequiresSyntaxError as e:  # the `requires` grammar's own message
        diags.append(messages.requires_syntax(front.src.span(e.node), e))
        return None
    for term in _walk(sm.expr):
        if isinstance(term, Param) and term.name == "block":
            continue  # the block's thread count
        if _misuse(term, params) is not None:
            say(node, "shared-mem-bad-use", "shared-mem-example", name=_term_param(term))
            return None
    return sm


def read_outputs(r: Reading, node: ast.expr) -> Outputs | None:
    """`outputs=lambda <inputs>: {"<output>": ((<len>, ...), <dtype>)}`: each key an output slice
    parameter (written: `DisjointSlice*`, `AtomicSlice`), its shape of the slice's rank and
    its dtype the slice's element type; the lambda's parameters are the kernel's other
    parameters, used as in `requires`."""
    front, fdef, params, say, diags = r.front, r.fdef, r.params, r.say, r.diags
    if not isinstance(node, ast.Lambda):
        say(node, "outputs-not-lambda", "outputs-example")
        return None

    def scalar(e: ast.expr) -> str | None:
        sym = front.symbols.resolve(e) if isinstance(e, (ast.Name, ast.Attribute)) else None
        if sym is not None and sym.kind == "intrinsic" and sym.tag and sym.tag[0] == "scalar":
            return str(sym.tag[1])
        return None

    try:
        outs = parse_outputs(node, scalar, front.src)
    except RequiresSyntaxError as e:
        diags.append(messages.outputs_syntax(front.src.span(e.node), e))
        return None
    produced = set(outs.names())
    for a in node.args.args:
        if a.arg not in params:
            say(a, "outputs-unknown-name", "outputs-example", name=a.arg, kernel=fdef.name)
            return None
        if a.arg in produced:
            say(a, "outputs-takes-inputs", "outputs-example", name=a.arg)
            return None
    ok = True
    for key, decl in zip(node.body.keys, outs.decls, strict=True):  # type: ignore[attr-defined]
        p = params.get(decl.name)
        if p is None:
            say(key, "outputs-unknown-name", "outputs-example", name=decl.name, kernel=fdef.name)
            ok = False
            continue
        kind, skind, elem = p
        if kind != "slice" or not SLICE_KINDS[skind].output:
            say(key, "outputs-not-output", "outputs-example", name=decl.name)
            ok = False
            continue
        rank = SLICE_KINDS[skind].rank
        if len(decl.shape) != rank:
            say(key, "outputs-rank", "outputs-example", name=decl.name, rank=rank, got=len(decl.shape))
            ok = False
        if elem is not None and not elem.startswith("~") and elem != decl.dtype:
            say(key, "outputs-dtype", "outputs-example", name=decl.name, want=elem, got=decl.dtype)
            ok = False
        for term in (t for e in decl.shape for t in _walk(e)):
            if _misuse(term, params) is not None:
                say(key, "outputs-bad-use", "outputs-example", name=_term_param(term))
                ok = False
    return outs if ok else None


def _term_param(term) -> str:  # type: ignore[no-untyped-def]
    """The parameter a `requires`/`shared_mem` term names (`len(a)`, `a.shape[k]`, `n`)."""
    return getattr(term, "param", getattr(term, "name", ""))  # type: ignore[no-any-return]


def _misuse(term, params) -> str | None:  # type: ignore[no-untyped-def]
    """How a `requires` or `shared_mem` term misuses its parameter, one rule for both lambdas:
    "len" (of a non-slice), "shape-rank" (`.shape` of a 1-D slice or a scalar), "shape-axis"
    (past the slice's axes), "not-int" (a parameter that is not an integer scalar); None if fine."""
    p = params.get(_term_param(term))
    if p is None:
        return None
    kind, skind, scalar = p
    if isinstance(term, Len) and kind != "slice":
        return "len"
    if isinstance(term, Shape) and not (kind == "slice" and SLICE_KINDS[skind].rank >= 2):
        return "shape-rank"
    if isinstance(term, Shape) and term.axis >= SLICE_KINDS[skind].rank:
        return "shape-axis"
    if isinstance(term, Param) and not (kind == "scalar" and scalar in _INT_SCALARS):
        return "not-int"
    return None


def _walk(e):  # type: ignore[no-untyped-def]
    if isinstance(e, BinOp):
        return _walk(e.left) + _walk(e.right)
    if isinstance(e, Neg):
        return _walk(e.operand)
    return [e]


# ---- the schema ----------------------------------------------------------------------------------

FIELDS: tuple[ContractField, ...] = (
    ContractField("domain", "int", read_domain, _int, _int, codegen=True, missing=no_domain, mypy="int", live="domain"),
    ContractField("block", "int | tuple[int, int] | tuple[int, int, int] | None", read_block, _ints_json, _ints_from_json,
                  codegen=True, tile=False, mypy="block", live="block"),
    ContractField("requires", "Callable[..., bool] | None", read_requires, _requires_json, _requires_from_json,
                  codegen=True, mypy="requires", live="lambda"),
    ContractField("shared_mem", "Callable[..., int] | None", read_shared_mem, _shared_json, _shared_from_json,
                  codegen=True, tile=False, live="lambda"),
    ContractField("min_compute_capability", "tuple[int, int] | None", read_compute_capability, _ints_json, _pair_from_json,
                  codegen=True, live="pair"),
    ContractField("min_blocks_per_sm", "int | None", read_min_blocks, _int, _int, codegen=True),
    ContractField("outputs", "Callable[..., dict[str, Any]] | None", read_outputs, _outputs_json, _outputs_from_json,
                  codegen=False),
    ContractField("cooperative", "bool | None", read_cooperative, _bool, _bool, codegen=False, tile=False, live="bool"),
)
FIELD_NAMES = tuple(f.name for f in FIELDS)


class LaunchContractArgs(TypedDict, total=False):
    """`FIELDS` as the keywords of `@az.launch_contract(...)`, for type checkers (PEP 692): one
    line per field, its type the field's `annotation` (tests/language/test_contract_schema.py)."""

    domain: Required[int]
    block: NotRequired[int | tuple[int, int] | tuple[int, int, int] | None]
    requires: NotRequired[Callable[..., bool] | None]
    shared_mem: NotRequired[Callable[..., int] | None]
    min_compute_capability: NotRequired[tuple[int, int] | None]
    min_blocks_per_sm: NotRequired[int | None]
    outputs: NotRequired[Callable[..., dict[str, Any]] | None]
    cooperative: NotRequired[bool | None]
