"""The one front end: a module parsed once, its names resolved once, each contract read
once and each kernel typed once.

    front = front_for_source(source, path)       # cached per (path, source)
    front = front_of_function(fn)                # the module a kernel's function lives in
    fdef  = front.kernel_def(fn)                 # its `def`, found by name and line
    contract, diags = front.contract(fdef)
    typed = front.typed(fdef)                    # TypedKernel: .ir (KernelIR) or .diagnostics

The checker's rules, the typer (and through it codegen) and the runtime all read the
same `ModuleFront`: the checker builds its kernel model on `front.tree`/`front.names`,
reports `front.contract(...)` and `front.typed(...)` diagnostics, and the compile path
lowers `front.typed(...).ir`.  Nothing here imports or runs user code: the source is
read through `linecache` (which also holds notebook cells).
"""

from __future__ import annotations

import ast
import hashlib
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Iterator
from anodize.language.records import dataclass
from anodize.language.sources import constant_key, module_source, spec_key  # noqa: F401  (re-exported)
from functools import cached_property
from itertools import product
from typing import Any, TypeVar

from anodize.language import messages
from anodize.language.contract import Contract
from anodize.language.contract_schema import read_contract
from anodize.language.diagnostics import CheckError, Diagnostic, Span
from anodize.language.module_slice import dependency_slice, text_slice
from anodize.language.names import Names, first_line
from anodize.language.param_annotations import typevars_of
from anodize.language.symbols import ModuleSymbols
from anodize.language.syntax import NestingTooDeep, Source, collector_paused, parse, read_source  # noqa: F401  (read_source re-exported: anodize/kernel.py)

__all__ = [
    "ModuleFront", "TypedKernel", "cached_front", "front_for_source", "front_of_function", "kernel_of", "kernel_contract",
    "source_digest", "stand_in_function",
]


@dataclass(frozen=True)
class TypedKernel:
    """A kernel's typed model, or the located diagnostics that stopped it."""

    ir: Any  # ir.KernelIR, None when `diagnostics` has an error
    diagnostics: tuple[Diagnostic, ...]
    # each body typed for it (the kernel's, its helpers'): fn_types.FnTypes, kept when typing failed
    views: tuple[Any, ...] = ()


class ModuleFront:
    TYPED_KEEP = 32  # typed models kept per module; past it the oldest specialisations go (typed again on demand)

    def __init__(self, source: str, path: str, tree: ast.Module | None = None):
        self.source = source
        self.path = path
        self.tree = tree if tree is not None else parse(source)
        self.src = Source(source, path)
        self.names = Names(self.tree, source)
        self._contracts: dict[int, tuple[Contract | None, list[Diagnostic]]] = {}
        self._typed: dict[tuple[int, tuple[tuple[str, Any], ...]], TypedKernel] = {}
        self._helpers: dict[int, Any] = {}
        self._members: dict[tuple[int, int], list[tuple[tuple[str, Any], ...]]] = {}
        self._lock = threading.Lock()

    @cached_property
    def symbols(self) -> ModuleSymbols:
        return ModuleSymbols(self.tree, self.names, self.source)

    @cached_property
    def digest(self) -> str:
        return source_digest(self.source)

    # -- the module's device functions ---------------------------------------------------------
    def functions(self) -> Iterator[tuple[str, ast.FunctionDef]]:
        """(qualified name, def) of every top-level function and class-level method."""
        for s in self.tree.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield s.name, s  # type: ignore[misc]
            elif isinstance(s, ast.ClassDef):
                for inner in s.body:
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield f"{s.name}.{inner.name}", inner  # type: ignore[misc]

    def kernels(self) -> list[ast.FunctionDef]:
        return [f for _, f in self.functions() if self.symbols.function_kind(f) == "kernel"]

    def find(self, qualname: str, line: int) -> ast.FunctionDef | None:
        """The function named `qualname` whose first line (first decorator) is `line`; else
        the last one of that name (the binding the module ends with)."""
        last = None
        for q, f in self.functions():
            if q == qualname:
                if first_line(f) == line or f.lineno == line:
                    return f
                last = f
        return last

    # -- contracts and types, once each -------------------------------------------------------------
    def contract(self, fdef: ast.FunctionDef) -> tuple[Contract | None, list[Diagnostic]]:
        hit = self._contracts.get(id(fdef))
        if hit is None:
            hit = self._contracts[id(fdef)] = read_contract(self, fdef)
        return hit

    def typed(self, fdef: ast.FunctionDef, spec: tuple[tuple[str, Any], ...] = ()) -> TypedKernel:
        """The kernel's typed model for one specialisation (type variable -> scalar name,
        `az.Constant` parameter -> value; empty for a kernel that is not generic)."""
        key = (id(fdef), spec_key(spec))
        hit = self._typed.get(key)
        if hit is not None:
            return hit
        with self._lock:  # a runtime may compile two kernels of one module on two threads
            hit = self._typed.get(key)
            if hit is None:
                hit = self._typed[key] = _typer().type_kernel(self, fdef, spec)
                if spec and len(self._typed) > self.TYPED_KEEP:  # many values of one Constant: keep the newest
                    for old in [k for k in self._typed if k[1]][: len(self._typed) - self.TYPED_KEEP]:
                        del self._typed[old]
        return hit

    def helper_types(self, fdef: ast.FunctionDef) -> Any:
        """A helper's body typed on its own, from its annotations (`fn_types.FnTypes`, None when
        it cannot be: a missing annotation, a type variable)."""
        key = id(fdef)
        if key not in self._helpers:
            with self._lock:
                if key not in self._helpers:
                    self._helpers[key] = _typer().type_helper(self, fdef)
        return self._helpers[key]

    def members(self, fdef: ast.FunctionDef, limit: int = 64) -> list[tuple[tuple[str, Any], ...]]:
        """Every specialisation `anodize check` types: each member of each type variable's
        constraint (their product, at most `limit`), Constant parameters left unknown."""
        key = (id(fdef), limit)
        hit = self._members.get(key)
        if hit is not None:  # (the checker's rules and the compile path ask per kernel)
            return hit
        tvs = typevars_of(self.symbols, fdef)
        if not tvs:
            out: list[tuple[tuple[str, Any], ...]] = [()]
        else:
            names = sorted(tvs)
            combos = list(product(*(tvs[n] for n in names)))[:limit]
            out = [tuple(zip(names, c, strict=True)) for c in combos]
        self._members[key] = out
        return out


