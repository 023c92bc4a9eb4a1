"""The tile lowering's compute loops (codegen/tile/plain.py's pass, split for size): staging
of matmul operands, reductions (one thread per result, shared partials, or whole warps with
shuffles) and matmuls (a register block per thread on the GPU, one thread per element
otherwise), plus the small IR builders the pass uses."""

from __future__ import annotations

from typing import Any

from anodize.language import ir
from anodize.language.tile_ir import TileMatmul, TileReduce, TileTrans, TileTy, TileFull
from anodize.language.types import BOOL, F32, I32, I64, ScalarTy

__all__ = ["TileCompute"]


class _Access:
    """The element loop being built: its shape, its element's coordinates, what it touches."""

    __slots__ = ("shape", "coords", "seen")

    def __init__(self, shape: tuple[int, ...], coords: list[ir.Expr]):
        self.shape = shape
        self.coords = coords
        self.seen: set[tuple[str, bool, bool]] = set()


class _Arr:
    """A tile held in a shared array (a variable or a temporary), as a node of a tile tree."""

    __slots__ = ("ref", "ty")

    def __init__(self, ref: ir.SharedRef, ty: TileTy):
        self.ref = ref
        self.ty = ty


def _c(v: int, ty: ScalarTy = I64) -> ir.Const:
    return ir.Const(v, ty)


def _bin(op: str, a: ir.Expr, b: ir.Expr, ty: ScalarTy = I64) -> ir.Expr:
    return ir.BinOp(op, a, b, ty)


def _unflat(e: ir.Expr, shape: tuple[int, ...]) -> list[ir.Expr]:
    """The coordinates of flat (row-major) element `e` of a tile of `shape` (a constant 0 on
    an axis of extent 1)."""
    out: list[ir.Expr] = []
    inner = 1
    for d in reversed(shape):
        if d == 1:
            out.append(_c(0))
        else:
            q = e if inner == 1 else _bin("//", e, _c(inner))
            out.append(q if inner * d == _size(shape) else _bin("%", q, _c(d)))
        inner *= d
    return out[::-1]


def _flat(coords: list[ir.Expr], shape: tuple[int, ...]) -> ir.Expr:
    """The flat (row-major) index of element `coords` of a tile of `shape`."""
    flat: ir.Expr | None = None
    for c, d in zip(coords, shape, strict=True):
        if d == 1:  # (its coordinate is 0)
            continue
        flat = c if flat is None else _bin("+", _bin("*", flat, _c(d)), c)
    return _c(0) if flat is None else flat


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _fma(a: ir.Expr, b: ir.Expr, c: ir.Expr) -> ir.Expr:
    """a * b + c in f32, rounded once (`fma.rn.f32`; the host's fused multiply-add on the CPU)."""
    return ir.MathCall("fma", (a, b, c), F32)


def _lt(a: ir.Expr, b: ir.Expr, ty: ScalarTy = I64) -> ir.Expr:
    return ir.Compare(("<",), (a, b), BOOL, None, (ty,))


