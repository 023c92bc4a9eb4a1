"""The message catalogue: every diagnostic code, its summary, and the builders of its messages.

The CLI, the mypy plugin, codegen and the runtime all build diagnostics through
these functions, so one code always has one wording.  The generic builders
(`type_error`, `unsupported`, `signature`, `contract`, ...) take a key of
`catalogue.MESSAGES` (and `help=` a key of `catalogue.HELPS`) and the values that
fill it; the others are one builder per message.  Add a message here or in
catalogue.py, never as text at the call site: tests/language/test_catalogue.py fails
on a free-text message.
"""

from __future__ import annotations

from anodize.language.catalogue import CHECKER_CONSTRUCT_HELPS, CHECKER_CONSTRUCTS, CONSTRUCTS, HELPS, LITERALS, MESSAGES, PHRASES
from anodize.language.diagnostics import Diagnostic, Label, Span

# builder (or exception) -> the position of its catalogue-key argument; the test checks
# that every call passes a string literal there (and in `help=`) that the catalogue holds
KEYED: dict[str, int] = {
    "type_error": 1,
    "unsupported": 1,
    "signature": 1,
    "contract": 1,
    "unsupported_here": 1,
    "index_forge": 1,
    "global_write": 1,
    "shared_write": 3,
    "module_value": 2,
    "cpu_backend_unsupported": 1,
    "barrier_divergence": 1,
    "tile_ownership": 1,
    "PromotionError": 0,
    "RequiresSyntaxError": 0,
}


# builder -> (position, keyword) of its argument that is a key of `catalogue.PHRASES`
# (a reason or label the rule picks); the test checks those keys as it checks the above
PHRASE_KEYED: dict[str, tuple[int | None, str]] = {
    "barrier_divergence": (3, "reason_key"),
    "disjoint_index": (5, "why"),
    "warp_divergence": (3, "reason_key"),
}


def phrase(key: str, values: dict[str, object]) -> str:
    """The phrase `key` of the catalogue, filled with `values`."""
    return PHRASES[key].format(**values)


def text(key: str, values: dict[str, object]) -> str:
    """The message `key` of the catalogue, filled with `values`."""
    return MESSAGES[key].format(**values)


def help_text(key: str | None, values: dict[str, object]) -> str | None:
    return None if key is None else HELPS[key].format(**values)

from anodize.language.codes import CODES  # (re-exported: the catalogue's codes)


def make(
    code: str,
    message: str,
    span: Span,
    *,
    label: str = "",
    secondary: tuple[Label, ...] = (),
    notes: tuple[str, ...] = (),
    help: str | None = None,
    severity: str = "error",
) -> Diagnostic:
    if code not in CODES:
        raise KeyError(f"diagnostic code {code!r} is not in the catalogue")
    return Diagnostic(code, message, span, label, secondary, notes, help, severity)


# ---- builders shared by several front ends -------------------------------------------


def syntax_error(span: Span, msg: str) -> Diagnostic:
    text = "invalid syntax" if msg.strip().rstrip(".") in ("", "invalid syntax") else f"invalid syntax: {msg}"
    return make("az-syntax", text, span, label="here")


def unsupported(span: Span, key: str, *, help: str | None = None, **values: object) -> Diagnostic:
    return _unsupported(span, text(key, values), help=help_text(help, values))


def unsupported_construct(span: Span, node_class: str) -> Diagnostic:
    """`az-unsupported` for an AST node the typer has no rule for (`node_class`: `"Lambda"`)."""
    return _unsupported(span, CONSTRUCTS.get(node_class, f"`{node_class}`"))


def unsupported_syntax(span: Span, node_class: str) -> Diagnostic:
    """The checker's `az-unsupported` for a construct named by its AST node class."""
    return _unsupported(span, CHECKER_CONSTRUCTS[node_class], help=CHECKER_CONSTRUCT_HELPS.get(node_class))


