"""Inline-PTX building blocks for the tensor-core GEMM (codegen/tensorcore/gemm.py).

Each helper emits one PTX instruction (or a tiny predicated group) through `ir.InlineAsm`, so
the PTX that reaches ptxas is exactly the instruction named: `mma.sync` (m16n8k16, f16/bf16 in,
f32 accumulate), `ldmatrix` (x4, optionally `.trans`), `cp.async.cg` (16 bytes, zero-filling the
bytes past `src_size`), its commit/wait, `bar.sync`, and predicated global loads and stores.

Shared-memory addresses are 32-bit offsets in the shared window (what `ptrtoint` of an
addrspace(3) pointer gives); global addresses are 64-bit generic addresses.
"""

from __future__ import annotations

import os

from collections.abc import Callable

import llvmlite.ir as ir

I1 = ir.IntType(1)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
VOID = ir.VoidType()

# the element type names each GEMM dtype has in PTX
PTX_IN = {"f16": "f16", "bf16": "bf16"}
ELEM_BYTES = {"f16": 2, "bf16": 2, "f32": 4}


def c32(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _asm(b: ir.IRBuilder, ret: ir.Type, text: str, cons: str, args: list[ir.Value], side_effect: bool = True) -> ir.Value:
    fty = ir.FunctionType(ret, [a.type for a in args])
    return b.asm(fty, text, cons, args, side_effect)


def ptx_block(lines: list[str]) -> str:
    """The text of a multi-line inline-PTX statement: `lines` inside braces (the registers it
    declares are its own), one instruction a line, as every block of the tile GEMMs and their
    epilogue spells it."""
    return "\n\t".join(["{", *lines, "}"])


def align_smem(e: Callable[[str], None], dst: str, src: str) -> None:
    """`dst` = the shared address `src` rounded up to 1024 bytes (the 128-byte swizzle's period;
    the buffers leave 1024 bytes of slack for it)."""
    e(f"add.u32 {dst}, {src}, 1023;")
    e(f"and.b32 {dst}, {dst}, -1024;")


def declare_regs(e: Callable[[str], None], prefix: str, pred: int, b16: int, b32: int, b64: int) -> None:
    """Declare a block's own scratch registers: `%{prefix}p` predicates, `%{prefix}h` 16-bit,
    `%{prefix}r` 32-bit and `%{prefix}d` 64-bit, `n` of each (the wgmma mainloops use "w", the
    staged epilogue "e")."""
    e(f".reg .pred %{prefix}p<{pred}>;")
    e(f".reg .b16 %{prefix}h<{b16}>;")
    e(f".reg .b32 %{prefix}r<{b32}>;")
    e(f".reg .b64 %{prefix}d<{b64}>;")


SW128 = 1 << 62  # a wgmma descriptor's bits 62-63: 128-byte swizzle


def desc_field(x: int) -> int:
    """A shared address or byte offset as a wgmma descriptor's 14-bit field (16-byte units)."""
    return (x & 0x3FFFF) >> 4


def sw128_hi(lbo: int) -> int:
    """A 128-byte-swizzle descriptor's bits but the start address: leading byte offset `lbo`
    (the 64-column block stride of an MN-major tile; 16, unused, K-major), stride byte offset
    1024 (8 rows of 128 bytes)."""
    return desc_field(lbo) << 16 | desc_field(1024) << 32 | SW128


def smem_desc(b: ir.IRBuilder, addr: ir.Value, hi: ir.Value) -> ir.Value:
    """The 64-bit descriptor of the shared address `addr` (i32) with the high bits `hi` (i64)."""
    return b.or_(b.zext(b.lshr(b.and_(addr, c32(0x3FFFF)), c32(4)), I64), hi)


def round_up_1024(b: ir.IRBuilder, addr: ir.Value) -> ir.Value:
    """The shared address `addr` (i32) rounded up to 1024 bytes (the 128-byte swizzle's period;
    `align_smem` in PTX text)."""
    return b.and_(b.add(addr, c32(1023)), c32(~1023 & 0xFFFFFFFF))


def scalar_group() -> int:
    """The chunks whose loads a thread has in flight at once in `scalar_copy` (8 loads a chunk):
    `ANODIZE_TILE_SCALAR_GROUP` (1, 2 or 4; default 4), a measurement switch."""
    v = os.environ.get("ANODIZE_TILE_SCALAR_GROUP", "4")
    return int(v) if v in ("1", "2", "4") else 4


def scalar_copy(e: Callable[[str], None], prefix: str, tag: str, *, n: int, g: str, gstride: str, rowstep: int, colleft: str,
                dst: str, doff: str, dstep: int, rowleft: str = "", rows: tuple[str, str] | None = None,
                group: int | None = None) -> None:
    """The wgmma mainloops' unaligned fallback copy (a row or a first column not 16-byte aligned:
    K = 4095): this thread's n chunks in groups of `scalar_group()`, each group's 8 predicated
    2-byte loads a chunk (zero outside) issued before any is used, then one 16-byte shared store a
    chunk.  The loads of a group are independent, so they are in flight together: the copy waits
    one memory latency a group, not one an element (session 15: 32 dependent load-store pairs a
    thread a k-tile kept the 4096 x 4096 x 4095 GEMM at 0.16x Triton).  The groups stay a loop,
    not unrolled: every instruction in the K loop is ptxas's work on every compile.  The block
    has its own scope (`{ }`) for its registers.

    A chunk's row is inside when `i * rowstep < rowleft`, or with `rows` (first row, row count)
    when `rows[0] + i * rowstep` is unsigned below the count; an element when its column is
    below `colleft`.  The group loop's label: `{prefix}_S{tag}`.  `group`: at most this many chunks
    a group (default `scalar_group()`)."""
    most = group or scalar_group()
    G = next(q for q in (4, 2, 1) if n % q == 0 and q <= most)
    e("{")
    e(f".reg .pred %sp<{G + 1}>;")
    e(f".reg .b16 %sh<{8 * G}>;")
    e(f".reg .b32 %sr<{4 + 4 * G}>;")
    e(".reg .b64 %sd<2>;")
    i, ga, sa, row = "%sr0", "%sd0", "%sr1", "%sr2"
    e(f"mov.u32 {i}, 0;")
    e(f"mov.b64 {ga}, {g};")
    e(f"add.u32 {sa}, {dst}, {doff};")
    e(f"{prefix}_S{tag}:")
    for c in range(G):
        e(f"add.u32 {row}, {i}, {c};" if c else f"mov.u32 {row}, {i};")
        e(f"mul.lo.u32 {row}, {row}, {rowstep};")
        if rows is not None:
            e(f"add.s32 {row}, {row}, {rows[0]};")
            e(f"setp.lt.u32 %sp{c}, {row}, {rows[1]};")
        else:
            e(f"setp.lt.s32 %sp{c}, {row}, {rowleft};")
        e(f"add.s64 %sd1, %sd1, {gstride};" if c else f"mov.b64 %sd1, {ga};")
        for k in range(8):
            h = f"%sh{8 * c + k}"
            e(f"setp.gt.s32 %sp{G}, {colleft}, {k};")
            e(f"and.pred %sp{G}, %sp{G}, %sp{c};")
            e(f"mov.b16 {h}, 0;")
            e(f"@%sp{G} ld.global.b16 {h}, [%sd1+{2 * k}];")
    for c in range(G):
        w = [f"%sr{4 + 4 * c + q}" for q in range(4)]
        for q in range(4):
            e(f"mov.b32 {w[q]}, {{%sh{8 * c + 2 * q}, %sh{8 * c + 2 * q + 1}}};")
        e(f"st.shared.v4.b32 [{sa}+{c * dstep}], {{{', '.join(w)}}};")
    e(f"add.s64 {ga}, %sd1, {gstride};")  # (%sd1: the group's last chunk's row)
    e(f"add.u32 {sa}, {sa}, {G * dstep};")
    e(f"add.u32 {i}, {i}, {G};")
    e(f"setp.lt.u32 %sp0, {i}, {n};")
    e(f"@%sp0 bra {prefix}_S{tag};")
    e("}")


def asm_block(b: ir.IRBuilder, ret: ir.Type, text: str, cons: list[str], args: list[ir.Value]) -> ir.CallInstr:
    """A `ptx_block` (or one instruction) as an inline-PTX call with side effects that clobbers
    memory (`cons`: its operands' constraints) and is convergent: it holds `bar.sync` or
    `.aligned` instructions, so LLVM must never duplicate it into a branch."""
    fty = ir.FunctionType(ret, [a.type for a in args])
    asm = ir.InlineAsm(fty, text.replace("\n", "\\0A"), ",".join([*cons, "~{memory}"]), side_effect=True)
    return b.call(asm, args, attrs=("convergent",))


def ex2(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    return _asm(b, F32, "ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], side_effect=False)


def fmax(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return _asm(b, F32, "max.f32 $0, $1, $2;", "=f,f,f", [x, y], side_effect=False)


def barrier(b: ir.IRBuilder) -> None:
    """`bar.sync 0` through the NVVM intrinsic (convergent, so LLVM never duplicates it into a branch)."""
    mod = b.module
    name = "llvm.nvvm.barrier0"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(VOID, []), name)
        fn.attributes.add("convergent")
        fn.attributes.add("nounwind")
    b.call(fn, [])


def sreg(b: ir.IRBuilder, reg: str) -> ir.Value:
    """A special register (`tid.x`, `ctaid.x`, ...) through its NVVM intrinsic."""
    mod = b.module
    name = f"llvm.nvvm.read.ptx.sreg.{reg}"
    fn = mod.globals.get(name)
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(I32, []), name)
        fn.attributes.add("nounwind")
        fn.attributes.add("readnone")
    return b.call(fn, [])


def cp_async_16(b: ir.IRBuilder, dst: ir.Value, src: ir.Value, src_size: ir.Value) -> None:
    """`cp.async.cg.shared.global [dst], [src], 16, src_size`: copies `src_size` (0..16) bytes and
    zero-fills the rest of the 16; with `src_size` 0 nothing is read."""
    _asm(b, VOID, "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r,~{memory}", [dst, src, src_size])


def cp_async_16_at(b: ir.IRBuilder, dst: ir.Value, imm: int, src: ir.Value) -> None:
    """`cp.async.cg.shared.global [dst+imm], [src], 16`: a whole 16-byte chunk, no predicate."""
    _asm(b, VOID, f"cp.async.cg.shared.global [$0+{imm}], [$1], 16;", "r,l,~{memory}", [dst, src])


def cp_async_commit(b: ir.IRBuilder) -> None:
    _asm(b, VOID, "cp.async.commit_group;", "~{memory}", [])


def cp_async_wait(b: ir.IRBuilder, n: int) -> None:
    """Wait until at most `n` committed groups of this thread are still in flight."""
    _asm(b, VOID, f"cp.async.wait_group {n};", "~{memory}", [])


def ldmatrix_x4(b: ir.IRBuilder, addr: ir.Value, trans: bool) -> list[ir.Value]:
    """Four 8x8 b16 matrices from shared memory; lane i gives row (i % 8) of matrix (i // 8)."""
    t = ".trans" if trans else ""
    st = ir.LiteralStructType([I32] * 4)
    r = _asm(b, st, f"ldmatrix.sync.aligned.m8n8.x4{t}.shared.b16 {{$0, $1, $2, $3}}, [$4];", "=r,=r,=r,=r,r,~{memory}", [addr])
    return [b.extract_value(r, i) for i in range(4)]


def ldsm(b: ir.IRBuilder, addr: ir.Value, imm: int, trans: bool) -> list[ir.Value]:
    """`ldmatrix.x4` at shared `addr + imm` (the immediate in the instruction, not a register)."""
    t = ".trans" if trans else ""
    st = ir.LiteralStructType([I32] * 4)
    r = b.asm(ir.FunctionType(st, [I32]), f"ldmatrix.sync.aligned.m8n8.x4{t}.shared.b16 {{$0, $1, $2, $3}}, [$4+{imm}];",
              "=r,=r,=r,=r,r,~{memory}", [addr], True)
    return [b.extract_value(r, i) for i in range(4)]


def ldsm_kstep(b: ir.IRBuilder, full: ir.Value, kk: int, imm: int, trans: bool = False) -> list[ir.Value]:
    """`ldmatrix.x4` of k-step `kk` for a lane whose k-step-0 address is `full` (shared; the
    buffer 128-byte aligned, the lane's chunk `c` < 8): chunk c ^ 2kk is c ^ 2(kk % 4) plus
    8 (kk // 4), so the address is `full ^ (kk % 4) << 5` plus an immediate -- no XOR at all for
    every fourth k-step, and one XOR (inside the asm: nothing to hoist) for the others."""
    x, imm = (kk & 3) << 5, imm + (kk >> 2) * 128
    if x == 0:
        return ldsm(b, full, imm, trans)
    st = ir.LiteralStructType([I32] * 4)
    t = ".trans" if trans else ""
    r = b.asm(ir.FunctionType(st, [I32]), f"{{ .reg .b32 a; xor.b32 a, $4, {x}; "
              f"ldmatrix.sync.aligned.m8n8.x4{t}.shared.b16 {{$0, $1, $2, $3}}, [a+{imm}]; }}",
              "=r,=r,=r,=r,r,~{memory}", [full], True)
    return [b.extract_value(r, i) for i in range(4)]


def mma_16816(b: ir.IRBuilder, a: list[ir.Value], bb: list[ir.Value], c: list[ir.Value], in_dtype: str) -> list[ir.Value]:
    """D = A(16x16, row) * B(16x8, col) + C, f32 accumulators, f16 or bf16 operands."""
    ty = PTX_IN[in_dtype]
    st = ir.LiteralStructType([F32] * 4)
    text = (
        f"mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 "
        "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};"
    )
    r = _asm(b, st, text, "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", list(a) + list(bb) + list(c), side_effect=False)
    return [b.extract_value(r, i) for i in range(4)]


def pack2(b: ir.IRBuilder, lo: ir.Value, hi: ir.Value, dtype: str) -> ir.Value:
    """Two f32 rounded to a packed f16x2 / bf16x2 (lo in the low half)."""
    return _asm(b, I32, f"cvt.rn.{dtype}x2.f32 $0, $1, $2;", "=r,f,f", [hi, lo], side_effect=False)


def ld_global_b16(b: ir.IRBuilder, addr: ir.Value, pred: ir.Value, disp: int = 0) -> ir.Value:
    """A 16-bit global load at `addr + disp` bytes when `pred` (i32, nonzero), else 0: no
    access at all when off."""
    at = f"$1+{disp}" if disp else "$1"
    text = f"{{ .reg .pred p; setp.ne.b32 p, $2, 0; mov.b16 $0, 0; @p ld.global.b16 $0, [{at}]; }}"
    return _asm(b, I16, text, "=h,l,r,~{memory}", [addr, pred])


def st_shared_v4(b: ir.IRBuilder, addr: ir.Value, vals: list[ir.Value]) -> None:
    _asm(b, VOID, "st.shared.v4.b32 [$0], {$1, $2, $3, $4};", "r,r,r,r,r,~{memory}", [addr] + list(vals))


def st_global(b: ir.IRBuilder, addr: ir.Value, vals: list[ir.Value], kind: str, pred: ir.Value, disp: int = 0) -> None:
    """A predicated global store of 1 or 2 values: `kind` is the PTX type (`f32`, `b32`, `b16`);
    the address is `addr + disp` bytes (a constant displacement of the instruction)."""
    reg = {"f32": "f", "b32": "r", "b16": "h"}[kind]
    n = len(vals)
    ops = ", ".join(f"${i + 2}" for i in range(n))
    vec = f".v{n}" if n > 1 else ""
    src = f"{{{ops}}}" if n > 1 else ops
    at = f"$0+{disp}" if disp else "$0"
    text = f"{{ .reg .pred p; setp.ne.b32 p, $1, 0; @p st.global{vec}.{kind} [{at}], {src}; }}"
    cons = "l,r," + ",".join([reg] * n) + ",~{memory}"
    _asm(b, VOID, text, cons, [addr, pred] + list(vals))


def st_global_below(b: ir.IRBuilder, addr: ir.Value, val: ir.Value, kind: str, limit: ir.Value, col: int, disp: int = 0) -> None:
    """A global store of one value where constant column `col` is below `limit` (an i32: the
    columns left in the row from the fragment's first, 0 where the row is outside): one 32-bit
    compare with a constant a store, where `st_global`'s predicate was formed beside it."""
    reg = {"f32": "f", "b32": "r", "b16": "h"}[kind]
    at = f"$0+{disp}" if disp else "$0"
    text = f"{{ .reg .pred p; setp.gt.s32 p, $1, {col}; @p st.global.{kind} [{at}], $2; }}"
    _asm(b, VOID, text, f"l,r,{reg},~{{memory}}", [addr, limit, val])


def cvt_f32_to(b: ir.IRBuilder, v: ir.Value, dtype: str) -> ir.Value:
    """One f32 rounded to f16 / bf16, as its 16 bits."""
    return _asm(b, I16, f"cvt.rn.{dtype}.f32 $0, $1;", "=h,f", [v], side_effect=False)


# ---- Hopper warpgroup MMA (sm_90a) ---------------------------------------------------------


def fence_proxy_async(b: ir.IRBuilder) -> None:
    """Make this thread's generic-proxy shared writes (cp.async, st.shared) visible to wgmma."""
    _asm(b, VOID, "fence.proxy.async.shared::cta;", "~{memory}", [])


def wgmma_fence(b: ir.IRBuilder) -> None:
    _asm(b, VOID, "wgmma.fence.sync.aligned;", "~{memory}", [])


def wgmma_commit(b: ir.IRBuilder) -> None:
    _asm(b, VOID, "wgmma.commit_group.sync.aligned;", "~{memory}", [])


def wgmma_wait(b: ir.IRBuilder, n: int) -> None:
    _asm(b, VOID, f"wgmma.wait_group.sync.aligned {n};", "~{memory}", [])


def _acc_struct(module: ir.Module, k: int) -> ir.Type:
    """A named struct of k floats: each of the k extractvalues then spells `%tc_acc<k>`, not
    the k-field literal type (a 128-float literal made the wgmma kernel's IR 640 kB)."""
    ty = module.context.get_identified_type(f"tc_acc{k}")
    if ty.is_opaque:
        ty.set_body(*([F32] * k))
    return ty


def wgmma(b: ir.IRBuilder, acc: list[ir.Value], desc_a: ir.Value, desc_b: ir.Value, n: int, in_dtype: str, trans_b: bool) -> list[ir.Value]:
    """D(64 x n, f32) += A(64x16, shared, K-major) * B(16 x n, shared; MN-major when trans_b)."""
    ty = PTX_IN[in_dtype]
    k = len(acc)
    outs = ", ".join(f"${i}" for i in range(k))
    text = (
        f"{{ .reg .pred p; setp.ne.b32 p, ${k + 2}, 0; "
        f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ty}.{ty} {{{outs}}}, ${k}, ${k + 1}, p, 1, 1, 0, {int(trans_b)}; }}"
    )
    cons = ",".join(["=f"] * k) + ",l,l,r," + ",".join(str(i) for i in range(k)) + ",~{memory}"
    st = _acc_struct(b.module, k)
    r = _asm(b, st, text, cons, [desc_a, desc_b, c32(1)] + list(acc))
    return [b.extract_value(r, i) for i in range(k)]