# ---- the cache: one front per module source -----------------------------------------------

_FRONTS: OrderedDict[str, ModuleFront] = OrderedDict()
_FRONTS_LOCK = threading.Lock()
_KEEP = 64


_LAST_DIGEST: tuple[str, str] | None = None  # (the source last hashed, the object itself: its id is not reused; its digest)


def source_digest(source: str) -> str:
    """The SHA-256 of a module's text (hex), once for the text last asked about: a check asks
    for the front of a source twice (`cached_front`, then `front_for_source`), and hashing a
    50,000-line module costs 0.2% of checking it."""
    global _LAST_DIGEST
    last = _LAST_DIGEST
    if last is not None and last[0] is source:
        return last[1]
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    _LAST_DIGEST = (source, digest)
    return digest


def cached_front(source: str, path: str) -> ModuleFront | None:
    """The front of this source if one was built already (no parse otherwise)."""
    key = path + "\0" + source_digest(source)
    with _FRONTS_LOCK:
        return _FRONTS.get(key)


def front_for_source(source: str, path: str, tree: ast.Module | None = None) -> ModuleFront:
    """The front of one module's source (a source seen before returns the same front)."""
    key = path + "\0" + source_digest(source)
    with _FRONTS_LOCK:
        hit = _FRONTS.get(key)
        if hit is not None:
            _FRONTS.move_to_end(key)
            return hit
    front = ModuleFront(source, path, tree)
    with _FRONTS_LOCK:
        front = _FRONTS.setdefault(key, front)
        while len(_FRONTS) > _KEEP:
            _FRONTS.popitem(last=False)
    return front


def front_of_function(fn: Callable[..., Any]) -> ModuleFront:
    """The front of the module `fn` was defined in (a stand-in's own front: `stand_in_function`);
    CheckError when its source is unavailable."""
    own = getattr(fn, "__anodize_front__", None)
    if isinstance(own, ModuleFront):
        return own
    path, text = module_source(fn)
    name = getattr(fn, "__name__", "?")
    line = getattr(getattr(fn, "__code__", None), "co_firstlineno", 1) or 1
    if not text:
        raise CheckError([messages.kernel_source_unavailable(Span.point(path or "<unknown>", line, 0), name)]) from None
    return front_or_error(text, path)


def front_or_error(text: str, path: str) -> ModuleFront:
    """The front of a module's source, or CheckError with the diagnostic `anodize check` gives
    for a source that does not parse or nests deeper than anodize reads."""
    return _or_error(lambda: front_for_source(text, path), text, path)


