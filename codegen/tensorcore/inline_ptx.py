"""Inline-PTX building blocks for the tensor-core GEMM (codegen/tensorcore/gemm.py).

Each helper emits one PTX instruction (or a tiny predicated group) through `ir.InlineAsm`, so
the PTX that reaches ptxas is exactly the instruction named: `mma.sync` (m16n8k16, f16/bf16 in,
f32 accumulate), `ldmatrix` (x4, optionally `.trans`), `cp.async.cg` (16 bytes, zero-filling the
bytes past `src_size`), its commit/wait, `bar.sync`, and predicated global loads and stores.

Shared-memory addresses are 32-bit offsets in the shared window (what `ptrtoint` of an
addrspace(3) pointer gives); global addresses are 64-bit generic addresses.
"""

from __future__ import annotations

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
