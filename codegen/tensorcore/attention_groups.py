"""Two warp groups of the tensor-core attention tile (codegen/tensorcore/attention.py, `AttnConfig.groups`
= 2): each group owns all BM query rows and takes alternate key tiles with its own K/V ring and
its own named barrier; at the end group 1 hands its (m, l, O) fragments to group 0 through
shared memory and group 0 merges them (docs/tiles.md, "The attention form")."""

from __future__ import annotations

import llvmlite.ir as ir

from . import inline_ptx as P
from anodize.language.attention_config import AttnConfig

from .inline_ptx import F32, I32, c32, ex2, fmax


def bar_count(b: ir.IRBuilder, bar_id: ir.Value, count: int) -> None:
    """`bar.sync id, count`: a named barrier of `count` threads (a warp group's)."""
    mod = b.module
    name = "llvm.nvvm.barrier.cta.sync.aligned.count"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [I32, I32]), name)
        fn.attributes.add("convergent")
        fn.attributes.add("nounwind")
    b.call(fn, [bar_id, c32(count)])


def merge_groups(b: ir.IRBuilder, cfg: AttnConfig, smem, grp, gtid, fin_m, fin_l, fin) -> None:  # type: ignore[no-untyped-def]
    """Group 1's (m, l, O) through shared memory (16-byte chunk i of group thread g at
    (i * threads + g) * 16: the two groups' fragment layouts are the same, thread for thread),
    merged into group 0's fragments in place: m = max(m0, m1), a_g = 2**(m_g - m),
    l = l0 a0 + l1 a1, O = O0 a0 + O1 a1 (a group without key tiles has m = the initial
    maximum, so its a is 0).  Every thread of the block reaches the barrier between."""
    mt, d = cfg.mt, cfg.head_dim
    gt = cfg.threads // cfg.groups
    v4 = ir.LiteralStructType([F32] * 4)
    chunks: list[list] = []  # type: ignore[type-arg]
    for mi in range(mt):
        chunks.append([fin_m[mi][0], fin_m[mi][1], fin_l[mi][0], fin_l[mi][1]])
        chunks += [fin[mi][nd] for nd in range(d // 8)]
    addr = [b.add(smem, b.shl(b.add(c32(i * gt), gtid), c32(4))) for i in range(len(chunks))]
    with b.if_then(b.icmp_unsigned("!=", grp, c32(0))):
        for a, vals in zip(addr, chunks):
            b.asm(ir.FunctionType(ir.VoidType(), [I32, F32, F32, F32, F32]), "st.shared.v4.f32 [$0], {$1, $2, $3, $4};",
                  "r,f,f,f,f,~{memory}", [a, *vals], True)
    P.barrier(b)
    before = b.block
    merged: list[list] = [list(c) for c in chunks]  # type: ignore[type-arg]
    with b.if_then(b.icmp_unsigned("==", grp, c32(0))):
        other = []
        for a in addr:
            r = b.asm(ir.FunctionType(v4, [I32]), "ld.shared.v4.f32 {$0, $1, $2, $3}, [$4];", "=f,=f,=f,=f,r,~{memory}", [a], True)
            other.append([b.extract_value(r, i) for i in range(4)])
        k = 0
        for mi in range(mt):
            m0s, m1s = chunks[k], other[k]
            alpha = []
            for h in range(2):
                mm = fmax(b, m0s[h], m1s[h])
                alpha.append((ex2(b, b.fsub(m0s[h], mm)), ex2(b, b.fsub(m1s[h], mm))))
            merged[k] = [m0s[0], m0s[1]] + [b.fadd(b.fmul(m0s[2 + h], alpha[h][0]), b.fmul(m1s[2 + h], alpha[h][1])) for h in range(2)]
            for nd in range(d // 8):
                c, o = chunks[k + 1 + nd], other[k + 1 + nd]
                merged[k + 1 + nd] = [b.fadd(b.fmul(c[e], alpha[e // 2][0]), b.fmul(o[e], alpha[e // 2][1])) for e in range(4)]
            k += 1 + d // 8
        inside = b.block
    k = 0
    for mi in range(mt):  # phis: group 0's merged values (group 1's are not used past here)
        for h in range(2):
            ph = b.phi(F32)
            ph.add_incoming(merged[k][2 + h], inside)
            ph.add_incoming(chunks[k][2 + h], before)
            fin_l[mi][h] = ph
        for nd in range(d // 8):
            for e in range(4):
                ph = b.phi(F32)
                ph.add_incoming(merged[k + 1 + nd][e], inside)
                ph.add_incoming(chunks[k + 1 + nd][e], before)
                fin[mi][nd][e] = ph
        k += 1 + d // 8