def unsupported_literal(span: Span, value: object) -> Diagnostic:
    """`az-unsupported` for a literal a kernel cannot hold (a string, `None`, `...`)."""
    return _unsupported(span, LITERALS.get(type(value).__name__, f"the literal `{value!r}`"))


def _unsupported(span: Span, construct: str, *, help: str | None = None) -> Diagnostic:
    return make(
        "az-unsupported",
        f"{construct} is not supported in a kernel",
        span,
        label="not in the kernel subset",
        notes=("kernels run a Python subset; see docs/language.md for what is supported",),
        help=help,
    )


def type_error(span: Span, key: str, *, label: str = "", help: str | None = None, **values: object) -> Diagnostic:
    return make("az-type", text(key, values), span, label=label, help=help_text(help, values))


def tile_ownership(span: Span, key: str, *, help: str | None = None, **values: object) -> Diagnostic:
    """`az-disjoint-index` for a tile kernel's access outside the tile its program owns (the
    Tile model's partition ownership: `tile.store` / `tile.load` of an output)."""
    return make(
        "az-disjoint-index", text(key, values), span, label="not this program's tile",
        notes=("a tile kernel's program owns one tile of each output: the tile `pid * shape`, one tile shape "
               "per output, so no element of an output has two writers",),
        help=help_text(help, values),
    )


def promotion_error(span: Span, exc: object) -> Diagnostic:
    """The `az-type` error of a `types.PromotionError` (which carries a catalogue key)."""
    return make("az-type", str(exc), span)


def signature(span: Span, key: str, *, help: str | None = None, **values: object) -> Diagnostic:
    return _signature(span, text(key, values), help=help_text(help, values))


def _signature(span: Span, msg: str, *, help: str | None = None) -> Diagnostic:
    return make("az-signature", msg, span, label="in this signature", help=help)


def rebound(span: Span, name: str, bindings: tuple[Span, ...]) -> Diagnostic:
    return make(
        "az-rebound",
        f"`{name}` is bound more than once at module level, so a kernel cannot use it",
        span,
        label="which binding?",
        secondary=tuple(Label(b, "bound here") for b in bindings),
        notes=("a kernel is compiled from the module's source: a name it reads or calls must have one binding",),
        help=f"give each binding its own name, or bind `{name}` once",
    )


def reserved_name(span: Span, name: str, prefix: str) -> Diagnostic:
    return make(
        "az-reserved",
        f"`{name}` starts with `{prefix}`, which anodize reserves for the code it generates",
        span,
        label="reserved",
        help="rename it",
    )


def quoted_annotation(span: Span, text: str) -> Diagnostic:
    return make(
        "az-signature",
        f"the quoted annotation `{text!r}` in a kernel",
        span,
        label="in this signature",
        help="write the type unquoted; `from __future__ import annotations` keeps working",
    )


def python_number_annotation(span: Span, name: str, alt: str) -> Diagnostic:
    return make(
        "az-signature",
        f"`{name}` is not a kernel type",
        span,
        label="in this signature",
        help=builtin_scalar_help(name) or f"use `{alt}` (kernel scalars have a fixed width)",
    )


def module_value(span: Span, name: str, why: str, **values: object) -> Diagnostic:
    """`why` is a catalogue key: what is wrong with module-level `name`."""
    return make(
        "az-unsupported",
        f"`{name}` {text(why, values)}",
        span,
        label="not readable in a kernel",
        notes=("a kernel reads module-level names from the module's source, without running it",),
        help="bind it once at module level to a number literal, a NumPy scalar of one (`np.float32(0.5)`), "
        "or a table: a tuple of number literals or `np.array([...], dtype=...)`",
    )


def unspecialised_typevar(span: Span, name: str, constraints: tuple[str, ...]) -> Diagnostic:
    return make(
        "az-type",
        f"the type variable `{name}` has no specialisation here",
        span,
        label="which scalar?",
        help=f"a generic kernel is specialised per launch from its arguments' dtypes ({', '.join(constraints)}); "
        "helpers take the specialised types of their arguments",
    )


