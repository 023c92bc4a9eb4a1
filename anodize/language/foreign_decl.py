"""A foreign device function's declaration, read from the module's source by the front end:

    sigmoid = az.foreign.device_function(PTX, "fast_sigmoid", {"x": f32}, returns=f32)

binds `sigmoid` to a `ForeignDecl` in the module's symbol table (symbols.py): the function's
PTX symbol (a string literal), each parameter's scalar type (a literal dict of scalar types, as
a kernel annotates its parameters) and the result's (`returns=`).  A kernel's call
`sigmoid(x)` is typed against it (typer_calls.py) like an `@az.func` helper's; the PTX itself is
a value of the running program, which the GPU codegen links (anodize/foreign.py)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from .records import dataclass

__all__ = ["DEVICE_FUNCTION", "ForeignDecl", "read_decl"]

DEVICE_FUNCTION = "az.foreign.device_function"  # its canonical name (intrinsics.canonical)
# the scalars a foreign device function passes and returns (a PTX `.b32` / `.b64` parameter each)
SCALARS = frozenset(("i32", "u32", "i64", "u64", "f32", "f64"))


@dataclass(frozen=True)
class ForeignDecl:
    """A declared foreign device function; `error` says why it cannot be read: "literal" (the name
    or signature is not a literal), "scalars" (a parameter or the result is not a scalar)."""

    symbol: str = ""
    params: tuple[tuple[str, str], ...] = ()  # (name, scalar: a key of vocab.SCALARS)
    ret: str = ""
    error: str = ""


def _arg(call: ast.Call, pos: int, name: str) -> ast.expr | None:
    kw = [k.value for k in call.keywords if k.arg == name]
    if kw:
        return kw[0]
    return call.args[pos] if len(call.args) > pos else None


def read_decl(call: ast.Call, scalar_of: Callable[[ast.expr], str | None]) -> ForeignDecl:
    """The declaration `call` (a call of `az.foreign.device_function`) makes; `scalar_of` names
    the scalar type an annotation spells (None for anything else)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return ForeignDecl(error="literal")
    name, sig, ret = _arg(call, 1, "name"), _arg(call, 2, "signature"), _arg(call, 3, "returns")
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier()):
        return ForeignDecl(error="literal")
    if not isinstance(sig, ast.Dict) or ret is None:
        return ForeignDecl(error="literal")
    params: list[tuple[str, str]] = []
    for k, v in zip(sig.keys, sig.values, strict=True):
        scalar = scalar_of(v) if v is not None else None
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)) or scalar not in SCALARS:
            return ForeignDecl(error="scalars")
        params.append((k.value, scalar))
    rscalar = scalar_of(ret)
    if rscalar not in SCALARS:
        return ForeignDecl(error="scalars")
    return ForeignDecl(name.value, tuple(params), str(rscalar))
