"""The staging of a tensor-core operand tile in shared memory (cp.async 16-byte copies into a
swizzled row-major tile, or predicated 2-byte loads where rows are not 16-byte aligned) and the
swizzled offsets ldmatrix reads it at: shared by the mma.sync mainloop (codegen/tile/mma.py) and
the register-A matmul (codegen/tile/mma_regs.py)."""

from __future__ import annotations

import os

import llvmlite.ir as llir

from ..tensorcore import inline_ptx as P
from ..tensorcore.gemm import _swizzle
from ..tensorcore.inline_ptx import I32, I64, c32, c64

__all__ = ["_Operand", "_rowmajor", "whole_tile"]


def whole_tile() -> bool:
    """`ANODIZE_TILE_WHOLE_TILE` (codegen/toolchain.py; on by default since the H100 measured it,
    session 14 in bench/RESULTS.md: by-ops attention 1.133 -> 1.055 ms at d64; `=0` turns it off): an
    aligned copy of a register-A matmul's B tile (codegen/tile/mma_regs.py) first tests, once, whether the whole tile lies inside its slice (the origin's row
    and column at least 0, its last row and column below the slice's): then every chunk is a whole
    16-byte cp.async with no predicate, its global address the previous one's plus a constant
    number of rows (the recognised attention form's copies); else the per-chunk predicated copies.
    The bytes copied are the same either way."""
    return os.environ.get("ANODIZE_TILE_WHOLE_TILE", "1") != "0"


