"""The typer's state: what one kernel's typing shares (`KernelCtx`) and what one function body's
typing shares (`FnState`), declared in one place.

The typer (typer_fn.py's `FnTyper`) is a set of collaborators -- statements, expressions,
calls, effects, local values, names, range facts, collectives, shared memory, per-thread tiles,
records (and, for a tile kernel, the tile vocabulary) -- each a class in its own module that
holds this state record and the typer (to reach the others), as mypy's `TypeChecker` holds
its `ExpressionChecker`.  Every field a collaborator reads or writes is declared here: no
collaborator keeps state another one reads.

`FnState` also carries the located errors every collaborator raises (`fail`, `type_error`,
`unsupported`: a `_Fail` the statement loop collects, typer_fn.py's `FnTyper.body`).
"""

from __future__ import annotations

import ast
from dataclasses import field
from typing import Any, NoReturn

from anodize.language import ir, messages
from anodize.language.diagnostics import Diagnostic, Span
from anodize.language.fn_types import FnTypes
from anodize.language.ir import FaultSite
from anodize.language.contract import Contract
from anodize.language.records import dataclass
from anodize.language.typer_base import _Fail
from anodize.language.types import LocalArrayTy, SharedTy, SliceTy, Ty

__all__ = ["KernelCtx", "FnState"]


@dataclass(eq=False)
class KernelCtx:
    """One kernel's typing (for one specialisation): shared by its body and every helper body
    typed for it."""

    front: Any  # front.ModuleFront: the module being typed
    path: str
    contract: Contract | None
    sites: list[FaultSite] = field(default_factory=list)
    diags: list[Diagnostic] = field(default_factory=list)  # the diagnostics sink
    helpers: dict[tuple[object, tuple[Ty, ...], frozenset[tuple[str, str]]], ir.FuncIR] = field(default_factory=dict)
    stack: list[object] = field(default_factory=list)  # the helpers being typed (recursion)
    record_returns: dict[int, Any] = field(default_factory=dict)  # id(FuncIR) -> the RecordTy it returns (as a tuple of leaves)
    ranks: set[int] = field(default_factory=set)
    uses_barrier: bool = False
    grid_syncs: bool = False  # the kernel calls `az.grid.sync()` (grid_sync.py places them)
    uses_warp: bool = False
    uses_shared: bool = False
    shared: dict[str, SharedTy] = field(default_factory=dict)
    equal: list[set[str]] = field(default_factory=list)
    equal2d: list[set[str]] = field(default_factory=list)
    equal3d: list[set[str]] = field(default_factory=list)
    # a specialisation: type variable -> scalar name, `az.Constant` parameter -> its value
    spec: dict[str, Any] = field(default_factory=dict)
    consts: dict[str, Any] = field(default_factory=dict)  # Constant parameters with a value
    unknown_consts: set[str] = field(default_factory=set)  # Constant parameters checked without one
    # the values an unknown Constant takes while typed (1, or the shape probe's distinct ones:
    # typer.py `_tile_shape_probe`), and where the probe collects one output's mixed tile shapes
    unknown_values: dict[str, int] = field(default_factory=dict)
    shape_mixed: list[Diagnostic] | None = None
    shape_noted_twice: bool = False  # one output's tile shape noted twice (the probe can tell them apart)
    kernel_name: str = ""
    views: list[FnTypes] = field(default_factory=list)  # each body's typing, keyed by its source (fn_types.py)
    loops: list[ir.While] = field(default_factory=list)  # `while` loops outside `unsafe` (liveness.py)
    unsafe_loops: list[ir.While] = field(default_factory=list)  # and inside it
    unsafe_shared: set[str] = field(default_factory=set)  # shared arrays written in `unsafe`
    tile_id_site: tuple[int, Span] | None = None  # a tile kernel's first program id: (rank, where)

    def site(self, span: Span, kind: str, param: str, message: str = "") -> int:
        self.sites.append(FaultSite(span.path, span.line, span.col + 1, kind, param, message))
        return len(self.sites) - 1


@dataclass(eq=False)
class FnState:
    """One function body's typing (the kernel's, or one specialisation of a helper).

    Two kinds of proofs remove bounds checks: `facts`, the (witness, slice) pairs a guard such
    as `i in c` proves, and `rfacts` (ranges.py), integer range facts from comparisons.  Both
    are scoped the same way (saved and restored around branches and loops, dropped for every
    name a region assigns)."""

    k: KernelCtx
    fdef: ast.FunctionDef
    src: Any  # syntax.Source: spans of the module's nodes
    symbols: Any  # symbols.ModuleSymbols: the module's one table
    is_kernel: bool
    ret: Ty | None = None  # None: inferred from the first `return`
    # the names of the body, by kind (a record local: the record, and its leaves `r.x`)
    vars: dict[str, Ty] = field(default_factory=dict)  # scalars, witnesses, records
    slices: dict[str, SliceTy] = field(default_factory=dict)
    shared: dict[str, SharedTy] = field(default_factory=dict)  # shared arrays, by their source name
    shared_unique: dict[str, str] = field(default_factory=dict)  # source name -> the kernel's unique one
    arrays: dict[str, LocalArrayTy] = field(default_factory=dict)  # local arrays
    unsized: set[str] = field(default_factory=set)  # local arrays sized by a Constant without a value
    locals: dict[str, Ty] = field(default_factory=dict)  # the IR's locals, in declaration order
    failed_names: set[str] = field(default_factory=set)  # names whose assignment was refused
    past_loop: set[str] = field(default_factory=set)  # grid-stride variables read after their loop
    unpack_temps: int = 0  # the compiler's temporaries of `w[q], w[r] = ...` made so far
    # proofs at this point
    facts: set[tuple[str, str]] = field(default_factory=set)
    rfacts: frozenset[Any] = frozenset()
    if_false_facts: frozenset[Any] = frozenset()  # the last `if`'s range facts where its test is false
    # `(lo, hi)` of the variable of each enclosing `for j in range(A, B, S)` of constants whose body
    # never assigns it (shared_safe.slots_in_range: the multi-slot forms `s[w + j * 256]`)
    loop_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    # where the statement being typed stands
    unsafe: int = 0  # `with az.unsafe():` depth
    loops: int = 0  # loop depth
    leader: int = 0  # > 0 under `if thread.is_block_leader():` (collectives.py)
    collective_site: ast.expr | None = None  # the value of the assignment being typed
    record_call_site: ast.expr | None = None  # the one call whose record result is bound (typer_records.py `value`)
    typed: dict[ast.AST, ir.Expr] = field(default_factory=dict)  # each expression typed: the view (fn_types.py) the checker reads

    # ---- located errors ---------------------------------------------------------------------
    def span(self, node: ast.AST) -> Span:
        return self.src.span(node)  # type: ignore[no-any-return]

    def fail(self, diag: Diagnostic) -> NoReturn:
        raise _Fail(diag)

    def unsupported(self, node: ast.AST, key: str, help: str | None = None, **values: object) -> NoReturn:
        """`az-unsupported` at `node`: `key` (and `help`) name texts of the message catalogue."""
        self.fail(messages.unsupported(self.span(node), key, help=help, **values))

    def type_error(self, node: ast.AST, key: str, help: str | None = None, **values: object) -> NoReturn:
        """`az-type` at `node`: `key` (and `help`) name texts of the message catalogue."""
        self.fail(messages.type_error(self.span(node), key, help=help, **values))

    def need_unsafe(self, node: ast.AST, what: str) -> None:
        if not self.unsafe:
            self.fail(messages.unsafe_op(self.span(node), what.strip("`")))
