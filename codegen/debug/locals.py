"""The debug device's local values (a mixin of `interp.Thread`): per-thread local arrays (a
Python list per declaration run, private to the thread, bounds-checked whatever the compiler
proved), tuples and unpacking (`codegen/llvm/locals.py` is the lowering's twin)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anodize.language import ir
from anodize.language.halfbits import round_half
from anodize.language.types import LocalArrayTy, TupleTy

from . import ops

if TYPE_CHECKING:
    from .interp import Thread as _Base
else:
    _Base = object


class LocalsInterp(_Base):
    def exec_LocalArrayDecl(self, s: ir.LocalArrayDecl) -> None:
        self.frame.vars[s.name] = [ops.zero(s.ty.elem)] * s.ty.size  # zeroed each time it runs
        self.frame.types[s.name] = s.ty

    def local_data(self, ref: ir.LocalArrayRef) -> list[Any]:
        """The array's elements; one whose declaration has not run on this path (declared in a
        branch not taken) is all zeros, as the lowering's entry-block `alloca` is."""
        data = self.frame.vars.get(ref.name)
        if data is None:
            data = self.frame.vars[ref.name] = [ops.zero(ref.ty.elem)] * ref.ty.size
            self.frame.types[ref.name] = ref.ty
        return data  # type: ignore[no-any-return]

    def _local(self, ref: ir.LocalArrayRef, index: tuple[ir.Expr, ...], node: Any, kind: str) -> tuple[list[Any], int | None]:
        data = self.local_data(ref)
        return data, self.bounds(ref.ty.shape, self.index(index), node, kind, f"local {ref.name}")

    def eval_LocalArrayRead(self, e: ir.LocalArrayRead) -> Any:
        data, flat = self._local(e.array, e.index, e, "read")
        return ops.zero(e.ty) if flat is None else data[flat]

    def exec_LocalArrayWrite(self, s: ir.LocalArrayWrite) -> None:
        value = self.eval(s.value)
        elem = s.array.ty.elem
        if elem.is_half:  # stored as the type's bits, as memory stores it (run.Mem)
            value = round_half(float(value), elem.name)
        data, flat = self._local(s.array, s.index, s, "write")
        if flat is not None:
            data[flat] = value

    def eval_LocalArrayRef(self, e: ir.LocalArrayRef) -> Any:
        raise AssertionError("a local array is not a value")

    def eval_ThreadTileLoad(self, e: ir.ThreadTileLoad) -> None:
        from ..llvm.thread_tiles_io import exec_tile_move

        exec_tile_move(self, e)

    def eval_ThreadTileStore(self, e: ir.ThreadTileStore) -> None:
        from ..llvm.thread_tiles_io import exec_tile_move

        exec_tile_move(self, e)

    def eval_MakeTuple(self, e: ir.MakeTuple) -> Any:
        return tuple(ops.conv(self.eval(v), v.ty, t) for v, t in zip(e.values, e.ty.elems, strict=True))

    def exec_Unpack(self, s: ir.Unpack) -> None:
        value = self.eval(s.value)
        ty = s.value.ty
        assert isinstance(ty, TupleTy)
        f = self.frame
        for name, v, src in zip(s.names, value, ty.elems, strict=True):
            f.vars[name] = ops.conv(v, src, f.types[name])


def zero_value(ty: Any) -> Any:
    """A helper's result when it falls off its end without a `return` (the lowering's zeroed slot)."""
    if isinstance(ty, TupleTy):
        return tuple(ops.zero(t) for t in ty.elems)
    return ops.zero(ty)