def _le(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Compare(("<=",), (a, b), BOOL, None, (I64,))


def _eq(a: ir.Expr, b: ir.Expr, ty: ScalarTy = I32) -> ir.Expr:
    return ir.Compare(("==",), (a, b), BOOL, None, (ty,))


def _and(*xs: ir.Expr) -> ir.Expr:
    return xs[0] if len(xs) == 1 else ir.BoolOp("and", tuple(xs), BOOL)



class TileCompute:
    """The loops that cannot be evaluated inline: a collaborator of the tile lowering
    (`plain._Lowering`, which holds it as `low.compute`)."""

    def __init__(self, low: Any) -> None:
        self.low = low

    T: int
    def staged(self, x: Any, out: list[ir.Stmt]) -> Any:
        """`x` readable cheaply at any element: an array (or a transposed one, or a fill)."""
        t = x
        while isinstance(t, TileTrans):
            t = t.value
        if isinstance(t, (_Arr, TileFull)):
            return x
        tmp = self.low.temp(x.ty)
        if isinstance(x, TileTrans) and x.ty.rank == 2 and not isinstance(x.value, TileTrans):
            out += self.fill_transposed(tmp, x.value)
        else:
            out += self.low.fill(tmp, x)
        return tmp

    def fill_transposed(self, dest: _Arr, tree: Any) -> list[ir.Stmt]:
        """`dest = tree.T`, walking `tree`'s elements in its own order (so a load from global
        memory stays coalesced) and writing each to its transposed place."""
        ty: TileTy = tree.ty
        dest_cols = dest.ty.shape[1]

        def body(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            pre: list[ir.Stmt] = []
            v = self.low.ev(tree, coords, pre)
            self.low.note(dest.ref.name, True, False)
            flat = _bin("+", _bin("*", coords[1], _c(dest_cols)), coords[0])
            return [*pre, ir.SharedWrite(dest.ref, (flat,), v, False, -1)]

        return self.low.loop(ty, body, self.low.all_inside(tree))

    def reduce(self, x: TileReduce, out: list[ir.Stmt]) -> _Arr:
        """A reduction: with fewer results than threads, `parts` threads share each result
        (each combines a strided share of the reduced elements into a partial), then one
        thread per result combines the partials; else one thread per result."""
        src = self.low.prep(x.value, out)
        sty: TileTy = x.value.ty  # type: ignore[assignment]
        dest = self.low.temp(x.ty)
        elem = x.ty.elem
        extents = [sty.shape[a] for a in x.axes]
        n = 1
        for d in extents:
            n *= d
        op = {"sum": "+", "max": "max", "min": "min"}[x.op]
        warp_parts = self.low.T // x.ty.size if self.low.T % max(1, x.ty.size) == 0 else 0
        if self.low.T > 1 and warp_parts >= 32 and warp_parts % 32 == 0 and warp_parts <= n and elem.bits in (32, 64) and not elem.is_bool:
            return self.reduce_warps(x, src, sty, dest, elem, extents, n, op, warp_parts, out)
        parts = 1
        while parts * 2 * x.ty.size <= self.low.T and parts * 2 <= n:
            parts *= 2

        def combine(acc: ir.Local, coords: list[ir.Expr], r: ir.Expr, pre: list[ir.Stmt]) -> None:
            self.combine_into(x, src, sty, extents, elem, op, acc, coords, r, pre)

        if parts == 1:
            def body(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
                acc = self.low.local(elem, "acc")
                r = self.low.local(I64, "r")
                inner: list[ir.Stmt] = []
                combine(acc, coords, r, inner)
                self.low.note(dest.ref.name, True, True)
                return [ir.Assign(acc.name, self.neutral(x.op, elem)), ir.ForRange(r.name, _c(0), _c(n), _c(1), tuple(inner)),
                        ir.SharedWrite(dest.ref, (e,), acc, False, -1)]

            out += self.low.loop(x.ty, body)
            return dest
        scratch = self.low.temp(TileTy(elem, (x.ty.size * parts,)))

        def partial(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            acc = self.low.local(elem, "acc")
            r = self.low.local(I64, "r")
            res = _bin("//", e, _c(parts))
            rc = _unflat(res, x.ty.shape)
            inner: list[ir.Stmt] = []
            combine(acc, rc, r, inner)
            self.low.note(scratch.ref.name, True, True)
            return [ir.Assign(acc.name, self.neutral(x.op, elem)),
                    ir.ForRange(r.name, _bin("%", e, _c(parts)), _c(n), _c(parts), tuple(inner)),
                    ir.SharedWrite(scratch.ref, (e,), acc, False, -1)]

        out += self.low.loop(scratch.ty, partial)

        def final(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            acc = self.low.local(elem, "acc")
            p = self.low.local(I64, "p")
            self.low.note(scratch.ref.name, False, False)
            self.low.note(dest.ref.name, True, True)
            read = ir.SharedRead(scratch.ref, (_bin("+", _bin("*", e, _c(parts)), p),), False, -1, elem)
            return [ir.Assign(acc.name, self.neutral(x.op, elem)),
                    ir.ForRange(p.name, _c(0), _c(parts), _c(1), (ir.Assign(acc.name, _bin(op, acc, read, elem)),)),
                    ir.SharedWrite(dest.ref, (e,), acc, False, -1)]

        out += self.low.loop(x.ty, final)
        return dest

    def combine_into(self, x: TileReduce, src: Any, sty: TileTy, extents: list[int], elem: ScalarTy, op: str,
                     acc: ir.Local, coords: list[ir.Expr], r: ir.Expr, pre: list[ir.Stmt]) -> None:
        """`acc = acc op src[...]` for reduced element `r` (flat over the reduced axes) of the
        result at `coords`."""
        idx: dict[int, ir.Expr] = {}
        rest = r
        for a, d in reversed(list(zip(x.axes, extents, strict=True))):
            idx[a] = rest if a == x.axes[0] else _bin("%", rest, _c(d))
            rest = _bin("//", rest, _c(d))
        at = [idx[a] if a in idx else coords[a] for a in range(sty.rank)]
        v = self.low.ev(src, at, pre)
        if v.ty != elem:
            v = ir.Cast(v, elem)
        pre.append(ir.Assign(acc.name, _bin(op, acc, v, elem)))

    def reduce_warps(self, x: TileReduce, src: Any, sty: TileTy, dest: _Arr, elem: ScalarTy, extents: list[int],
                     n: int, op: str, parts: int, out: list[ir.Stmt]) -> _Arr:
        """Every thread folds a strided share of one result's elements (`parts` threads per
        result, whole warps), the warp combines its lanes with `shfl.sync.bfly`, lane 0 of each
        warp leaves the warp's value in shared memory, and one thread per result folds those."""
        per = parts // 32
        scratch = self.low.temp(TileTy(elem, (self.low.T // 32,)))
        saved, self.low.acc = self.low.acc, _Access((), [])
        try:
            t = self.low.local(I64, "t")
            acc = self.low.local(elem, "acc")
            r = self.low.local(I64, "r")
            res = _bin("//", t, _c(parts))
            rc = _unflat(res, x.ty.shape)
            inner: list[ir.Stmt] = []
            self.combine_into(x, src, sty, extents, elem, op, acc, rc, r, inner)
            body: list[ir.Stmt] = [ir.Assign(t.name, self.low.tid()), ir.Assign(acc.name, self.neutral(x.op, elem)),
                                   ir.ForRange(r.name, _bin("%", t, _c(parts)), _c(n), _c(parts), tuple(inner))]
            for m in (16, 8, 4, 2, 1):
                other = ir.WarpOp("shfl_xor", (acc, _c(m, I32)), elem)
                body.append(ir.Assign(acc.name, _bin(op, acc, other, elem)))
            lane0 = _eq(_bin("%", t, _c(32)), _c(0), I64)
            body.append(ir.If(lane0, (ir.SharedWrite(scratch.ref, (_bin("//", t, _c(32)),), acc, False, -1),), ()))
            self.low.note(scratch.ref.name, True, False)
            seen = self.low.acc.seen
        finally:
            self.low.acc = saved
        self.low.uses_warp = True
        out += [*self.low.sync(seen), *body]

        def final(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            a = self.low.local(elem, "acc")
            p = self.low.local(I64, "p")
            self.low.note(scratch.ref.name, False, False)
            self.low.note(dest.ref.name, True, True)
            read = ir.SharedRead(scratch.ref, (_bin("+", _bin("*", e, _c(per)), p),), False, -1, elem)
            return [ir.Assign(a.name, self.neutral(x.op, elem)),
                    ir.ForRange(p.name, _c(0), _c(per), _c(1), (ir.Assign(a.name, _bin(op, a, read, elem)),)),
                    ir.SharedWrite(dest.ref, (e,), a, False, -1)]

        out += self.low.loop(x.ty, final)
        return dest

    @staticmethod
    def neutral(op: str, ty: ScalarTy) -> ir.Expr:
        if op == "sum":
            return ir.Const(0.0 if ty.is_float else 0, ty)
        big = op == "min"
        if ty.is_float:
            return ir.Const(float("inf") if big else float("-inf"), ty)
        if ty.is_bool:
            return ir.Const(big, ty)
        bits = ty.bits
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if ty.signed else (0, (1 << bits) - 1)
        return ir.Const(hi if big else lo, ty)

    def matmul(self, x: TileMatmul, out: list[ir.Stmt], want: _Arr | None = None) -> _Arr:
        """`x` into `want` (the variable assigned) when that is safe in place, else a temporary."""
        a = self.staged(self.low.prep(x.x, out), out)
        b = self.staged(self.low.prep(x.y, out), out)
        acc = self.low.prep(x.acc, out) if x.acc is not None else None
        in_place = want is not None and not (
            self.low.reads(a, want.ref) or self.low.reads(b, want.ref) or (acc is not None and self.low.hazard(acc, want.ref, x.ty.shape))
        )
        dest = want if in_place and want is not None else self.low.temp(x.ty)
        kdim = x.x.ty.shape[1]  # type: ignore[union-attr]
        micro = self.micro_shape(*x.ty.shape)
        if micro is not None:
            out += self.matmul_micro(x, a, b, acc, dest, kdim, *micro)
            return dest

        def body(e: ir.Expr, coords: list[ir.Expr]) -> list[ir.Stmt]:
            s = self.low.local(F32, "dot")
            pre: list[ir.Stmt] = []
            init = self.low.ev(acc, coords, pre) if acc is not None else ir.Const(0.0, F32)
            kk = self.low.local(I64, "k")
            inner: list[ir.Stmt] = []
            av = self.low.ev(a, [coords[0], kk], inner)
            bv = self.low.ev(b, [kk, coords[1]], inner)
            av = av if av.ty == F32 else ir.Cast(av, F32)
            bv = bv if bv.ty == F32 else ir.Cast(bv, F32)
            inner.append(ir.Assign(s.name, _fma(av, bv, s)))
            self.low.note(dest.ref.name, True, True)
            return [*pre, ir.Assign(s.name, init), ir.ForRange(kk.name, _c(0), _c(kdim), _c(1), tuple(inner)),
                    ir.SharedWrite(dest.ref, (e,), s, False, -1)]

        out += self.low.loop(x.ty, body)
        return dest

    def micro_shape(self, m: int, n: int) -> tuple[int, int] | None:
        """(rows, cols) of the block of a matmul's result each thread computes in registers, so
        that the threads cover it exactly once; None when no such split fits."""
        if self.low.T == 1:
            return None
        fits = [(r, c) for r in (8, 4, 2, 1) for c in (8, 4, 2, 1)
                if m % r == 0 and n % c == 0 and (m // r) * (n // c) == self.low.T and r * c >= 2]
        if not fits:
            return None
        return min(fits, key=lambda rc: (-rc[0] * rc[1], abs(rc[0] - rc[1]), -rc[1]))

    def matmul_micro(self, x: TileMatmul, a: Any, b: Any, acc: Any, dest: _Arr, kdim: int, mr: int, nc: int) -> list[ir.Stmt]:
        """The matmul with a register block per thread: thread t owns rows `t // (N / nc) + r * (M / mr)`
        and columns `t % (N / nc) + c * (N / nc)` (strided, so a warp's reads of `b` are
        consecutive and its reads of `a` one broadcast), accumulating mr x nc sums in registers
        over K, then writing them."""
        m, n = x.ty.shape
        saved, self.low.acc = self.low.acc, _Access((), [])  # no element here is "the loop's own"
        try:
            t = self.low.local(I64, "t")
            body: list[ir.Stmt] = [ir.Assign(t.name, self.low.tid())]
            cols_per = n // nc
            tr, tc = self.low.local(I64, "tr"), self.low.local(I64, "tc")
            body += [ir.Assign(tr.name, _bin("//", t, _c(cols_per))), ir.Assign(tc.name, _bin("%", t, _c(cols_per)))]
            rows = [self.low.local(I64, "row") for _ in range(mr)]
            cols = [self.low.local(I64, "col") for _ in range(nc)]
            body += [ir.Assign(v.name, _bin("+", tr, _c(r * (m // mr)))) for r, v in enumerate(rows)]
            body += [ir.Assign(v.name, _bin("+", tc, _c(c * cols_per))) for c, v in enumerate(cols)]
            sums = [[self.low.local(F32, "dot") for _ in range(nc)] for _ in range(mr)]
            for r in range(mr):
                for c in range(nc):
                    if acc is None:
                        body.append(ir.Assign(sums[r][c].name, ir.Const(0.0, F32)))
                    else:
                        v = self.low.ev(acc, [rows[r], cols[c]], body)
                        body.append(ir.Assign(sums[r][c].name, v if v.ty == F32 else ir.Cast(v, F32)))
            kk = self.low.local(I64, "k")
            inner: list[ir.Stmt] = []
            avs = [self.low.local(F32, "a") for _ in range(mr)]
            bvs = [self.low.local(F32, "b") for _ in range(nc)]
            for r, av in enumerate(avs):
                v = self.low.ev(a, [rows[r], kk], inner)
                inner.append(ir.Assign(av.name, v if v.ty == F32 else ir.Cast(v, F32)))
            for c, bv in enumerate(bvs):
                v = self.low.ev(b, [kk, cols[c]], inner)
                inner.append(ir.Assign(bv.name, v if v.ty == F32 else ir.Cast(v, F32)))
            for r in range(mr):
                for c in range(nc):
                    sv = sums[r][c]
                    inner.append(ir.Assign(sv.name, _fma(avs[r], bvs[c], sv)))
            body.append(ir.ForRange(kk.name, _c(0), _c(kdim), _c(1), tuple(inner)))
            for r in range(mr):
                for c in range(nc):
                    flat = _bin("+", _bin("*", rows[r], _c(n)), cols[c])
                    body.append(ir.SharedWrite(dest.ref, (flat,), sums[r][c], False, -1))
            self.low.note(dest.ref.name, True, False)
            seen = self.low.acc.seen
        finally:
            self.low.acc = saved
        return [*self.low.sync(seen), *body]

