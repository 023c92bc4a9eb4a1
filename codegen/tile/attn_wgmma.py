"""Hopper's wgmma for the matmuls of a prefetching loop (codegen/tile/prefetch.py: an attention
loop compiled by operations), A from registers: on by default on sm_90 (`ANODIZE_TILE_ATTN_WGMMA=0`
turns it off; codegen/toolchain.py).

Such a matmul takes A from registers (P = `p.astype(f16)`, Q held across the loop) or from a
resident tile (codegen/tile/mma_regs.py: through descriptors where every reader of it is a wgmma,
`Prefetch.a_ss`, else its fragments read with ldmatrix), and its B tile (K read as `K.T`, or
V) sits whole in one of its two slots.  wgmma's register-A form, `wgmma.mma_async.m64nNk16` with
`{a0, a1, a2, a3}`, takes per warp exactly the A fragment of mma.sync m16n8k16 (rows 16 w .. of
its m64 block: which rows of the tile a warp's 16 are does not matter, A and D being the same
warp's registers), and its D fragments are per warp mma.sync's m16n8 C layout
(codegen/tile/layout.py), so the row-mode accumulator layout (warps, 1) stays as it is: row
block `mi` of every warp is one m64nNk16 (N the tile's whole width) a k16 step.

B comes from a shared-memory descriptor with the 128-byte swizzle, so its slot holds the tile in
wgmma's layout (`blocked`, staging.py): 64-column blocks, each `rows` x 128 bytes, 16-byte
chunk c of row r at chunk `c ^ (r % 8)` -- for a 64-column tile exactly the ldmatrix layout it
had -- from a base rounded up to 1024 bytes (the swizzle's period; the loop's region takes 1024
bytes more).  A `.T` tile (K, N x K in its slot) is K-major: k16 step kk starts at block kk // 4,
byte 32 (kk % 4); a plain one (V, K x N) is MN-major: k16 step kk starts 16 rows (2048 bytes)
further, its 64-column blocks `rows` x 128 bytes apart (the leading byte offset).  cp.async
writes the slots through the generic proxy and wgmma reads them through the async one: every
wait of such a loop is followed by `fence.proxy.async` before its barrier.

The matmul is one inline-PTX block a group of k16 steps (`GROUP`: the A fragments of a group are
live together): `wgmma.fence`, the group's wgmma (each row block's accumulators tied in and
out), `commit_group`, `wait_group 0` -- so the accumulators are LLVM's again after the block.
"""

from __future__ import annotations

import os
from typing import Any

import llvmlite.ir as llir

from ..tensorcore.inline_ptx import F32, asm_block, c32, c64, smem_desc, sw128_hi


__all__ = ["attn_wgmma", "b_tile_ok", "block_lines", "descriptor", "descriptor_parts", "emit_register_a", "engine_for"]

GROUP = 8  # k16 steps a block: at d128 the resident Q's fragments of all eight would be live together


def attn_wgmma() -> str:
    """`ANODIZE_TILE_ATTN_WGMMA`: "1" (the default since the H100 checked every attention spelling
    with it, session 16) every qualifying matmul of a prefetching loop on wgmma, "t" only those
    reading B transposed (S = Q K^T), "n" only the others (O += P V); "0" none (mma.sync, the
    way back)."""
    v = os.environ.get("ANODIZE_TILE_ATTN_WGMMA", "1")
    return v if v in ("1", "t", "n") else ""


def b_tile_ok(k: int, n: int, trans: bool) -> bool:
    """Can a K x N B tile (N x K in its slot when `trans`) be a wgmma descriptor's: K-major
    (`trans`) in whole 64-wide K blocks, N rows a multiple of 8 up to 256; MN-major in whole
    64-column blocks (N at most 256), K a multiple of 16."""
    if trans:
        return k % 64 == 0 and n % 8 == 0 and 8 <= n <= 256
    return n % 64 == 0 and n <= 256 and k % 16 == 0


def engine_for(wgmma_target: bool, warps: int, k: int, n: int, trans: bool) -> str:
    """The engine of a prefetching loop's matmul (A from registers or resident): "wgmma" under the
    switch where the target has it, the block is whole warpgroups and B's tile qualifies."""
    mode = attn_wgmma()
    if not mode or not wgmma_target or warps % 4 or not b_tile_ok(k, n, trans):
        return "mma"
    if mode == "t" and not trans or mode == "n" and trans:
        return "mma"
    return "wgmma"


