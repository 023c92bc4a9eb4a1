"""NVPTX atomics LLVM does not lower faithfully: a read-modify-write with an ordering
stronger than relaxed, or with the system scope.

LLVM's NVPTX backend (22) emits `atomicrmw` as a relaxed `.gpu`-scoped `atom` whatever
its ordering and sync scope say (it honours both for `cmpxchg`, atomic loads and
stores, and the compare-exchange loops it expands float `min`/`max` into).  Those
operations are emitted here as inline PTX, `atom.<sem>.<scope>.<space>.<op>.<type>`,
with the usual mapping of C++ orderings (libcu++'s): `seq_cst` is `fence.sc.<scope>`
then `atom.acquire`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language.types import ScalarTy

from ..llvm.lower import Target

if TYPE_CHECKING:
    from ..llvm.lower import Lowerer

_SCOPE = {"device": "gpu", "system": "sys", "block": "cta"}
_SEM = {"relaxed": "relaxed", "acquire": "acquire", "release": "release", "acq_rel": "acq_rel", "seq_cst": "acquire"}
_SPACE = {1: ".global", 3: ".shared"}


def sync_scope(scope: str) -> str:
    return "" if scope == "system" else f'syncscope("{scope}") '


def atomic_rmw(t: Target, lw: Lowerer, op: str, ptr: llir.Value, val: llir.Value, ty: ScalarTy, scope: str, order: str) -> llir.Value:
    if (scope == "device" and order == "relaxed") or (ty.is_float and op in ("min", "max")):
        return Target.atomic_rmw(t, lw, op, ptr, val, ty, scope, order)  # LLVM's own lowering is right
    b = lw.b
    if op == "sub":  # PTX has no atom.sub: add the negation (exact for floats too)
        val = b.fneg(val) if ty.is_float else b.sub(llir.Constant(val.type, 0), val)
        op = "add"
    bits = ty.bits
    if op == "add":
        ptype = f"f{bits}" if ty.is_float else f"u{bits}"
    elif op in ("min", "max"):
        ptype = f"{'s' if ty.signed else 'u'}{bits}"
    else:  # exchange, and, or, xor: bitwise
        ptype = f"b{bits}"
    as_bits = ty.is_float and ptype[0] == "b"  # a float exchange moves the bits
    x = b.bitcast(val, llir.IntType(bits)) if as_bits else val
    reg = ("f" if bits == 32 else "d") if ty.is_float and not as_bits else ("r" if bits == 32 else "l")
    sc = _SCOPE[scope]
    fence = f"fence.sc.{sc};\n\t" if order == "seq_cst" else ""
    space = _SPACE.get(getattr(ptr.type, "addrspace", 0), "")
    ptx_op = "exch" if op == "exchange" else op
    text = f"{fence}atom.{_SEM[order]}.{sc}{space}.{ptx_op}.{ptype} $0, [$1], $2;"
    asm = llir.InlineAsm(llir.FunctionType(x.type, [ptr.type, x.type]), text, f"={reg},l,{reg},~{{memory}}", side_effect=True)
    r = b.call(asm, [ptr, x])
    return b.bitcast(r, val.type) if as_bits else r
