"""`breakpoint()` in a kernel on the debug device: pdb at the kernel's line, its variables as locals.

The debugger stops in a frame compiled at the kernel's file and line, so pdb prints the
kernel's own source line, and its locals are the thread's variables: scalars as Python
numbers, a witness as `Witness` (`i.get()`, `w.row()`, `w.col()`, as in the kernel),
slices as NumPy views of the launch's memory, plus `thread_idx` and `block_idx`.  A
scalar changed in pdb (`!x = 3`) is written back, converted to the variable's type.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.language import ir
from anodize.language.halfbits import bits_to_float
from anodize.language.types import ScalarTy, WitnessTy

from . import ops

if TYPE_CHECKING:
    from .interp import Thread


class Witness:
    """A thread's index as pdb shows it: `get()` (Index1D), `row()` / `col()` (Index2D)."""

    def __init__(self, value: Any):
        self._v = value

    def get(self) -> int:
        return self._v if isinstance(self._v, int) else self._v[1]  # type: ignore[no-any-return]

    def row(self) -> int:
        return self._v[0]  # type: ignore[no-any-return]

    def col(self) -> int:
        return self._v[1]  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        if isinstance(self._v, int):
            return f"Index1D({self._v})"
        return f"Index2D(row={self._v[0]}, col={self._v[1]})"


def _view(mem: Any) -> Any:
    if isinstance(mem.view, list):  # a shared array
        return np.array(mem.view)
    arr = np.asarray(mem.view) if len(mem.view) else np.empty(0)
    if mem.is_bool:
        arr = arr.view(np.bool_)
    elif mem.half == "f16":  # (in place, as the other types)
        arr = arr.view(np.float16)
    elif mem.half is not None:  # bf16: the values (NumPy has no bfloat16 of its own)
        arr = np.array([bits_to_float(int(b), mem.half) for b in arr.tolist()], dtype=np.float32)
    return arr.reshape(mem.dims) if len(mem.dims) == 2 else arr


def stop(t: Thread, s: ir.Breakpoint) -> None:
    frame = t.frame
    ns: dict[str, Any] = {}
    for name, v in frame.vars.items():
        ns[name] = Witness(v) if isinstance(frame.types.get(name), WitnessTy) else v
    for name, mem in frame.slices.items():
        ns[name] = _view(mem)
    for name, mem in t.block.shared.items():
        ns.setdefault(mem.name.split(" ", 1)[-1], _view(mem))
    ns["thread_idx"] = t.tid
    ns["block_idx"] = t.ctaid
    before = dict(ns)
    span = s.span
    path = span.path if span else t.run.k.path
    line = span.line if span else t.run.k.line
    # pdb stops at the line after `breakpoint()`, as in plain Python: the kernel's next source line
    code = compile("\n" * (line - 1) + "breakpoint()\npass\n", path, "exec").replace(co_name=t.run.k.name)
    sys.stdout.flush()
    exec(code, {"__name__": f"kernel {t.run.k.name}", "__builtins__": __builtins__}, ns)  # noqa: S102
    for name, ty in frame.types.items():  # write back what the user changed in pdb
        if isinstance(ty, ScalarTy) and name in ns and ns[name] is not before.get(name):
            v = ns[name]
            frame.vars[name] = bool(v) if ty.is_bool else (ops.round_float(float(v), ty) if ty.is_float else ops.wrap(int(v), ty))