def bad_constant_annotation(span: Span) -> Diagnostic:
    return make(
        "az-signature",
        "`az.Constant` takes `int`, `float` or `bool`",
        span,
        label="in this signature",
        help="write `n: az.Constant[int]`",
    )


def ignore_in_kernel(span: Span) -> Diagnostic:
    return make(
        "az-ignore",
        "an ignore comment inside a kernel silences nothing",
        span,
        label="ignored",
        notes=("inside kernels and helpers the escape hatch is `with az.unsafe():`; ignore comments "
               "apply only to launch-site (host) diagnostics, which the runtime checks anyway",),
        help="remove the comment, and put what the checker cannot prove under `with az.unsafe():`",
    )


def ignore_bare(span: Span) -> Diagnostic:
    """`# anodize: ignore` with no `[codes]` on a host line."""
    return make("az-ignore", MESSAGES["ignore-bare"], span, label="which codes?", help=HELPS["ignore-name-codes"])


def ignore_unknown_code(span: Span, code: str, close: str | None) -> Diagnostic:
    """`# anodize: ignore[az-nonsense]`: a code the catalogue does not have."""
    hint = HELPS["ignore-did-you-mean"].format(close=close) if close else HELPS["ignore-codes-listed"]
    return make("az-ignore", MESSAGES["ignore-unknown-code"].format(code=code), span, label="unknown code", help=hint)


def ignore_unused(span: Span, code: str) -> Diagnostic:
    """`# anodize: ignore[az-alias]` on a host line where nothing reports `az-alias`."""
    return make(
        "az-ignore",
        MESSAGES["ignore-unused"].format(code=code),
        span,
        label="unused",
        help=HELPS["ignore-remove"].format(code=code),
    )


def internal_error(span: Span, exc: BaseException) -> Diagnostic:
    return make(
        "az-internal",
        f"internal compiler error: {type(exc).__name__}: {exc}",
        span,
        label="while compiling this",
        notes=("this is a bug in anodize, not in your kernel",),
        help="please report it with this file and the output of `anodize doctor`",
    )


_BUILTIN_SCALARS = {"int": ("i64", "i32 u32 u64"), "float": ("f64", "f32"), "bool": ("bool_", "")}


def builtin_scalar_help(annotation: str) -> str | None:
    """The help for a Python `int`, `float` or `bool` annotation on a kernel or helper
    parameter (`builtins.` prefix allowed); None for any other annotation."""
    hit = _BUILTIN_SCALARS.get(annotation.removeprefix("builtins."))
    if hit is None:
        return None
    fixed, others = hit
    alt = f" (or {', '.join(f'`{o}`' for o in others.split())} for another width)" if others else ""
    return (
        f"kernel scalars have a fixed width: write `{fixed}`{alt} instead of `{annotation.removeprefix('builtins.')}`, "
        f"imported with `from anodize import {fixed}`"
    )


def param_type(span: Span, name: str, annotation: str, *, qualname: str = "", witness: bool = False, help: str) -> Diagnostic:
    """An unsupported parameter annotation (`witness`: an `Index1D`/`Index2D` on a kernel);
    Python's `int`/`float`/`bool` (`qualname` `builtins.int`, ..., or unresolved) get the
    fixed-width type to use.  `help` is a catalogue key."""
    builtin = builtin_scalar_help(qualname if qualname else annotation) if not qualname or qualname.startswith("builtins.") else None
    extra = "; a kernel gets its witness from `thread.index_1d()`" if witness else ""
    return _signature(span, f"unsupported type `{annotation}` for parameter `{name}`{extra}", help=builtin or help_text(help, {}))


def not_utf8(span: Span, reason: str) -> Diagnostic:
    """A source file that does not decode as UTF-8 (`reason`: the decoder's)."""
    return syntax_error(span, f"not UTF-8 ({reason})")


# ---- codegen ----
# codegen's frontend reports the language rules through the checker's builders below
# (one code, one wording); only the backend-specific message lives here.


