"""`read_contract`: a kernel's `@launch_contract(...)`, read and validated once, from source.

    contract, diags = read_contract(front, fdef)

The one reading of a contract: the checker's `az-contract` rule reports `diags`, the
typer and codegen take `contract` (`.reqntid`, facts from `requires`), and the runtime's
`Kernel.contract` is the same object.  `block=` may name module constants
(`block=(TILE, TILE)`), resolved here from the source.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from anodize.language import messages
from anodize.language.contract import (
    BinOp, Contract, Len, Neg, Outputs, Param, RequiresSyntaxError, Shape, SharedMem, parse_outputs, parse_requires,
    parse_shared_mem,
)
from anodize.language.diagnostics import Diagnostic, Span
from anodize.language.param_annotations import annotation_kind
from anodize.language.vocab import MAX_THREADS_PER_BLOCK, SLICE_KINDS

if TYPE_CHECKING:
    from anodize.language.front import ModuleFront

__all__ = ["read_contract", "contract_decorators", "KNOWN_ARGS"]

KNOWN_ARGS = ("domain", "block", "requires", "min_compute_capability", "shared_mem", "min_blocks_per_sm", "outputs")
_INT_SCALARS = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"}


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
    diags: list[Diagnostic] = []

    def say(node: ast.AST | Span, key: str, help: str | None = None, **values: object) -> None:
        """An `az-contract` diagnostic: `key` and `help` name texts of the message catalogue."""
        span = node if isinstance(node, Span) else src.span(node)
        diags.append(messages.contract(span, key, help=help or "contract-example", **values))

    for extra in decos[1:]:
        say(src.decorator_span(extra), "kernel-most-launch-contract", "merge-two-contracts")
    deco = decos[0]
    if front.symbols.function_kind(fdef) != "kernel":
        say(src.decorator_span(deco), "launch-contract-which-kernel", "add-kernel-remove-contract", name=fdef.name)
        return None, diags
    if not isinstance(deco, ast.Call):
        say(src.decorator_span(deco), "launch-contract-needs-arguments")
        return None, diags
    args: dict[str, ast.expr] = {}
    for a in deco.args:
        say(a, "launch-contract-takes-keyword", "write-domain-block")
    for kw in deco.keywords:
        if kw.arg is None:
            say(kw.value, "launch-contract-takes-keyword", "write-domain-block")
        elif kw.arg not in KNOWN_ARGS:
            say(src.keyword_name_span(kw), "unknown-contract-argument", "domain-block-requires-min", arg=kw.arg)
        else:
            args[kw.arg] = kw.value
    if front.symbols.tile_decorator(fdef) is not None:  # the compiler picks a tile kernel's block
        for name in ("block", "shared_mem"):
            if name in args:
                say(args[name], "tile-contract-no-block", "tile-contract-example", arg=name)
                del args[name]
    params = _params(front, fdef)
    domain = _domain(front, deco, args, say)
    block = _block(front, args, domain, say)
    requires = _requires(front, fdef, args, params, say, diags)
    shared_mem = _shared_mem(front, fdef, args, params, say, diags)
    cc = None
    if "min_compute_capability" in args:
        v = _ints(front, args["min_compute_capability"])
        if v is None or len(v) != 2 or min(v) < 0 or not isinstance(args["min_compute_capability"], ast.Tuple):
            say(args["min_compute_capability"], "min-compute-capability-must", "write-min-compute-capability")
        else:
            cc = (v[0], v[1])
    per_sm = _min_blocks(front, args, block, say)
    outputs = _outputs(front, fdef, args, params, say, diags)
    if diags or domain is None:
        return None, diags
    return Contract(domain, block, requires, cc, shared_mem, per_sm, outputs), diags


MAX_THREADS_PER_SM = 2048  # every architecture the compiler targets (sm_70 to sm_120: 1536 to 2048)


def _min_blocks(front: ModuleFront, args: dict[str, ast.expr], block: tuple[int, ...] | None, say) -> int | None:  # type: ignore[no-untyped-def]
    """`min_blocks_per_sm=N`: N blocks of the contract's literal block resident on one SM at
    once (the compiler caps registers to fit them: PTX `.minnctapersm N`)."""
    node = args.get("min_blocks_per_sm")
    if node is None:
        return None
    v = _ints(front, node)
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


def _domain(front: ModuleFront, deco: ast.Call, args: dict[str, ast.expr], say) -> int | None:  # type: ignore[no-untyped-def]
    if "domain" not in args:
        say(deco, "contract-domain", "add-domain-1-2")
        return None
    v = _ints(front, args["domain"])
    if v is None or isinstance(args["domain"], ast.Tuple) or v[0] not in (1, 2, 3):
        say(args["domain"], "domain-must-1-2",
            "domain-1-thread-index", domain=front.src.quote(args['domain']))
        return None
    return v[0]


def _block(front: ModuleFront, args: dict[str, ast.expr], domain: int | None, say) -> tuple[int, ...] | None:  # type: ignore[no-untyped-def]
    bv = args.get("block")
    if bv is None or (isinstance(bv, ast.Constant) and bv.value is None):
        return None
    dims = _ints(front, bv)
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


def _requires(front: ModuleFront, fdef: ast.FunctionDef, args: dict[str, ast.expr], params, say, diags):  # type: ignore[no-untyped-def]
    node = args.get("requires")
    if node is None:
        return None
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


def _shared_mem(front: ModuleFront, fdef: ast.FunctionDef, args: dict[str, ast.expr], params, say, diags) -> SharedMem | None:  # type: ignore[no-untyped-def]
    node = args.get("shared_mem")
    if node is None:
        return None
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


def _outputs(front: ModuleFront, fdef: ast.FunctionDef, args: dict[str, ast.expr], params, say, diags) -> Outputs | None:  # type: ignore[no-untyped-def]
    """`outputs=lambda <inputs>: {"<output>": ((<len>, ...), <dtype>)}`: each key an output slice
    parameter (written: `DisjointSlice*`, `AtomicSlice`), its shape of the slice's rank and
    its dtype the slice's element type; the lambda's parameters are the kernel's other
    parameters, used as in `requires`."""
    node = args.get("outputs")
    if node is None:
        return None
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
