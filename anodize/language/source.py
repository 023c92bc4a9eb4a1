"""A kernel's source, read for the compiler: the parsed function with its real file
and line offset, and the static name resolution that gives Python objects (the
`anodize` module's functions, `math.*`, builtins) their meaning in a kernel."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import math as pymath
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from anodize.language import messages
from anodize.language.diagnostics import CheckError, Span
from anodize.language.vocab import FENCE_QUALNAMES, MATH_FUNCS, RAW_IDS, SCALARS, SLICE_KINDS, WARP_OPS, WITNESS_MAKERS
from anodize.language.syntax import Source

__all__ = ["SourceInfo", "source_info", "MISSING", "intrinsic_tag", "names_of"]

# ---- source --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceInfo:
    path: str
    first_line: int  # file line of the first source line (the first decorator)
    indent: int  # columns removed by dedent
    text: str  # dedented source
    fdef: ast.FunctionDef

    @cached_property
    def _lines(self) -> Source:
        return Source(self.text, self.path)

    def span(self, node: ast.AST) -> Span:
        """`node`'s span in the file, columns in characters (as the checker reports them)."""
        s = self._lines.span(node)  # in the dedented text
        return Span(
            self.path,
            s.line + self.first_line - 1,
            s.col + self.indent,
            s.end_line + self.first_line - 1,
            s.end_col + self.indent,
        )


_SOURCE_CACHE: dict[object, SourceInfo] = {}


def source_info(fn: Callable[..., Any]) -> SourceInfo:
    """The parsed source of a Python function, with its real file and line offset."""
    code = getattr(fn, "__code__", None)
    # code objects compare equal across files when their bytecode does (co_filename is not
    # compared): two kernels with one body but different annotations must not share an entry
    key = (code, getattr(code, "co_filename", ""), getattr(code, "co_firstlineno", 0))
    hit = _SOURCE_CACHE.get(key)
    if hit is not None:
        return hit
    path = str(inspect.getsourcefile(fn) or getattr(code, "co_filename", "<unknown>"))
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError):
        span = Span.point(path, getattr(code, "co_firstlineno", 1) or 1, 0)
        raise CheckError([messages.kernel_source_unavailable(span, getattr(fn, "__name__", str(fn)))]) from None
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    first = next((ln for ln in lines if ln.strip()), lines[0])
    first_ded = next((ln for ln in text.splitlines() if ln.strip()), "")
    indent = (len(first) - len(first.lstrip())) - (len(first_ded) - len(first_ded.lstrip()))
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise CheckError(
            [messages.syntax_error(Span.point(path, (exc.lineno or 1) + start - 1, (exc.offset or 1) - 1), str(exc.msg))]
        ) from None
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise CheckError([messages.unsupported(Span.point(path, start, 0), "this kernel definition")]) from None
    info = SourceInfo(path, start, indent, text, fdef)  # type: ignore[arg-type]
    if isinstance(fdef, ast.AsyncFunctionDef):
        raise CheckError([messages.unsupported(info.span(fdef), "`async def`")]) from None
    _SOURCE_CACHE[key] = info
    return info


# ---- static name resolution ----------------------------------------------------------------

MISSING = object()
_TABLE: dict[int, tuple[object, tuple[str, ...]]] | None = None


def _intrinsics() -> dict[int, tuple[object, tuple[str, ...]]]:
    """id(object) -> (object, tag) for every Python object the language gives meaning to."""
    global _TABLE
    if _TABLE is not None:
        return _TABLE
    import anodize
    import anodize.math as azmath
    import anodize.shared as azshared
    import anodize.thread as azthread
    import anodize.types as aztypes
    import anodize.warp as azwarp

    t: dict[int, tuple[object, tuple[str, ...]]] = {}

    def put(obj: object, *tag: str) -> None:
        t[id(obj)] = (obj, tag)

    for n in WITNESS_MAKERS:
        put(getattr(azthread, n), "witness", n)
    for n in RAW_IDS:
        put(getattr(azthread, n), "raw", n)
    for n in WARP_OPS:
        put(getattr(azwarp, n), "warp", n)
    for n in MATH_FUNCS:
        put(getattr(azmath, n), "math", n)
        if hasattr(pymath, n):
            put(getattr(pymath, n), "math", n)
    put(anodize.syncthreads, "barrier")
    for qual, kind in FENCE_QUALNAMES.items():  # anodize.threadfence, anodize.warp.sync
        owner, _, attr = qual.rpartition(".")
        put(getattr(importlib.import_module(owner), attr), "fence", kind)
    put(anodize.unsafe, "unsafe")
    put(azshared.array, "shared_array")
    for n in SCALARS:
        put(getattr(aztypes, n), "scalar", n)
    for n in SLICE_KINDS:
        put(getattr(aztypes, n), "slice", n)
    put(aztypes.Index1D, "witness_type", "1")
    put(aztypes.Index2D, "witness_type", "2")
    put(builtins.int, "scalar", "i64")
    put(builtins.float, "scalar", "f64")
    put(builtins.bool, "scalar", "bool_")
    for n in ("abs", "min", "max", "len", "range"):
        put(getattr(builtins, n), "builtin", n)
    _TABLE = t
    return t


def intrinsic_tag(obj: object) -> tuple[str, ...] | None:
    hit = _intrinsics().get(id(obj))
    return hit[1] if hit is not None and hit[0] is obj else None


def names_of(fn: Callable[..., Any]) -> dict[str, Any]:
    env: dict[str, Any] = dict(getattr(fn, "__globals__", {}))
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None) or ()
    if code is not None:
        for name, cell in zip(code.co_freevars, closure, strict=False):
            try:
                env[name] = cell.cell_contents
            except ValueError:
                pass
    return env