# ---- mypy plugin ----
# Launch-site messages for launches the mypy plugin resolves through types.  The rank and
# block wordings are the ones checker/rules/launch_rank.py writes, so both front ends agree.


def launch_rank_mismatch(span: Span, kernel: str, rank: int, domain: int, decl: Span | None) -> Diagnostic:
    return launch_rank(
        span,
        f"a {rank}-D launch configuration for `{kernel}`, whose contract has `domain={domain}`",
        decl,
        f"`{kernel}` declares domain {domain}",
        help="use `az.LaunchConfig.for_num_elems(n)` for domain 1 and `az.LaunchConfig.for_shape((rows, cols))` for domain 2",
    )


def _show_block(t: tuple[int, ...]) -> str:
    return str(t[0]) if len(t) == 1 else str(tuple(t))


def launch_block_mismatch(
    span: Span, kernel: str, block: tuple[int, ...], contract_block: tuple[int, ...], decl: Span | None
) -> Diagnostic:
    want = _show_block(contract_block)
    return launch_rank(
        span,
        f"launch block {_show_block(block)} differs from the contract's block {want} for `{kernel}`",
        decl,
        f"`{kernel}` declares block {want}",
        help=f"launch with `block={want}`",
    )


def launch_extra_dim(span: Span, kernel: str, what: str, axis: str, size: int, domain: int, decl: Span | None) -> Diagnostic:
    return launch_rank(
        span,
        f"{what} {axis} is {size}, but `{kernel}` has `domain={domain}`: every dimension beyond the domain must be 1",
        decl,
        f"`domain={domain}`",
        help="two threads would share one index witness; launch with a config of the kernel's rank",
    )


def requires_violated(span: Span, kernel: str, relation: str, left: int, right: int) -> Diagnostic:
    return make(
        "az-requires",
        f"this launch of `{kernel}` violates its contract: `{relation}` is `{left}` vs `{right}`",
        span,
        label="sizes known from literals",
        help="the runtime raises `az.ContractViolation` at this launch",
        severity="note",
    )


# ---- checker: ownership and launch rules (checker/rules/*.py) -----------------------------

_WAY_OUT = "with az.unsafe():"


def param_label(name: str, kind: str) -> str:
    return f"`{name}` is declared `{kind}` here"


def shared_write(span: Span, name: str, kind: str, how: str, decl: Span | None = None, **values: object) -> Diagnostic:
    """`how` is a catalogue key: the access (`"how-write"`, `"how-call"` with `method=`)."""
    how = text(how, values)
    return make(
        "az-shared-write",
        f"cannot {how} `{name}`: it is a read-only `{kind}`",
        span,
        label=f"{how} of a shared input",
        secondary=(Label(decl, param_label(name, kind)),) if decl else (),
        notes=("every thread of the launch sees the same input; a write would race with other threads",),
        help=f"declare `{name}` as `DisjointSlice[...]` if each thread writes its own element, "
        "or write the result to a separate output parameter",
    )


def shared_write_via_helper(span: Span, name: str, kind: str, helper: str, param: str, decl: Span | None) -> Diagnostic:
    return make(
        "az-shared-write",
        f"read-only `{name}` is passed to `{helper}`, whose parameter `{param}` is written",
        span,
        label=f"the read-only `{kind}` goes to a written parameter",
        secondary=(Label(decl, f"`{param}` is written or declared as an output here"),) if decl else (),
        help=f"pass an output parameter (`DisjointSlice[...]`) to `{param}` instead of `{name}`",
    )


def shared_rebind(span: Span, target: str, target_kind: str, source: str) -> Diagnostic:
    return make(
        "az-shared-write",
        f"cannot rebind output `{target}` (`{target_kind}`) to read-only `{source}`",
        span,
        label="a read-only input would become writable here",
        help=f"write through `{target}` itself, or declare `{source}` as an output",
    )


NOT_OWN_WITNESS = "not-own-witness"  # the label (a PHRASES key) of a disjoint index the typer rejects