def sliced_front(text: str, path: str, name: str, min_functions: int) -> tuple[ModuleFront, ast.FunctionDef | None]:
    """The front of the top-level function `name`'s slice of the module (module_slice.py) and
    its `def` there; else (no such function, fewer than `min_functions` top-level functions,
    nothing to leave out) the whole module's front and None.  The slice is found without the
    module's tree when it can be (module_slice.py `text_slice`: every piece of the module
    compiled by CPython's parser, its `ast` built for the slice alone), else from the tree of
    the module parsed whole: CheckError as `front_or_error` raises it."""
    with collector_paused():  # (the whole module's tree is freed, by reference counting, on return)
        quick = text_slice(text, name, min_functions)
        if quick is not None:  # (the module is Python; its slice found without parsing it whole)
            front = front_or_error(quick[0], path)
            mine = front.find(name, quick[1])
            if mine is not None:
                return front, mine
        tree = parse_or_error(text, path)
        fdef = next((s for s in reversed(tree.body) if isinstance(s, ast.FunctionDef) and s.name == name), None)
        sliced = dependency_slice(tree, text, fdef, min_functions) if fdef is not None else None
        if fdef is not None and sliced is not None:
            front = front_or_error(sliced, path)
            mine = front.find(name, fdef.lineno)
            if mine is not None:
                return front, mine
    return _or_error(lambda: front_for_source(text, path, tree), text, path), None


def parse_or_error(text: str, path: str) -> ast.Module:
    """The module's tree (no front built), or CheckError as `front_or_error` raises it."""
    return _or_error(lambda: parse(text), text, path)


_T = TypeVar("_T")


def _or_error(step: Callable[[], _T], text: str, path: str) -> _T:
    try:
        return step()
    except SyntaxError as e:
        raise CheckError([messages.syntax_error(Span.point(path, e.lineno or 1, max((e.offset or 1) - 1, 0)), e.msg or "")],
                         {path: text}) from None
    except NestingTooDeep as e:
        raise CheckError([messages.nesting_too_deep(Source(text, path).span(e.node), e.limit)], {path: text}) from None
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes; the parser's own limits
        raise CheckError([messages.syntax_error(Span.point(path, 1, 0), (str(e) or type(e).__name__).rstrip("."))], {path: text}) from None


def kernel_of(fn: Callable[..., Any]) -> tuple[ModuleFront, ast.FunctionDef]:
    """The front and the `def` of a kernel or helper function; CheckError when the front end
    cannot see it (nested, built dynamically, hidden by `import *`)."""
    front = front_of_function(fn)
    qual = getattr(fn, "__qualname__", getattr(fn, "__name__", "?"))
    line = getattr(getattr(fn, "__code__", None), "co_firstlineno", 1) or 1
    fdef = front.find(qual, line)
    if fdef is None:
        raise CheckError(
            [messages.unsupported_here(
                Span.point(front.path, line, 0),
                "checker-find-kernel-module",
                help="define-kernels-top-level", kernel=getattr(fn, '__name__', qual))],
            {front.path: front.source},
        ) from None
    return front, fdef


def kernel_contract(kernel: Any) -> Contract | None:
    """A kernel object's contract, as the front end reads it (CheckError when malformed)."""
    front, fdef = kernel_of(getattr(kernel, "fn", kernel))
    contract, diags = front.contract(fdef)
    if diags:
        raise CheckError(diags, {front.path: front.source}) from None
    return contract


def stand_in_function(front: ModuleFront, qualname: str, fdef: ast.FunctionDef) -> Callable[..., Any]:
    """A function object that names `fdef` (file, first line, qualified name) without running
    its module: what `anodize compile FILE` wraps in a `Kernel`, so that compiling a script
    never runs it.  Its body is empty; the front end reads the real one from `front` (the
    module's, or the kernel's slice of it: `source_kernels`), which it carries."""
    line = first_line(fdef)
    stub = compile("\n" * (line - 1) + f"def {fdef.name}():\n    pass\n", front.path, "exec")
    code = next(c for c in stub.co_consts if isinstance(c, types.CodeType))
    fn = types.FunctionType(code, {"__name__": "__anodize_source__"}, fdef.name)
    fn.__qualname__ = qualname
    fn.__module__ = "__anodize_source__"
    fn.__doc__ = ast.get_docstring(fdef)
    fn.__anodize_front__ = front  # type: ignore[attr-defined]
    return fn


def _typer() -> Any:
    """language/typer.py, loaded by the first kernel typed (decorating a kernel, or checking a
    module without kernels, does not load the typer; it imports this module)."""
    global _TYPER
    if _TYPER is None:  # (an import statement per kernel typed cost more than the lookup)
        from anodize.language import typer

        _TYPER = typer
    return _TYPER


_TYPER: Any = None