def descriptor_parts(kk: int, k: int, n: int, trans: bool) -> tuple[int, int]:
    """(bytes from the tile's base to k16 step `kk`'s start, the descriptor's fields but the
    start address: leading byte offset, stride byte offset 1024 (8 rows), 128-byte swizzle)."""
    if trans:  # (the leading byte offset is unused K-major)
        off, lbo = (kk // 4) * n * 128 + (kk % 4) * 32, 16
    else:
        off, lbo = kk * 16 * 128, k * 128
    return off, sw128_hi(lbo)


def descriptor(b: llir.IRBuilder, base: llir.Value, kk: int, k: int, n: int, trans: bool) -> llir.Value:
    """The 64-bit descriptor of k16 step `kk` of the B tile at shared address `base` (1024-byte
    aligned, `blocked` layout): K-major (`trans`: N rows of 128 bytes a 64-wide K block) or
    MN-major (K rows of 128 bytes a 64-column block, blocks `k` x 128 bytes apart)."""
    off, hi = descriptor_parts(kk, k, n, trans)
    return smem_desc(b, b.add(base, c32(off)), c64(hi))


def block_lines(nacc: int, steps: range, k: int, n: int, trans: bool, mt: int, elem: str, a_rows: int) -> list[str]:
    """The inline-PTX block of k16 steps `steps` (`emit_register_a`): operands $0 .. nacc - 1 the
    accumulators (tied in and out), then A (`a_rows` 0: four b32 a step and row block, steps
    outer; else one descriptor, of an (a_rows, k) A), then B's first descriptor, then a 1.

    A's registers are the block's own (`%aq`), copied from the operands with an identity `prmt`
    before `wgmma.fence`: ptxas (CUDA 13) let a loop-invariant A operand (Q held across the loop)
    be overwritten after its wgmma -- P's packs went into Q's registers at d64, so every
    iteration after the first multiplied P by K (the H100 run; the SASS showed it) -- and a plain
    `mov` it coalesces into the same mistake; the copy makes the wgmma's registers a fresh value
    each time (tests/codegen/test_tile_attention_wgmma.py checks the SASS where nvdisasm is found)."""
    per = n // 2  # accumulators a row block
    regs_a = not a_rows
    na = len(steps) * mt * 4 if regs_a else 0
    bd = 2 * nacc + (na if regs_a else 1)
    lines = ["{", ".reg .pred %ap;", ".reg .b64 %ad, %bd;", f"setp.ne.b32 %ap, ${bd + 1}, 0;"]
    if regs_a:
        lines.append(f".reg .b32 %aq<{na}>;")
        lines += [f"prmt.b32 %aq{i}, ${2 * nacc + i}, 0, 0x3210;" for i in range(na)]
    lines.append("wgmma.fence.sync.aligned;")
    for j, kk in enumerate(steps):
        lines.append(f"add.s64 %bd, ${bd}, {descriptor_parts(kk, k, n, trans)[0] >> 4};")
        for mi in range(mt):
            d = ", ".join(f"${i}" for i in range(mi * per, (mi + 1) * per))
            if regs_a:  # registers: no transpose bit for A
                at = (j * mt + mi) * 4
                lines.append(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{elem}.{elem} {{{d}}}, "
                             f"{{%aq{at}, %aq{at + 1}, %aq{at + 2}, %aq{at + 3}}}, %bd, %ap, 1, 1, {0 if trans else 1};")
                continue
            off = descriptor_parts(kk, k, a_rows, True)[0] + mi * 64 * 128
            lines.append(f"add.s64 %ad, ${2 * nacc}, {off >> 4};")
            lines.append(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{elem}.{elem} {{{d}}}, %ad, %bd, %ap, 1, 1, 0, "
                         f"{0 if trans else 1};")
    return [*lines, "wgmma.commit_group.sync.aligned;", "wgmma.wait_group.sync.aligned 0;", "}"]


def emit_register_a(b: llir.IRBuilder, acc: list[llir.Value], a: Any, base: llir.Value,
                    k: int, n: int, trans: bool, mt: int, elem: str) -> list[llir.Value]:
    """`acc += A @ B` on wgmma: `acc` in the (warps, 1) layout (row block mi's registers
    `mi * n / 2 ..`); `a` either `afr[kk][mi]`, the four b32 of A's fragment of row block mi,
    k16 step kk (wgmma's register-A form), or `(desc, m)`: the descriptor of the warpgroup's
    first row block, k16 step 0, of a resident (m, k) A in wgmma's layout (K-major, row block
    mi 64 rows further, 8 KiB); B at `base`.  The other steps' descriptors are the first one's
    plus an immediate inside the block (no carry leaves the 14-bit address field: shared
    addresses are below 2**18).  Returns the accumulators after."""
    regs_a = isinstance(a, list)
    assert len(acc) == mt * n // 2 and (not regs_a or len(a) == k // 16), (len(acc), mt, n, k)
    b0 = descriptor(b, base, 0, k, n, trans)
    cur = list(acc)
    group = GROUP if regs_a else k // 16
    for g0 in range(0, k // 16, group):
        steps = range(g0, min(g0 + group, k // 16))
        nacc = len(cur)
        a_vals = [v for kk in steps for mi in range(mt) for v in a[kk][mi]] if regs_a else [a[0]]
        lines = block_lines(nacc, steps, k, n, trans, mt, elem, 0 if regs_a else a[1])
        cons = ["=f"] * nacc + [str(i) for i in range(nacc)] + ["r" if regs_a else "l"] * len(a_vals) + ["l", "r"]
        res = asm_block(b, llir.LiteralStructType([F32] * nacc), "\n\t".join(lines), cons, [*cur, *a_vals, b0, c32(1)])
        cur = [b.extract_value(res, i) for i in range(nacc)]
    return cur