def disjoint_index(
    span: Span,
    name: str,
    kind: str,
    index: str,
    access: str,
    why: str,
    decl: Span | None = None,
    *,
    domain: int = 1,
    **values: object,
) -> Diagnostic:
    """`why`: a key of `catalogue.PHRASES` (the label), filled with `values`."""
    maker = f"thread.index_{domain}d()"
    wit = {1: "i", 2: "ij"}.get(domain, "ijk")
    return make(
        "az-disjoint-index",
        f"`{name}` is a `{kind}`; it can only be {access} at this thread's own witness, not at `{index}`",
        span,
        label=phrase(why, values),
        secondary=(Label(decl, param_label(name, kind)),) if decl else (),
        notes=("another thread may own that element; arithmetic on a witness gives a plain int",),
        help=f"index with the witness itself (`{wit} = {maker}`, then `{name}[{wit}]`); to reach another "
        f"element use an `AtomicSlice`, or `{name}.write_unchecked(j, v)` inside `{_WAY_OUT}`",
    )


def block_witness_access(span: Span, name: str, index: str, access: str) -> Diagnostic:
    """`az-disjoint-index`: an access through a block witness that not only the block's leader makes."""
    values = {"name": name, "index": index, "access": access}
    return make(
        "az-disjoint-index",
        MESSAGES["block-witness-outside-leader"].format(**values),
        span,
        label="every thread of the block may make this access",
        notes=("a block witness names one element per block; the threads of a block share it, so only one "
               "of them may touch it",),
        help=HELPS["block-witness-under-leader"].format(**values),
    )


def disjoint_passed(span: Span, name: str, kind: str, helper: str, param: str, pkind: str) -> Diagnostic:
    return make(
        "az-disjoint-index",
        f"output `{name}` (`{kind}`) is passed to `{helper}` as `{param}: {pkind}`",
        span,
        label="the helper could index it at other threads' elements",
        help=f"declare `{param}` as `{kind}[...]` in `{helper}`",
    )


def disjoint_mixed_mapping(span: Span, name: str, kind: str, second: str, first: str, first_span: Span, *, via: str | None = None) -> Diagnostic:
    """`name` is accessed through two index spaces (`first` at `first_span`, `second` at `span`)."""
    where = f" (inside `{via}`)" if via else ""
    return make(
        "az-disjoint-index",
        f"`{name}` is accessed through two index spaces: {first} and {second}{where}",
        span,
        label=f"an access through {second}",
        secondary=(Label(first_span, f"`{name}` is first accessed through {first} here"),),
        notes=(
            "each index space hands the elements of an output to the threads in its own way (a grid-stride "
            "loop may give each thread runs of 4 consecutive elements, `thread.index_1d()` gives one element "
            "per thread), so one element could get two owners with no barrier between them",
        ),
        help=f"access `{name}` through one mapping: do all the work on `{name}` in one grid-stride loop "
        f"(or through one `thread.index_1d()` witness), or split it into separate kernels",
    )


def index_forge(span: Span, key: str, *, help: str | None = None, **values: object) -> Diagnostic:
    return make(
        "az-index-forge",
        text(key, values),
        span,
        label="a witness can only come from `thread.index_1d()`, `index_2d()`, `index_3d()` or `thread.grid_stride()`",
        help=help_text(help, values) or "get this thread's witness from `thread.index_1d()` (or `index_2d()`) and pass it on unchanged",
    )


def index_domain(span: Span, maker: str, used: int, domain: int, contract: Span | None, *, via: str | None = None) -> Diagnostic:
    good = f"thread.index_{domain}d()"
    what = f"`{maker}`" if via is None else f"`{via}` (which uses `{maker}`)"
    return make(
        "az-index-domain",
        f"{what} gives a {used}-D witness, but the kernel's launch domain is {domain}",
        span,
        label=f"a witness of index space {used}",
        secondary=(Label(contract, f"the contract declares `domain={domain}` here"),) if contract else (),
        help=f"use `{good}`, or change the contract to `domain={used}`",
    )