class _Operand:
    """One operand's staging: its loaded tile shape in a stage, copies, ldmatrix offsets."""

    def __init__(self, b: llir.IRBuilder, threads: int, shape: tuple[int, int], g: llir.Value, ld: llir.Value,
                 origin: list[llir.Value], lims: list[llir.Value], kax: int, k_end: llir.Value, blocked: bool = False,
                 a_rows: int = 0) -> None:
        self.b, self.threads, self.shape = b, threads, shape
        # wgmma's layout (codegen/tile/attn_wgmma.py): 64-column blocks of `rows` x 128 bytes, chunk
        # c of row r at c ^ (r % 8) (a 64-column tile: the row-major layout itself)
        self.blocked = blocked and shape[1] > 64
        # an A tile of row mode for wgmma's descriptors (codegen/tile/attn_wgmma.py): row r = 16 (mt w + mi) + x of
        # warp w (mt = a_rows) stored at row 64 (mt g + mi) + 16 (w % 4) + x, g = w // 4 its warpgroup: row
        # block mi of a warpgroup's warps is one m64 block (the low 3 bits, the swizzle's, stay)
        self.a_rows = a_rows
        self.tid: llir.Value = P.sreg(b, "tid.x")
        self.g, self.ld, self.kax = g, ld, kax
        self.origin = origin
        lims = list(lims)
        lims[kax] = k_end
        self.lims = lims

    @property
    def nbytes(self) -> int:
        return self.shape[0] * self.shape[1] * 2

    def _soff(self, r: llir.Value, c: llir.Value) -> llir.Value:
        """The byte offset in the tile of chunk `c` of row `r`."""
        b = self.b
        rows, cols = self.shape
        if self.a_rows:
            mt = self.a_rows
            w, rest = b.udiv(r, c32(16 * mt)), b.urem(r, c32(16 * mt))
            mi, x = b.udiv(rest, c32(16)), b.urem(rest, c32(16))
            blk = b.add(b.mul(b.udiv(w, c32(4)), c32(mt)), mi)
            r = b.add(b.mul(blk, c32(64)), b.add(b.mul(b.urem(w, c32(4)), c32(16)), x))
        if self.blocked:
            blk = b.mul(b.lshr(c, c32(3)), c32(rows * 128))
            return b.add(blk, b.add(b.mul(r, c32(128)), b.shl(b.xor(b.and_(c, c32(7)), b.and_(r, c32(7))), c32(4))))
        return b.add(b.mul(r, c32(cols * 2)), b.shl(b.xor(c, _swizzle(b, r, cols // 8)), c32(4)))

    def copy(self, sbase: llir.Value, k0: llir.Value, aligned: bool, whole: bool = False) -> None:
        """Copy the tile K step k0 (elements past the first) into shared memory at `sbase`;
        `whole` (with `aligned`): the whole-tile path first (`whole_tile`)."""
        b = self.b
        rows, cols = self.shape
        cpr = cols // 8
        r0, c0 = self.origin
        if self.kax == 0:
            r0 = b.add(r0, k0)
        else:
            c0 = b.add(c0, k0)
        rlim, clim = self.lims
        t = self.threads
        if aligned and whole and t % cpr == 0 and (rows * cpr) % t == 0:
            def within(o: llir.Value, n: int, lim: llir.Value) -> llir.Value:  # 0 <= o, o + n <= lim (in 64 bits: no wrap)
                return b.and_(b.icmp_signed(">=", o, c32(0)), b.icmp_signed("<=", b.add(b.sext(o, I64), c64(n)), b.sext(lim, I64)))

            inside = b.and_(within(r0, rows, rlim), within(c0, cols, clim))
            in_block, parts, join = (b.function.append_basic_block(nm) for nm in ("copy_whole", "copy_parts", "copy_join"))
            b.cbranch(inside, in_block, parts)
            b.position_at_end(in_block)
            self._copy_whole(sbase, r0, c0)
            b.branch(join)
            b.position_at_end(parts)
            self._copy_chunks(sbase, r0, c0, aligned)
            b.branch(join)
            b.position_at_end(join)
            return
        self._copy_chunks(sbase, r0, c0, aligned)

    def _copy_whole(self, sbase: llir.Value, r0: llir.Value, c0: llir.Value) -> None:
        """The tile at (r0, c0), known inside the slice: whole 16-byte chunks, a thread's chunks
        `t / cpr` rows apart (one column), so each address is the last one's plus a constant."""
        b = self.b
        rows, cols = self.shape
        cpr = cols // 8
        t = self.threads
        step_rows = t // cpr
        r, c = _row_chunk(b, self.tid, cpr)
        tile = b.add(self.g, b.shl(b.add(b.mul(b.sext(r0, I64), self.ld), b.sext(c0, I64)), c64(1)))
        addr = b.add(tile, b.shl(b.add(b.mul(b.zext(r, I64), self.ld), b.zext(b.shl(c, c32(3)), I64)), c64(1)))
        step = b.shl(b.mul(self.ld, c64(step_rows)), c64(1))
        same_swizzle = step_rows % 8 == 0 and not self.a_rows  # (_swizzle reads a row's low 3 bits, or fewer)
        off0 = b.add(sbase, self._soff(r, c))
        pitch = 128 if self.blocked else cols * 2  # bytes from a row to the next
        for i in range(rows * cpr // t):
            if i:
                addr = b.add(addr, step)
            if same_swizzle:
                P.cp_async_16_at(b, off0, i * step_rows * pitch, addr)
                continue
            ri = b.add(r, c32(i * step_rows))
            P.cp_async_16_at(b, b.add(sbase, self._soff(ri, c)), 0, addr)

    def _copy_chunks(self, sbase: llir.Value, r0: llir.Value, c0: llir.Value, aligned: bool) -> None:
        """Each chunk with its own bounds test (zero outside the slice)."""
        b = self.b
        rows, cols = self.shape
        cpr = cols // 8
        rlim, clim = self.lims
        t = self.threads
        for i in range(rows * cpr // t):
            idx = b.add(self.tid, c32(i * t))
            r, c = _row_chunk(b, idx, cpr)
            off = self._soff(r, c)
            grow = b.add(r0, r)
            gcol = b.add(c0, b.shl(c, c32(3)))
            row_ok = b.and_(b.icmp_signed(">=", grow, c32(0)), b.icmp_signed("<", grow, rlim))
            rowbase = b.mul(b.sext(grow, I64), self.ld)
            if aligned:
                left = b.sub(clim, gcol)
                ok = b.and_(row_ok, b.and_(b.icmp_signed(">", left, c32(0)), b.icmp_signed(">=", gcol, c32(0))))
                nb = b.select(ok, b.shl(b.select(b.icmp_signed("<", left, c32(8)), left, c32(8)), c32(1)), c32(0))
                addr = b.select(ok, b.add(self.g, b.shl(b.add(rowbase, b.sext(gcol, I64)), c64(1))), self.g)
                P.cp_async_16(b, b.add(sbase, off), addr, nb)
                continue
            # the chunk's 8 elements from one address (its first element's) plus 2 j bytes in
            # the load: where element j is read (ok), 0 <= gcol + j < clim did not wrap, so its
            # address g + 2 (rowbase + sext(gcol + j)) is that one modulo 2**64; where it is not,
            # the load is predicated off and reads nothing at any address
            chunk = b.add(self.g, b.shl(b.add(rowbase, b.sext(gcol, I64)), c64(1)))
            halves = []
            for j in range(8):
                col = b.add(gcol, c32(j))
                ok = b.and_(row_ok, b.and_(b.icmp_signed(">=", col, c32(0)), b.icmp_signed("<", col, clim)))
                halves.append(b.zext(P.ld_global_b16(b, chunk, b.zext(ok, I32), 2 * j), I32))
            words = [b.or_(halves[2 * q], b.shl(halves[2 * q + 1], c32(16))) for q in range(4)]
            P.st_shared_v4(b, b.add(sbase, off), words)


def _row_chunk(b: llir.IRBuilder, idx: llir.Value, cpr: int) -> tuple[llir.Value, llir.Value]:
    """(row, chunk) of a tile's chunk `idx` in rows of `cpr` 16-byte chunks (a row of K = 48
    or 96 elements has 6 or 12: a quotient, not a shift, where `cpr` is no power of two)."""
    if cpr & (cpr - 1):
        return b.udiv(idx, c32(cpr)), b.urem(idx, c32(cpr))
    return b.lshr(idx, c32(cpr.bit_length() - 1)), b.and_(idx, c32(cpr - 1))


def _rowmajor(b: llir.IRBuilder, row: llir.Value, chunk: llir.Value, cpr: int) -> llir.Value:
    phys = b.xor(chunk, _swizzle(b, row, cpr))
    return b.add(b.mul(row, c32(cpr * 16)), b.shl(phys, c32(4)))
