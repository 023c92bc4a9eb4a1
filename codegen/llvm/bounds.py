"""The bounds checks every access of the lowering goes through (a collaborator of
`lower.Lowerer`, `lw.bounds`): `address` / `shared_address` / `addr_dims` give an element's
address and its bounds test, and `guarded` runs the access when the test holds and records a
fault in a cold block otherwise (the fault record: codegen/llvm/lower.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import I64, ScalarTy, WitnessTy

from .types import I8, I64T, SliceVal, mem_type

if TYPE_CHECKING:
    from .lower import Lowerer


class BoundsChecks:
    """The bounds checks of the lowering."""

    def __init__(self, lw: Lowerer) -> None:
        self.lw = lw

    def guarded(self, checked: bool, ok: llir.Value, site: int, fidx: llir.Value, flen: llir.Value, action: Any, result_ty: llir.Type | None) -> llir.Value | None:
        """Run `action` when `ok` holds; otherwise record a fault (and yield 0 for a read)."""
        if not (checked and self.lw.checks_on):
            return action()  # type: ignore[no-any-return]
        self.lw.checks += 1
        b = self.lw.b
        good = self.lw.fn.append_basic_block("bc.ok")
        bad = self.lw.fn.append_basic_block("bc.fail")
        end = self.lw.fn.append_basic_block("bc.end")
        b.cbranch(ok, good, bad).set_weights([1 << 20, 1])  # the fault path is cold
        b.position_at_end(good)
        v = action()
        good_end = b.block
        b.branch(end)
        b.position_at_end(bad)
        self.lw.fault(site, fidx, flen)
        bad_end = b.block
        b.branch(end)
        b.position_at_end(end)
        if result_ty is None:
            return None
        phi = b.phi(result_ty)
        phi.add_incoming(v, good_end)
        phi.add_incoming(llir.Constant(result_ty, None), bad_end)
        return phi

    def index_values(self, index: tuple[ir.Expr, ...]) -> list[llir.Value]:
        if len(index) == 1 and isinstance(index[0].ty, WitnessTy) and index[0].ty.rank >= 2:
            w = self.lw.expr(index[0])
            return [self.lw.b.extract_value(w, k) for k in range(index[0].ty.rank)]
        return [self.lw.conv(self.lw.expr(e), e.ty, I64) for e in index]

    def address(self, sv: SliceVal, index: tuple[ir.Expr, ...], offset: int = 0) -> tuple[llir.Value, llir.Value, llir.Value, llir.Value]:
        """The element's address (a record slice's: the field's, `offset` bytes in), its bounds test."""
        elem = sv.ty.elem
        if isinstance(elem, ScalarTy):
            return self.addr_dims(sv.ptr, mem_type(elem), list(sv.dims), self.index_values(index))
        ok, ptr, fidx, flen = self.addr_dims(sv.ptr, llir.ArrayType(I8, elem.size), list(sv.dims), self.index_values(index))
        if offset:
            ptr = self.lw.b.gep(ptr, [llir.Constant(I64T, offset)], inbounds=True, source_etype=I8)
        return ok, ptr, fidx, flen

    def addr_dims(self, base: llir.Value, elem: llir.Type, dims: list[llir.Value], idx: list[llir.Value]) -> tuple[llir.Value, llir.Value, llir.Value, llir.Value]:
        b = self.lw.b
        if len(dims) == 1:
            ok = b.icmp_unsigned("<", idx[0], dims[0])
            flat, fidx, flen = idx[0], idx[0], dims[0]
        else:  # row-major; the fault names the outermost axis out of range
            oks = [b.icmp_unsigned("<", i, d) for i, d in zip(idx, dims, strict=True)]
            ok = oks[0]
            for o in oks[1:]:
                ok = b.and_(ok, o)
            flat = idx[0]
            for i, d in zip(idx[1:], dims[1:], strict=True):
                flat = b.add(b.mul(flat, d), i)
            fidx, flen = idx[-1], dims[-1]
            for k in range(len(dims) - 2, -1, -1):
                fidx = b.select(oks[k], fidx, idx[k])
                flen = b.select(oks[k], flen, dims[k])
        ptr = b.gep(base, [flat], inbounds=True, source_etype=elem)
        return ok, ptr, fidx, flen

    def shared_address(self, ref: ir.SharedRef, index: tuple[ir.Expr, ...]) -> tuple[llir.Value, llir.Value, llir.Value, llir.Value]:
        gv = self.lw.shared_gv[ref.name]
        if ref.ty.dynamic:  # sized by the launch: `shared_mem` bytes over the element size
            nbytes = self.lw.b.zext(self.lw.t.sreg(self.lw, "dynamic_smem_size", ""), I64T)
            dims: list[llir.Value] = [self.lw.b.udiv(nbytes, llir.Constant(I64T, ref.ty.elem.info.mem_bits // 8))]
        else:
            dims = [llir.Constant(I64T, d) for d in ref.ty.shape]
        return self.addr_dims(gv, mem_type(ref.ty.elem), dims, self.index_values(index))