def index_domain_mixed(span: Span, first: Span) -> Diagnostic:
    return make(
        "az-index-domain",
        "this kernel uses witnesses of two index spaces (1-D, 2-D or 3-D); one of them can never own an element",
        span,
        label="a witness of the other index space",
        secondary=(Label(first, "first witness here"),),
        help="use one index space per kernel, and declare it with `@launch_contract(domain=...)`",
    )


def atomic_plain(span: Span, name: str, access: str, decl: Span | None = None) -> Diagnostic:
    return make(
        "az-atomic",
        f"`{name}` is an `AtomicSlice`; plain {access} is not allowed",
        span,
        label=f"plain {access} of an atomic slice",
        secondary=(Label(decl, param_label(name, "AtomicSlice")),) if decl else (),
        notes=("other threads update it concurrently; only atomic operations are race-free",),
        help=f"use `{name}.add(j, v)`, `{name}.min(j, v)`, `{name}.max(j, v)` or `{name}.exchange(j, v)`",
    )


def atomic_passed(span: Span, name: str, helper: str, param: str, pkind: str) -> Diagnostic:
    return make(
        "az-atomic",
        f"atomic `{name}` is passed to `{helper}` as `{param}: {pkind}`",
        span,
        label="the helper could access it without atomics",
        help=f"declare `{param}` as `AtomicSlice[...]` in `{helper}`",
    )


def atomic_scope(span: Span, scope: str, name: str) -> Diagnostic:
    return make(
        "az-atomic",
        f"`scope=\"{scope}\"` on `{name}`: a block-scoped atomic on global memory races between blocks",
        span,
        label="threads of other blocks update this element too",
        notes=("a block scope orders the operation only among the threads of one block",),
        help='use `scope="device"` (the default) or `scope="system"`',
    )


def atomic_order(span: Span, method: str, order: str, allowed: tuple[str, ...]) -> Diagnostic:
    return make(
        "az-atomic",
        f"`order=\"{order}\"` does not fit an atomic `{method}`",
        span,
        label=f"an atomic `{method}` cannot be `{order}`",
        notes=("an acquire orders later accesses after a read; a release orders earlier accesses before a write",),
        help="use one of " + ", ".join(f'`order="{o}"`' for o in allowed),
    )


def global_write(span: Span, key: str, **values: object) -> Diagnostic:
    return make(
        "az-global-write",
        text(key, values),
        span,
        label="state outside the kernel's arguments",
        notes=("a kernel may write only its output parameters",),
        help="pass the buffer as a `DisjointSlice[...]` or `AtomicSlice[...]` parameter and write that",
    )


def unsafe_op(span: Span, op: str, *, shared: bool = False, call: bool = False) -> Diagnostic:
    """`op`: the operation's code (`az.syncthreads()`); `call` adds the `()`; `shared`: a
    shared-memory access."""
    op = f"{op}()" if call else op
    kind = "shared-memory access" if shared else ""
    return make(
        "az-unsafe",
        f"{kind + ' ' if kind else ''}`{op}` is an unsafe-tier operation outside `{_WAY_OUT}`",
        span,
        label="needs the unsafe tier",
        help=f"wrap it in `{_WAY_OUT}` and document why it is race-free",
    )


def barrier_divergence(span: Span, key: str, reason: Span, reason_key: str, **values: object) -> Diagnostic:
    """`key`: the message (which barrier); `reason_key`: a PHRASES key, why it diverges."""
    return make(
        "az-barrier-divergence",
        text(key, values),
        span,
        label="not every thread of the block may reach this barrier",
        secondary=(Label(reason, phrase(reason_key, values)),),
        notes=("a barrier that some threads of a block skip deadlocks or corrupts the block",),
        help="move the barrier out of the branch or loop so every thread reaches it, "
        "and put only the work under the condition",
    )


