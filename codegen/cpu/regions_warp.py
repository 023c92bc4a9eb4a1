"""The region-split CPU backend's collectives and warp operations (codegen/cpu/regions.py):
block and warp reductions and scans computed from the threads' slots with the exact bits of
the GPU algorithm (codegen/llvm/collectives.py), and warp shuffles with PTX `shfl.sync`'s
source-lane rules.  A collaborator of `RegionLowerer`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as llir

from anodize.language import ir
from anodize.language.types import I32, ScalarTy

from . import split as cs
from ..llvm.collectives import _combine, _identity, a_type
from ..llvm.types import I1, I32T, I64T

if TYPE_CHECKING:
    from .regions import RegionLowerer


def _c32(v: int) -> llir.Constant:
    return llir.Constant(I32T, v)


def _c64(v: int) -> llir.Constant:
    return llir.Constant(I64T, v)


class RegionCollectives:
    """The collectives and warp operations of a region-split kernel (`lw.warps` of a
    `RegionLowerer`)."""

    def __init__(self, lw: RegionLowerer) -> None:
        self.lw = lw

    # ---- collectives and warp operations ----------------------------------------------------
    def load_lanes(self, name: str, base: llir.Value, ty: ScalarTy) -> tuple[list[llir.Value], ScalarTy]:
        b = self.lw.b
        vals = [b.load(self.lw.slot(name, b.add(base, _c32(i))), typ=self.lw.bases[name][1]) for i in range(32)]
        if ty.is_bool:
            return [b.zext(v, I32T) for v in vals], I32
        return vals, ty

    def warp_tree(self, vals: list[llir.Value], op: str, ty: ScalarTy) -> llir.Value:
        """Lane 0's value after the butterfly (`shfl_xor` 16, 8, 4, 2, 1): every lane's result."""
        d = 16
        while d:
            vals = [_combine(self.lw, op, vals[i], vals[i + d], ty) for i in range(d)]
            d //= 2
        return vals[0]

    def result(self, v: llir.Value, c: ir.Collective) -> llir.Value:
        return self.lw.b.trunc(v, I1) if c.ty.is_bool else v

    def n_Coll(self, node: cs.Coll, lo: llir.Value, hi: llir.Value) -> None:
        b = self.lw.b
        c = node.c
        vty = c.value.ty
        assert isinstance(vty, ScalarTy)
        if c.kind == "block.broadcast":
            v = b.load(self.lw.slot(node.src, _c32(c.src)), typ=self.lw.bases[node.src][1])
            b.store(v, self.lw.frame.vars[node.dst][0])
            return
        if c.kind == "warp.reduce":
            vals, ty = self.load_lanes(node.src, lo, vty)
            b.store(self.result(self.warp_tree(vals, c.op, ty), c), self.lw.frame.vars[node.dst][0])
            return
        nwarps = c.threads // 32
        ty = I32 if vty.is_bool else vty
        acc = self.lw.alloca_b.alloca(a_type(ty), name="acc")
        b.store(_identity(c.op, ty), acc)

        def warp(w: llir.Value) -> None:
            base = b.shl(w, _c32(5))
            vals, _ = self.load_lanes(node.src, base, vty)
            first = b.icmp_unsigned("==", w, _c32(0))
            prefix = b.load(acc, typ=a_type(ty))
            if c.kind == "block.reduce":
                r = self.warp_tree(vals, c.op, ty)
                b.store(b.select(first, r, _combine(self.lw, c.op, prefix, r, ty)), acc)
                return
            x = vals
            for d in (1, 2, 4, 8, 16):  # the inclusive warp scan (shfl_up)
                x = [_combine(self.lw, c.op, x[i - d], x[i], ty) if i >= d else x[i] for i in range(32)]
            for i in range(32):
                if c.inclusive:
                    r = b.select(first, x[i], _combine(self.lw, c.op, prefix, x[i], ty))
                elif i == 0:
                    r = b.select(first, _identity(c.op, ty), prefix)
                else:
                    r = b.select(first, x[i - 1], _combine(self.lw, c.op, prefix, x[i - 1], ty))
                b.store(self.result(r, c), self.lw.slot(node.dst, b.add(base, _c32(i))))
            b.store(b.select(first, x[31], _combine(self.lw, c.op, prefix, x[31], ty)), acc)

        self.lw.counted(_c32(0), _c32(nwarps), warp, "cw")
        if c.kind == "block.reduce":
            b.store(self.result(b.load(acc, typ=a_type(ty)), c), self.lw.frame.vars[node.dst][0])

    def n_Xchg(self, node: cs.Xchg, lo: llir.Value, hi: llir.Value) -> None:
        b = self.lw.b
        op = node.op.op
        vt = self.lw.bases[node.src][1]
        if op in ("ballot", "any", "all"):
            mask = self.lw.alloca_b.alloca(I32T, name="ballot")
            livem = self.lw.alloca_b.alloca(I32T, name="live")
            b.store(_c32(0), mask)
            b.store(_c32(0), livem)

            def vote(t: llir.Value) -> None:
                with b.if_then(self.lw.live(t)):
                    bit = b.shl(_c32(1), b.sub(t, lo))
                    p = b.load(self.lw.slot(node.src, t), typ=vt)
                    b.store(b.or_(b.load(mask, typ=I32T), b.select(p, bit, _c32(0))), mask)
                    b.store(b.or_(b.load(livem, typ=I32T), bit), livem)

            self.lw.counted(lo, hi, vote, "vote")
            m = b.load(mask, typ=I32T)
            r = {"ballot": m, "any": b.icmp_unsigned("!=", m, _c32(0)), "all": b.icmp_unsigned("==", m, b.load(livem, typ=I32T))}[op]
            self.lw.counted(lo, hi, lambda t: b.store(r, self.lw.slot(node.dst, t)), "vr")
            return
        kt = self.lw.bases[node.k][1]

        def shfl(t: llir.Value) -> None:
            with b.if_then(self.lw.live(t)):
                lane = b.zext(b.sub(t, lo), I64T)
                k = b.load(self.lw.slot(node.k, t), typ=kt)
                k64 = b.sext(k, I64T) if kt.width < 64 else k
                if op == "shfl_down":
                    src = b.add(lane, k64)
                elif op == "shfl_up":
                    src = b.sub(lane, k64)
                elif op == "shfl_xor":
                    src = b.xor(lane, b.zext(k, I64T) if kt.width < 64 else b.and_(k, _c64(0xFFFFFFFF)))
                else:
                    src = b.and_(k64, _c64(31))
                n = b.zext(b.sub(hi, lo), I64T)
                ok = b.icmp_unsigned("<", src, n)  # also false for a negative source
                idx = b.select(ok, b.trunc(src, I32T), b.sub(t, lo))
                at = b.add(lo, idx)
                if self.lw.plan.leaves:
                    at = b.select(self.lw.live(at), at, t)
                b.store(b.load(self.lw.slot(node.src, at), typ=vt), self.lw.slot(node.dst, t))

        self.lw.counted(lo, hi, shfl, "shfl")

    # ---- statements inside a region -----------------------------------------------------
