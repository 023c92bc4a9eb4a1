"""Attention compiled by operations with its matmuls on wgmma (on by default on sm_90,
`ANODIZE_TILE_ATTN_WGMMA=0` off; codegen/tile/attn_wgmma.py): A from registers (Q held, P packed, or Q resident read with
ldmatrix), B from the prefetched slot in wgmma's 128-byte-swizzled layout through a descriptor.
The PTX (ptxas-checked), the descriptors and the slot layout against a model of wgmma's
canonical layouts (CPU), and (GPU, in test_tile_attention_ops.py / _mix.py with the switch set)
the results."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from anodize.codegen.tile.attn_wgmma import b_tile_ok, descriptor_parts

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="needs ptxas")

DEFAULTS = "pfrvexmlwcgh"  # tools/ptx_mix.py letters left at their defaults


def _ptx(variant: str, d: int, warps: int, mode: str, monkeypatch: pytest.MonkeyPatch) -> str:
    from ptx_mix import attention_ptx

    monkeypatch.setenv("ANODIZE_TILE_ATTN_WGMMA", mode)
    ptx = attention_ptx(variant, warps, d, "ops", unset=DEFAULTS)
    assert ptx is not None
    return ptx


def _ptxas(ptx: str) -> tuple[int, int]:
    from test_tile_attention_ops import ptxas_log

    log = ptxas_log(ptx, "sm_90")
    regs = int(re.findall(r"Used (\d+) registers", log)[0])
    spills = int(re.findall(r"(\d+) bytes spill stores", log)[0])
    return regs, spills


@needs_ptxas
@pytest.mark.parametrize("variant,d,warps", [("example", 64, 4), ("causal_diag", 64, 4),
                                             pytest.param("exp2", 128, 8, marks=pytest.mark.slow)])
def test_both_matmuls_on_register_a_wgmma_without_spills(variant: str, d: int, warps: int,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ptx = _ptx(variant, d, warps, "1", monkeypatch)
    mt = 128 // (16 * warps)
    per_loop = mt * (d // 16) + mt * (64 // 16)  # S: K = d; P V: K = BN = 64
    ops = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.f16\.f16 \{[^}]*\}, \{([^}]*)\}, [^,]+, %ap, 1, 1, (\d)",
                     ptx)
    loops = 2  # (the aligned loop version and the general one)
    assert len(ops) == loops * per_loop
    assert all(len(a.split(",")) == 4 for _, a, _ in ops)  # A: four b32 registers (mma.sync's fragment)
    assert sorted({(n, t) for n, _, t in ops}) == sorted({("64", "0"), (str(d), "1")})  # S: K-major K; P V: MN-major V
    assert "mma.sync" not in ptx and "ldmatrix" not in ptx  # (Q held in registers, no B fragments)
    assert ptx.count("fence.proxy.async.shared::cta") >= 2 * loops  # each wait of the loop, before its barrier
    assert ".target sm_90a" in ptx
    regs, spills = _ptxas(ptx)
    assert regs <= 255 and spills == 0


@needs_ptxas
def test_d128_over_4_warps_reads_the_resident_q_through_descriptors_without_spills(monkeypatch: pytest.MonkeyPatch) -> None:
    # (Q resident: its fragments read with ldmatrix beside 192 accumulators spilled 232 bytes at
    # 255 registers; as wgmma's A descriptor, none)
    ptx = _ptx("example", 128, 4, "1", monkeypatch)
    ss = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n64k16\.f32\.f16\.f16 \{[^}]*\}, %ad, %bd, %ap, 1, 1, 0, 0;", ptx)
    rs = re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n128k16\.f32\.f16\.f16 \{[^}]*\}, \{[^}]*\}, %bd, %ap, 1, 1, 1;", ptx)
    assert (len(ss), len(rs)) == (2 * 2 * 8, 2 * 2 * 4)  # S: 2 row blocks x 8 k16 steps; P V: 2 x 4 (two loop versions)
    assert "ldmatrix" not in ptx and "mma.sync" not in ptx
    regs, spills = _ptxas(ptx)
    assert regs <= 255 and spills == 0


def test_the_switch_is_on_by_default_and_0_is_the_way_back(monkeypatch: pytest.MonkeyPatch) -> None:
    from ptx_mix import attention_ptx

    monkeypatch.delenv("ANODIZE_TILE_ATTN_WGMMA", raising=False)
    ptx = attention_ptx("example", 4, 64, "ops", unset=DEFAULTS)
    assert ptx is not None and "wgmma.mma_async" in ptx and "mma.sync" not in ptx
    monkeypatch.setenv("ANODIZE_TILE_ATTN_WGMMA", "0")
    ptx = attention_ptx("example", 4, 64, "ops", unset=DEFAULTS)
    assert ptx is not None and "wgmma" not in ptx and "fence.proxy.async" not in ptx and "mma.sync" in ptx


def test_compile_v_names_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_tile_attention_mix import _lowered

    _, report = _lowered("example", 64, 4, monkeypatch, ANODIZE_TILE_ATTN_WGMMA="1")
    # (each matmul twice: the aligned loop version and the general one)
    assert [ln.split("-> ")[1].split(" (")[0] for ln in report] == ["wgmma.m64n64k16"] * 4
    assert all("A from registers" in ln and "B prefetched" in ln for ln in report)
    # d128 over 4 warps: Q resident, S's A read through descriptors (P V's from registers)
    _, report = _lowered("example", 128, 4, monkeypatch, ANODIZE_TILE_ATTN_WGMMA="1")
    assert sum("A resident in shared memory, read through descriptors" in ln for ln in report) == 2
    assert sum("A from registers" in ln for ln in report) == 2


# ---- the slot layout and the descriptors against wgmma's canonical layouts -----------------------


def _slot_offset(r: int, c: int, rows: int, cols: int) -> int:
    """staging._Operand._soff (blocked): chunk c of row r."""
    if cols > 64:
        return (c >> 3) * rows * 128 + r * 128 + (((c & 7) ^ (r & 7)) << 4)
    return r * cols * 2 + ((c ^ (r & 7)) << 4)


def _desc_fields(desc_hi: int, start: int) -> tuple[int, int, int, int]:
    return start, (desc_hi >> 16 & 0x3FFF) << 4, (desc_hi >> 32 & 0x3FFF) << 4, desc_hi >> 62


def _sw128(addr: int) -> int:
    """The 128-byte swizzle: address bits 4-6 XOR bits 7-9 (a 1024-byte aligned base)."""
    return addr ^ ((addr >> 7) & 7) << 4


def _wgmma_b(smem: np.ndarray, start: int, hi: int, n: int, kmajor: bool) -> np.ndarray:
    """A model of the K16 x N B operand wgmma reads through a 128-byte-swizzled descriptor
    (PTX ISA, "Shared memory matrix layout"): K-major, element (k, n) at start + (n // 8) SBO +
    (n % 8) 128 + 2 k; MN-major, element (k, n) at start + (n // 64) LBO + (k // 8) SBO + (k % 8) 128
    + 2 (n % 64); each address then swizzled."""
    _, lbo, sbo, mode = _desc_fields(hi, start)
    assert mode == 1
    out = np.zeros((16, n), np.float64)
    for k in range(16):
        for j in range(n):
            if kmajor:
                a = start + (j // 8) * sbo + (j % 8) * 128 + 2 * k
            else:
                a = start + (j // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + 2 * (j % 64)
            out[k, j] = smem[_sw128(a) // 2]
    return out


@pytest.mark.parametrize("k,n,trans", [(64, 64, True), (128, 64, True), (64, 64, False), (64, 128, False),
                                       (128, 128, False), (128, 256, True)])
def test_descriptors_read_the_slot_as_the_matmuls_b(k: int, n: int, trans: bool) -> None:
    assert b_tile_ok(k, n, trans)
    rows, cols = (n, k) if trans else (k, n)  # the slot's tile as loaded: K (N x K, read .T) or V (K x N)
    tile = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    smem = np.full(rows * cols, -1.0)
    for r in range(rows):
        for c in range(cols // 8):
            at = _slot_offset(r, c, rows, cols) // 2
            smem[at:at + 8] = tile[r, 8 * c:8 * c + 8]
    assert (smem >= 0).all()  # every element lands once
    bmat = tile.T if trans else tile  # K x N
    for kk in range(k // 16):
        off, hi = descriptor_parts(kk, k, n, trans)
        np.testing.assert_array_equal(_wgmma_b(smem, off, hi, n, trans), bmat[16 * kk:16 * kk + 16])


def test_tiles_outside_the_descriptors_reach_stay_on_mma_sync() -> None:
    assert not b_tile_ok(32, 64, True) and not b_tile_ok(64, 32, False) and not b_tile_ok(64, 512, False)


def _a_row_offset(r: int, c: int, rows: int, cols: int, mt: int) -> int:
    """staging._Operand._soff with `a_rows` = mt: row r of warp w stored in wgmma's row order."""
    w, rest = divmod(r, 16 * mt)
    mi, x = divmod(rest, 16)
    return _slot_offset(64 * ((w // 4) * mt + mi) + 16 * (w % 4) + x, c, rows, cols)


@pytest.mark.parametrize("m,k,warps", [(128, 128, 4), (128, 64, 4), (128, 128, 8), (256, 128, 8)])
def test_a_resident_a_descriptor_reads_each_warps_own_rows(m: int, k: int, warps: int) -> None:
    """The SS form: warpgroup g's descriptor of row block mi (attn_wgmma.emit_register_a: the
    warpgroup's base 64 mt g rows in, 64 mi rows more, K-major) gives wgmma row 16 (w % 4) + x
    the tile's row 16 (mt w + mi) + x: the row warp w's accumulators hold (layout.py, row mode)."""
    mt = m // (16 * warps)
    tile = np.arange(m * k, dtype=np.float64).reshape(m, k)
    smem = np.full(m * k, -1.0)
    for r in range(m):
        for c in range(k // 8):
            at = _a_row_offset(r, c, m, k, mt) // 2
            smem[at:at + 8] = tile[r, 8 * c:8 * c + 8]
    assert (smem >= 0).all()
    for g in range(warps // 4):
        for mi in range(mt):
            for kk in range(k // 16):
                off, hi = descriptor_parts(kk, k, m, True)
                start = g * mt * 64 * 128 + mi * 64 * 128 + off
                _, _, sbo, mode = _desc_fields(hi, start)
                got = np.array([[smem[_sw128(start + (row // 8) * sbo + (row % 8) * 128 + 2 * kx) // 2] for kx in range(16)]
                                for row in range(64)])
                want = np.array([tile[16 * (mt * (4 * g + row // 16) + mi) + row % 16, 16 * kk:16 * kk + 16] for row in range(64)])
                np.testing.assert_array_equal(got, want)


# ---- the emitted block, run by a model warpgroup (tests/codegen/ptx_sim.py) ----------------------


def _pack(lo: float, hi: float) -> int:
    return int(np.array([lo, hi], np.float16).view(np.uint32)[0])


@pytest.mark.parametrize("k,n,trans,mt,a_rows", [
    (64, 64, True, 2, 0),     # S = Q K^T at d64, Q held in registers
    (64, 64, False, 2, 0),    # O += P V at d64
    (64, 128, False, 2, 0),   # O += P V at d128
    (128, 64, True, 1, 0),    # S at d128 over 8 warps (a warpgroup's share), Q held
    (128, 64, True, 2, 128),  # S at d128 over 4 warps, Q resident: A through descriptors
    (64, 64, True, 1, 64),
])
def test_the_block_computes_acc_plus_a_at_b_in_the_accumulator_layout(k: int, n: int, trans: bool, mt: int, a_rows: int) -> None:
    """attn_wgmma.block_lines run by 128 model threads: the accumulators of row mode's layout
    (warp w's row block mi: rows 16 (mt w + mi) ..) gain A @ B, with B in its slot's layout and A
    as lower_register_a hands it over (mma.sync's fragments, or the resident tile in wgmma's
    row order)."""
    from ptx_sim import run_warpgroup

    from anodize.codegen.tile.attn_wgmma import block_lines

    rng = np.random.default_rng(k + n + mt + a_rows)
    m = 64 * mt  # one warpgroup's rows
    A = rng.integers(-3, 4, (m, k)).astype(np.float64)
    Bm = rng.integers(-3, 4, (k, n)).astype(np.float64)
    C = rng.integers(-8, 9, (m, n)).astype(np.float64)
    smem = bytearray(96 * 1024)
    b_base, a_base = 1024, 1024 + 32 * 1024
    loaded = Bm.T if trans else Bm  # the slot's tile as loaded
    rows, cols = loaded.shape
    for r in range(rows):
        for c in range(cols // 8):
            at = b_base + _slot_offset(r, c, rows, cols)
            smem[at:at + 16] = loaded[r, 8 * c:8 * c + 8].astype(np.float16).tobytes()
    if a_rows:
        for r in range(m):
            for c in range(k // 8):
                at = a_base + _a_row_offset(r, c, m, k, mt)
                smem[at:at + 16] = A[r, 8 * c:8 * c + 8].astype(np.float16).tobytes()

    def desc(addr: int, kk: int, kdim: int, ndim: int, t: bool) -> int:
        off, hi = descriptor_parts(kk, kdim, ndim, t)
        return ((addr + off) & 0x3FFFF) >> 4 | hi

    nacc = mt * n // 2

    def elem(t: int, i: int) -> tuple[int, int]:  # layout.MmaLayout(m, n, 4, 1).offset from the thread's origin
        w, lane = t // 32, t % 32
        mi, rest = divmod(i, n // 8 * 4)
        ni, q = divmod(rest, 4)
        return 16 * (mt * w + mi) + lane // 4 + 8 * (q >> 1), 8 * ni + 2 * (lane % 4) + (q & 1)

    ops = []
    for t in range(128):
        acc = [int(np.array([C[elem(t, i)]], np.float32).view(np.uint32)[0]) for i in range(nacc)]
        if a_rows:
            a_vals = [desc(a_base, 0, k, m, True)]
        else:
            w, lane = t // 32, t % 32
            g, q = lane // 4, lane % 4
            a_vals = []
            for kk in range(k // 16):
                for mi in range(mt):
                    r0, c0 = 16 * (mt * w + mi) + g, 16 * kk + 2 * q
                    a_vals += [_pack(A[r0, c0], A[r0, c0 + 1]), _pack(A[r0 + 8, c0], A[r0 + 8, c0 + 1]),
                               _pack(A[r0, c0 + 8], A[r0, c0 + 9]), _pack(A[r0 + 8, c0 + 8], A[r0 + 8, c0 + 9])]
        ops.append([*acc, *acc, *a_vals, desc(b_base, 0, k, n, trans), 1])
    text = "\n".join(block_lines(nacc, range(k // 16), k, n, trans, mt, "f16", a_rows))
    out = run_warpgroup(text, ops, smem)
    want = A @ Bm + C
    got = np.full((m, n), np.nan)
    for t in range(128):
        for i in range(nacc):
            got[elem(t, i)] = np.array([out[t][i]], np.uint32).view(np.float32)[0]
    np.testing.assert_array_equal(got, want)


def _jit_soff(shape: tuple[int, int], blocked: bool, a_rows: int):  # type: ignore[no-untyped-def]
    """staging._Operand._soff itself, compiled for the host by LLVM (the offset arithmetic only)."""
    import ctypes

    import llvmlite.binding as llvm
    import llvmlite.ir as llir

    from anodize.codegen.tile.staging import _Operand

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    mod = llir.Module("soff")
    i32 = llir.IntType(32)
    fn = llir.Function(mod, llir.FunctionType(i32, [i32, i32]), "soff")
    b = llir.IRBuilder(fn.append_basic_block())
    op = object.__new__(_Operand)  # (no tid: the offsets read only these)
    op.b, op.shape, op.blocked, op.a_rows = b, shape, blocked and shape[1] > 64, a_rows
    b.ret(op._soff(*fn.args))
    parsed = llvm.parse_assembly(str(mod))
    ee = llvm.create_mcjit_compiler(parsed, llvm.Target.from_default_triple().create_target_machine())
    ee.finalize_object()
    f = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)(ee.get_function_address("soff"))
    return f, ee  # (the engine owns the code)


@pytest.mark.parametrize("rows,cols,blocked,mt", [(64, 64, True, 0), (64, 128, True, 0), (128, 64, True, 0), (64, 256, True, 0),
                                                  (128, 128, True, 2), (128, 64, True, 2), (128, 128, True, 1),
                                                  (64, 128, False, 0)])
def test_the_staging_offsets_are_the_layout_the_descriptors_read(rows: int, cols: int, blocked: bool, mt: int) -> None:
    f, _ee = _jit_soff((rows, cols), blocked, mt)
    for r in range(rows):
        for c in range(cols // 8):
            if mt:
                want = _a_row_offset(r, c, rows, cols, mt)
            elif blocked:
                want = _slot_offset(r, c, rows, cols)
            else:  # the row-major tile ldmatrix reads (gemm._swizzle: the chunk XOR the row's low 3 bits)
                want = r * cols * 2 + ((c ^ (r & 7)) << 4)
            assert f(r, c) == want, (r, c)
            if blocked and not mt and r + 8 < rows:  # (_copy_whole's constant step: 128 bytes a row)
                assert f(r + 8, c) == f(r, c) + 8 * (128 if cols > 64 else cols * 2)


# ---- the SASS: a register-A wgmma's A registers are not overwritten before its next iteration ----


def _nvdisasm() -> str | None:
    import glob
    import sysconfig

    found = shutil.which("nvdisasm")
    if found:
        return found
    hits = glob.glob(str(Path(sysconfig.get_paths()["purelib"]) / "nvidia" / "*" / "bin" / "nvdisasm"))
    return hits[0] if hits else None


def _clobbered_a(sass: str) -> list[str]:
    """The register-A HGMMA of each loop (a label and a later branch back to it) whose four A
    registers are written later in the loop's body but not before it: in the next iteration it
    would read what that write left (ptxas coalescing a loop-invariant A: attn_wgmma.block_lines)."""
    lines = sass.split("\n")
    labels = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"^(\.L_x_\d+):", ln))}
    bad = []
    for i, ln in enumerate(lines):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", ln)
        if not m or m.group(1) not in labels or labels[m.group(1)] > i:
            continue
        body = lines[labels[m.group(1)]:i + 1]
        for j, hg in enumerate(body):
            a = re.search(r"HGMMA\.\S+ R\d+, R(\d+), gdesc", hg)
            if a is None:
                continue
            regs = {f"R{int(a.group(1)) + t}" for t in range(4)}

            def writes(x: str, regs: set[str] = regs) -> bool:
                w = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?(\S+)\s+(R\d+)[,. ]", x)
                return w is not None and w.group(2) in regs and not w.group(1).startswith("HGMMA")

            if any(writes(x) for x in body[j + 1:]) and not any(writes(x) for x in body[:j]):
                bad.append(hg.strip())
    return bad


@needs_ptxas
@pytest.mark.skipif(_nvdisasm() is None, reason="needs nvdisasm (the nvidia-cuda-nvdisasm wheel or a CUDA toolkit)")
@pytest.mark.parametrize("variant,d,warps", [("example", 64, 4), ("example", 64, 8), ("causal_diag", 64, 4),
                                             pytest.param("example", 128, 8, marks=pytest.mark.slow)])
def test_a_held_q_is_not_overwritten_before_the_next_iterations_wgmma(variant: str, d: int, warps: int,
                                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import subprocess

    ptx = _ptx(variant, d, warps, "1", monkeypatch)
    cubin = tmp_path / "k.cubin"
    subprocess.run(["ptxas", "-arch=sm_90a", "-o", str(cubin), "-"], input=ptx, text=True, check=True, capture_output=True)
    sass = subprocess.run([str(_nvdisasm()), "-c", str(cubin)], text=True, check=True, capture_output=True).stdout
    assert sass.count("HGMMA") >= 16
    assert _clobbered_a(sass) == []
    # (the check itself: the PTX before the identity copies, A operands straight from the held
    # registers, made ptxas put P's packs into Q's registers at d64)
    plain = re.sub(r"prmt\.b32 (%aq\d+), (%r\d+), 0, 0x3210;", r"mov.b32 \1, \2;", ptx)
    assert plain != ptx
    if d == 64:
        subprocess.run(["ptxas", "-arch=sm_90a", "-o", str(cubin), "-"], input=plain, text=True, check=True, capture_output=True)
        sass = subprocess.run([str(_nvdisasm()), "-c", str(cubin)], text=True, check=True, capture_output=True).stdout
        assert _clobbered_a(sass) != []