def warp_divergence(span: Span, what: str, reason: Span, reason_key: str) -> Diagnostic:
    """`reason_key`: a PHRASES key, why the lanes diverge."""
    return make(
        "az-warp-divergence",
        f"{what} is reachable under control flow that may differ between the lanes of a warp",
        span,
        label="not every lane of the warp may reach this warp operation",
        secondary=(Label(reason, phrase(reason_key, {})),),
        notes=(
            "a full-warp operation needs all 32 lanes of the warp; a lane that skips it leaves the others "
            "reading undefined values or hanging",
            "conditions equal on every lane of a warp are fine: on block ids, on uniform scalars, or on the "
            "warp's index `thread.tid_x() // 32` (with a block x extent that is a multiple of 32)",
        ),
        help="call the warp operation on every lane and put only the use of its result under the condition",
    )


def warp_block(
    span: Span, what: str, kernel: str, block: tuple[int, ...] | None, decl: Span | None, *, has_contract: bool = True
) -> Diagnostic:
    if block is None:
        why = f"the launch contract of `{kernel}` gives no literal `block`" if has_contract else (
            f"kernel `{kernel}` has no launch contract to declare its block"
        )
        msg = f"{what} needs whole warps, but {why}"
        label_text = "no literal block size here" if has_contract else "this kernel has no launch contract"
        help_text = "declare the block in the contract, for example `@launch_contract(domain=1, block=256)`"
    else:
        threads = 1
        for b in block:
            threads *= b
        msg = f"{what} needs whole warps, but kernel `{kernel}` runs blocks of {threads} threads"
        label_text = f"{threads} is not a multiple of 32"
        help_text = "use a block whose thread count is a multiple of 32"
    return make(
        "az-warp-divergence",
        msg,
        span,
        label="a full-warp operation",
        secondary=(Label(decl, label_text),) if decl else (),
        notes=("a block that is not a whole number of warps has a last, partial warp, whose missing lanes never "
               "take part",),
        help=help_text,
    )


def contract(span: Span, key: str, *, help: str | None = None, **values: object) -> Diagnostic:
    return make("az-contract", text(key, values), span, label="in this launch contract", help=help_text(help, values))


def requires_syntax(span: Span, exc: object) -> Diagnostic:
    """The `az-contract` error of a `contract.RequiresSyntaxError` (which carries a catalogue key)."""
    return make("az-contract", str(exc), span, label="in this launch contract", help=HELPS["requires-example"])


def no_contract(span: Span, kernel: str, decl: Span | None) -> Diagnostic:
    return make(
        "az-no-contract",
        f"safe launch of `{kernel}`, which has no launch contract",
        span,
        label="`kernel[config](...)` needs a `@launch_contract`",
        secondary=(Label(decl, f"`{kernel}` is defined here without one"),) if decl else (),
        help=f"add `@launch_contract(domain=1, block=256)` above `{kernel}`, or launch it with "
        f"`{kernel}.unsafe_launch(config, ...)`",
    )


def alias(span: Span, out: str, other_span: Span, other: str, buf: str, bindings: tuple[Label, ...] = ()) -> Diagnostic:
    return make(
        "az-alias",
        f"buffer `{buf}` is passed both as output `{out}` and as `{other}`",
        span,
        label=f"passed as output `{out}` here",
        secondary=(Label(other_span, f"the same buffer is passed as `{other}` here"), *bindings),
        notes=("an output must not overlap any other argument of the launch",),
        help="pass a separate buffer as the output (for example `dev.empty(...)`) and copy it back afterwards",
    )


def launch_rank(span: Span, msg: str, decl: Span | None, decl_text: str, *, help: str) -> Diagnostic:
    return make(
        "az-launch-rank",
        msg,
        span,
        label="launched with this configuration",
        secondary=(Label(decl, decl_text),) if decl else (),
        help=help,
    )


def kernel_source_unavailable(span: Span, kernel: str) -> Diagnostic:
    return _unsupported(
        span,
        f"kernel `{kernel}` without readable source",
        help="define kernels in a `.py` file; anodize reads the source to check and compile them",
    )


