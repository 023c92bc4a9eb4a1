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

from anodize.language.catalogue import CHECKER_CONSTRUCT_HELPS, CHECKER_CONSTRUCTS, CONSTRUCTS, HELPS, LITERALS, MESSAGES
from anodize.language.diagnostics import Diagnostic, Label, Span

# The builders of the checker's rules and races live in messages_rules.py and messages_races.py,
# the primitives in messages_base.py; all re-exported here, so a call site reads `messages.<builder>`.
from anodize.language.codes import CODES  # (re-exported: the catalogue's codes)
from anodize.language.messages_base import _unsupported, help_text, make, phrase, text
from anodize.language.messages_rules import (
    launch_rank_mismatch, launch_block_mismatch, launch_extra_dim, requires_violated, param_label,
    shared_write, shared_write_via_helper, shared_rebind, NOT_OWN_WITNESS, disjoint_index,
    block_witness_access, disjoint_passed, disjoint_mixed_mapping, index_forge, index_domain,
    index_domain_mixed, atomic_plain, atomic_passed, atomic_scope, atomic_order, global_write,
    unsafe_op, barrier_divergence, grid_sync_not_cooperative, grid_sync_divergence, spin_wait, warp_divergence, warp_block, contract, requires_syntax, outputs_syntax,
    no_contract, alias, launch_rank, kernel_source_unavailable, unsupported_here,
)
from anodize.language.messages_races import (
    shared_race, shared_safe_write, shared_safe_race, shared_escape,
)

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
    "foreign_link": 1,
    "PromotionError": 0,
    "RequiresSyntaxError": 0,
    "RecordError": 1,
}


# builder -> (position, keyword) of its argument that is a key of `catalogue.PHRASES`
# (a reason or label the rule picks); the test checks those keys as it checks the above
PHRASE_KEYED: dict[str, tuple[int | None, str]] = {
    "barrier_divergence": (3, "reason_key"),
    "disjoint_index": (5, "why"),
    "warp_divergence": (3, "reason_key"),
}


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


def type_error(span: Span, key: str, *, label: str = "", help: str | None = None, **values: object) -> Diagnostic:
    return make("az-type", text(key, values), span, label=label, help=help_text(help, values))


def foreign_link(span: Span, key: str, *, help: str | None = None, **values: object) -> Diagnostic:
    """`az-foreign-link`: a foreign device function that does not link with a kernel calling it,
    at its declaration (anodize/foreign.py checks it when the kernel is compiled for a GPU)."""
    return make("az-foreign-link", text(key, values), span, label="declared here", help=help_text(help, values))


def tile_storage_too_large(span: Span, nbytes: int, limit: int, off: tuple[tuple[Span, str], ...]) -> Diagnostic:
    """`az-type` at a tile kernel's name: its shared tiles exceed the static limit; `off` are the
    `tile.matmul`s the layout plan leaves off the tensor cores (whose tiles then count), each
    with why (language/tile_plan.py), as secondary labels."""
    labels = tuple(Label(s, phrase("tile-matmul-in-shared", {"why": why})) for s, why in off)
    return make("az-type", MESSAGES["tile-storage-too-large"].format(nbytes=nbytes, limit=limit), span, secondary=labels,
                help=HELPS["tile-storage-matmul-off"] if labels else HELPS["tile-storage-too-large"])


def fma_matmul(span: Span, why: str, arch: str) -> Diagnostic:
    """`az-fma-matmul`, a warning of the compile for a GPU with tensor cores: a `tile.matmul` the
    layout plan (language/tile_plan.py) leaves on the generic FP32 FMA path, and why."""
    return make("az-fma-matmul", MESSAGES["tile-matmul-fma"].format(why=why, arch=arch), span,
                label="FP32 FMAs here", help=HELPS["tile-matmul-fma"], severity="warning")


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


def record_error(span: Span, exc: object, record: str, line: int) -> Diagnostic:
    """The `az-type` error of a `record_types.RecordError` (a record declaration the compiler
    cannot lay out; it carries a catalogue key), at a use of the record."""
    return make("az-type", MESSAGES["record-declaration"].format(record=record, line=line, why=exc), span)


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


def stale_artifact(span: Span, package: str, kernels: tuple[str, ...], version: str, source: str, archs: str, out: str) -> Diagnostic:
    """A built package (`anodize build`) whose recorded source hash is not the source's now."""
    names = ", ".join(f"`{k}`" for k in kernels)
    return make(
        "az-stale-artifact",
        MESSAGES["stale-artifact"].format(package=package, kernels=names, verb="was" if len(kernels) == 1 else "were"),
        span,
        label="changed since the build",
        notes=(MESSAGES["stale-artifact-note"].format(version=version),),
        help=HELPS["stale-artifact-rebuild"].format(source=source, archs=archs, out=out),
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


def not_decodable(span: Span, encoding: str, reason: str) -> Diagnostic:
    """A source file that does not decode in the encoding its BOM or coding line names."""
    return not_utf8(span, reason) if encoding.replace("_", "-").lower() in ("utf-8", "utf-8-sig") else syntax_error(span, f"not {encoding} ({reason})")


def unreadable_file(span: Span, reason: str) -> Diagnostic:
    """A file `anodize check` was given (or found) that cannot be read: a dangling link, no
    permission, a FIFO or a device (`reason`: the OS's)."""
    return make("az-syntax", f"cannot read this file: {reason}", span, label="not checked",
                help="fix the file's permissions or remove it (a link must point at a regular file)")


def nesting_too_deep(span: Span, limit: int) -> Diagnostic:
    """Code nested deeper than anodize reads (`syntax.NESTING_LIMIT`)."""
    return make("az-unsupported", MESSAGES["nesting-too-deep"].format(limit=limit) + " is not supported", span,
                label="nested too deep", help=HELPS["nesting-too-deep"].format(limit=limit))


# ---- codegen ----
# codegen's frontend reports the language rules through the checker's builders below
# (one code, one wording); only the backend-specific message lives here.
