"""The message catalogue (re-exported by messages.py): the launch-site messages of the mypy
plugin, and the checker's ownership and launch rules (checker/rules/*.py)."""

from __future__ import annotations

from anodize.language.catalogue import HELPS, MESSAGES
from anodize.language.diagnostics import Diagnostic, Label, Span
from anodize.language.messages_base import help_text, make, phrase, text, _unsupported

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


def grid_sync_not_cooperative(span: Span) -> Diagnostic:
    """`az-contract`: `az.grid.sync()` in a kernel whose contract is not cooperative."""
    return make(
        "az-contract",
        MESSAGES["grid-sync-not-cooperative"],
        span,
        label="a barrier across every block of the grid",
        notes=("the blocks of an ordinary launch need not be resident together: a block waiting for one "
               "that has not started would wait for ever",),
        help=HELPS["grid-sync-add-cooperative"],
    )


def grid_sync_divergence(span: Span, reason: Span, why: str) -> Diagnostic:
    """`az-barrier-divergence` of `az.grid.sync()`: control flow that may differ between blocks;
    `why` (language/grid_sync.py): "return" (a return before it), "leave" (a loop around it left
    early) or "control" (a condition or a trip count)."""
    if why == "return":
        label = phrase("grid-divergent-return", {})
    elif why == "leave":
        label = phrase("grid-divergent-leave", {})
    else:
        label = phrase("grid-divergent-control", {})
    return make(
        "az-barrier-divergence",
        text("barrier-divergent-grid-sync", {}),
        span,
        label="not every thread of the grid may reach this barrier",
        secondary=(Label(reason, label),),
        notes=("a grid-wide barrier that some block skips deadlocks the grid",),
        help=HELPS["grid-sync-uniform"],
    )


def spin_wait(span: Span, read: Span | None) -> Diagnostic:
    """`az-spin-wait`: a loop whose exit depends on memory other threads write (liveness.py)."""
    return make(
        "az-spin-wait",
        "this loop waits on memory other threads write: whether it ends depends on the scheduler",
        span,
        label="a spin-wait outside `with az.unsafe():`",
        secondary=(Label(read, "its exit depends on this read"),) if read is not None else (),
        notes=("the blocks of a grid need not be resident together, and the CPU backend runs a "
               "block's threads in turn between barriers: a thread spinning on another's write may never see it",),
        help="wait with a barrier (`az.syncthreads()`) or a block collective; across blocks, with "
        "`az.grid.sync()` in a kernel whose contract says `cooperative=True`, or split the kernel in two "
        "launches; or prove it live by hand in `with az.unsafe():`",
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


def outputs_syntax(span: Span, exc: object) -> Diagnostic:
    """The `az-contract` error of a `RequiresSyntaxError` raised while parsing `outputs=`."""
    return make("az-contract", str(exc), span, label="in this launch contract", help=help_text("outputs-example", {}))


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