def unsupported_here(span: Span, key: str, *, help: str, **values: object) -> Diagnostic:
    """`az-unsupported` outside a kernel body (where the checker cannot follow the code)."""
    return make("az-unsupported", text(key, values), span, label="the checker cannot follow this", help=help_text(help, values))


# ---- checker: shared-memory races (checker/rules/shared_race.py) ---------------------------

_RACE_NOTE = (
    "the checker proves two accesses apart only for the same index injective in the thread id "
    "(`tid`, `tid + k`, `k * tid`, `(tid_y, tid_x)`), for index ranges that guards such as "
    "`if tid < s:` keep apart, and for `tid // 32` written under `lane == 0`"
)


def shared_race(
    span: Span,
    array: str,
    access: str,
    other: Span | None,
    other_access: str,
    *,
    earlier_iteration: bool = False,
    dynamic: bool = False,
) -> Diagnostic:
    """`array`: the array as written, or (`dynamic=True`) the helper whose accesses of
    dynamic shared memory race."""
    if dynamic:
        array = phrase("dynamic-array-in", {"callee": array})
    if other is None:
        return make(
            "az-shared-race",
            f"this {access} of shared `{array}` may race with the same {access} in another thread",
            span,
            label="two threads of the block may write this element between two barriers",
            notes=(_RACE_NOTE,),
            help="index it by the thread id, or guard it so one thread writes (`if tid == 0:`) "
            "and add `az.syncthreads()` before the element is used",
        )
    return make(
        "az-shared-race",
        f"this {access} of shared `{array}` may race with a {other_access} by another thread",
        span,
        label=f"no `az.syncthreads()` separates this {access} from the {other_access} on every path",
        secondary=(
            Label(other, f"the {other_access} it may race with" + (" (in an earlier loop iteration)" if earlier_iteration else "")),
        ),
        notes=(_RACE_NOTE,),
        help="add `az.syncthreads()` between them",
    )


_SAFE_NOTE = (
    "outside `unsafe`, between two barriers a thread writes a shared array only at its own slot "
    "(`buf[w]`, `w = thread.index_in_block()` or `index_in_block_2d()`), and reads an array "
    "written in that interval only at its own slot"
)


def shared_safe_write(span: Span, array: str, index: str) -> Diagnostic:
    """A safe-tier write of a shared array not at the writer's own slot."""
    return make(
        "az-shared-race",
        f"this write of shared `{array}` at `{index}` is not at the thread's own slot",
        span,
        label="another thread of the block may write or read this element in the same barrier interval",
        notes=(_SAFE_NOTE,),
        help=f"write `{array}[w]` with `w = thread.index_in_block()` (`index_in_block_2d()` for a 2-D "
        f"array) and read other slots after `az.syncthreads()`; or prove it race-free by hand in `{_WAY_OUT}`",
    )


def shared_safe_race(span: Span, array: str, access: str, other: Span, other_access: str, *, earlier_iteration: bool = False) -> Diagnostic:
    """A safe-tier access that meets an access of another thread in one barrier interval."""
    return make(
        "az-shared-race",
        f"this {access} of shared `{array}` may meet a {other_access} of the same element by another thread "
        "in one barrier interval",
        span,
        label=(
            f"`{array}` is written in this barrier interval, so it is read here only at the thread's own slot"
            if access == "read"
            else f"another thread reads this slot of `{array}` in the same barrier interval"
        ),
        secondary=(
            Label(other, f"the {other_access}" + (" (in an earlier loop iteration)" if earlier_iteration else "")),
        ),
        notes=(_SAFE_NOTE,),
        help=f"put `az.syncthreads()` between the writes and the reads of other slots; or prove it "
        f"race-free by hand in `{_WAY_OUT}`",
    )


def shared_escape(span: Span, array: str) -> Diagnostic:
    return make(
        "az-shared-race",
        f"shared array `{array}` is used here in a way the race check cannot follow",
        span,
        label="only `name[index]` reads and writes of a shared array are checked",
        help=f"index `{array}` directly where it is used instead of passing or storing the array",
    )
