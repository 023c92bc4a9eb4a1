"""The tile attention form on tensor cores (codegen/tile/attention.py `match_attention` ->
`TileAttention` -> codegen/tensorcore/attention.py): which kernels take it (exactly the reference form,
up to names), the PTX it gives, and (GPU twins) results against torch SDPA and a NumPy
emulation of the source's own semantics at ragged and unaligned sizes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.codegen.driver import compile_gpu
from anodize.codegen.tile.attention import REFERENCE, TileAttention, match_attention
from anodize.codegen.tile.entry import lower_tiles
from anodize.language.front import front_for_source

ROOT = Path(__file__).resolve().parents[2]
SPEC = lambda bm, bn, d: (("BM", bm), ("BN", bn), ("D", d))  # noqa: E731


def kernel_ir(src: str, bm: int = 128, bn: int = 64, d: int = 64, warps: int = 8):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    import re

    src = re.sub(r"num_warps=\d+", f"num_warps={warps}", src)  # typed with the warps it lowers for
    front = front_for_source(src, f"<tcattn-{abs(hash(src))}>")
    fdef = next(f for f in front.kernels() if f.name == "attention")
    t = front.typed(fdef, SPEC(bm, bn, d))
    assert t.ir is not None, [x.message for x in t.diagnostics]
    return replace(t.ir, tile_warps=warps)


def attentions(k, threads: int, tensor_cores: bool = True, limit: int = 48 * 1024) -> list[TileAttention]:  # type: ignore[no-untyped-def]
    guard = lower_tiles(k, threads, tensor_cores=tensor_cores, shared_limit=limit).body[-1]
    return [s for s in guard.body if isinstance(s, TileAttention)]


def test_the_example_is_the_reference_form() -> None:
    path = ROOT / "examples" / "tile_attention.py"
    front = front_for_source(path.read_text(), str(path))
    fdef = next(f for f in front.kernels() if f.name == "attention")
    for bm, bn, d in ((128, 64, 64), (128, 64, 128), (32, 32, 32)):
        k = front.typed(fdef, SPEC(bm, bn, d)).ir
        assert k is not None and match_attention(k) is not None


@pytest.mark.parametrize("bm,bn,d,warps", [(128, 64, 64, 8), (64, 64, 64, 4), (128, 64, 128, 8), (128, 32, 128, 8)])
def test_the_form_lowers_to_one_tensor_core_statement_on_the_gpu_only(bm: int, bn: int, d: int, warps: int) -> None:
    k = kernel_ir(REFERENCE, bm, bn, d, warps)
    (a,) = attentions(k, warps * 32)
    assert a.tile == (bm, bn, d) and a.num_warps == warps
    assert (a.q.name, a.k.name, a.v.name, a.o.name) == ("q", "k", "v", "o")
    assert attentions(k, 1) == []  # the CPU backend and the debug device: generic
    assert attentions(k, warps * 32, tensor_cores=False) == []  # before sm_80: generic


def test_renamed_parameters_and_locals_still_match() -> None:
    src = REFERENCE
    for a, b in (("seq", "n_keys"), ("    q:", "    query:"), ("(q,", "(query,"), ("acc", "out_acc"), ("m_new", "mx"),
                 (" j ", " kk "), ("+ j,", "+ kk,"), ("scale", "sm_scale"), ("base", "first")):
        src = src.replace(a, b)
    assert "query" in src and "n_keys" in src
    assert len(attentions(kernel_ir(src), 256)) == 1


DEVIATIONS = [
    ("-1.0e30", "-1.0e29"),  # another initial maximum
    ("tile.zeros((BM, 1), f32)", "tile.full((BM, 1), 1.0, f32)"),  # the normaliser not starting at 0
    ("range(0, seq, BN)", "range(BN, seq, BN)"),  # the key loop not from 0
    ("(base + j, 0), (BN, D)).T", "(base + j + 1, 0), (BN, D)).T"),  # K one row off
    ("(v, (base + j, 0)", "(k, (base + j, 0)"),  # V is K
    ("tile.sum(p, axis=1, keepdims=True)", "tile.max(p, axis=1, keepdims=True)"),  # not a sum
    (") * scale", ") * scale * 2.0"),  # another scaling
    ("p.astype(f16)", "(p * 2.0).astype(f16)"),
    ("acc * alpha)", "acc)"),  # the accumulator not rescaled
    ("result = acc / l", "result = acc / (l + 1.0)"),
    ("az.math.exp(s - m_new)", "az.math.exp(s - m)"),
    ("        m = m_new\n", "        m = m_new\n        l = l * 1.0\n"),  # an extra statement
    ("base = (pid.row * BM // seq) * seq", "base = 0"),
]
# The PTX of the generic lowering (a compile to sm_90, 0.5 s each) for three of the deviations in
# the default run (the loop, the operands, the normaliser), for all of them under `-m slow`; the
# form's refusal and the located error at the tensor-core tile are checked for all of them.
_PTX_BY_DEFAULT = {"range(0, seq, BN)", "(v, (base + j, 0)", "result = acc / l"}


@pytest.mark.parametrize("old,new", DEVIATIONS)
def test_any_deviation_stays_generic(old: str, new: str) -> None:
    assert old in REFERENCE
    src = REFERENCE.replace(old, new)
    k = kernel_ir(src, 32, 32, 32, 4)  # tiles the generic lowering holds in 48 KiB
    assert attentions(k, 128) == []
    # at the tensor-core tile a deviation is no form, but it is compiled by operations: both
    # matmuls on tensor cores, its tiles in registers (language/tile_plan.py's row mode)
    from anodize.language.tile_plan import plan_tiles

    front = front_for_source(src, f"<dev-{abs(hash(src))}>")
    fdef = next(f for f in front.kernels() if f.name == "attention")
    t = front.typed(fdef, SPEC(128, 64, 64))
    assert t.ir is not None, [d.message for d in t.diagnostics]
    plan = plan_tiles(t.ir)
    assert len(plan.sites) == 2 and plan.generic == () and plan.rows


@pytest.mark.parametrize("old,new", [d if d[0] in _PTX_BY_DEFAULT else pytest.param(*d, marks=pytest.mark.slow) for d in DEVIATIONS])
def test_a_deviation_lowers_to_generic_ptx(old: str, new: str) -> None:
    k = kernel_ir(REFERENCE.replace(old, new), 32, 32, 32, 4)
    ptx = compile_gpu(k, "sm_90", ptxas=False).ptx
    assert "mma.sync" not in ptx


def test_tiles_the_emitter_does_not_take_stay_generic() -> None:
    # (BM 48: not 16 or 32 rows a warp; D 128 with 32 rows a warp: Q stays in shared beside K and
    # V, 64 KiB, more than static shared memory holds -- and no dynamic buffer at this limit)
    from anodize.codegen.tile.attention import choose_config

    assert attentions(kernel_ir(REFERENCE, 48, 16, 32, 1), 32) == []
    assert choose_config(128, 64, 128, 4, 0, 48 * 1024, False) is None  # (every arch with tensor cores has >= 99 KiB)
    # 64 rows a warp: never the form; compiled by operations then (its tiles in registers)
    front = front_for_source(REFERENCE, "<tcattn-64-rows>")
    t = front.typed(next(f for f in front.kernels() if f.name == "attention"), SPEC(256, 64, 64))
    assert t.ir is not None and attentions(t.ir, 128) == []


H200 = 227 * 1024  # a block's opt-in shared limit on sm_90 (toolchain.block_shared_limit)


@pytest.mark.parametrize("bm,bn,d,warps,q_regs,stages,dynamic", [
    (128, 64, 64, 8, True, 2, 0),  # d 64: Q's fragments in registers, the ring in 48 KiB of static shared
    (256, 64, 128, 8, False, 2, 128 * 1024),  # 32 rows a warp at d 128: Q from shared, beside the ring
    (128, 64, 128, 4, False, 2, 96 * 1024),
    (128, 64, 128, 8, True, 2, 96 * 1024),  # 16 rows a warp at d 128: Q's fragments fit; the ring is dynamic
])
def test_the_compiler_picks_q_placement_stages_and_shared_memory(bm: int, bn: int, d: int, warps: int, q_regs: bool,
                                                                stages: int, dynamic: int) -> None:
    (a,) = attentions(kernel_ir(REFERENCE, bm, bn, d, warps), warps * 32, limit=H200)
    assert (a.q_regs, a.stages, a.dynamic_smem, a.groups, a.lazy) == (q_regs, stages, dynamic, 1, True)
    assert a.separate_q or q_regs  # Q read every key tile must not be overwritten by K
    assert (a.smem == "") == (dynamic > 0)


def test_two_warp_groups_lower_with_named_barriers_and_a_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_ATTN_GROUPS", "2")
    (a,) = attentions(kernel_ir(REFERENCE, 128, 64, 128, 8), 256, limit=H200)
    assert (a.groups, a.q_regs, a.stages) == (2, False, 2) and a.dynamic_smem == 2 * 2 * 32 * 1024 + 32 * 1024
    ptx = compile_gpu(kernel_ir(REFERENCE, 128, 64, 128, 8), "sm_90", ptxas=False).ptx
    assert "bar.sync \t%r" in ptx or "barrier.sync" in ptx  # the groups' named barriers (id 1 + group, 128 threads)
    assert "st.shared.v4.f32" in ptx and "ld.shared.v4.f32" in ptx  # group 1's (m, l, O) to group 0


def test_a_kernel_with_its_own_dynamic_array_keeps_static_staging() -> None:
    from anodize.codegen.tile.attention import choose_config

    assert choose_config(256, 64, 128, 8, 0, H200, own_dynamic=True) is None  # (the buffers would alias)
    cfg, nbytes, dynamic = choose_config(128, 64, 128, 8, 0, H200, own_dynamic=True)
    assert (cfg.q_regs, cfg.stages, nbytes, dynamic) == (True, 1, 32 * 1024, False)  # Q staged over K and V


def test_q_from_shared_compiles_to_dynamic_shared_and_an_out_of_line_narrow_path() -> None:
    art = compile_gpu(kernel_ir(REFERENCE, 256, 64, 128, 8), "sm_90", ptxas=False)
    assert art.dynamic_shared_bytes == 128 * 1024 and art.static_shared_bytes <= 48 * 1024
    ptx = art.ptx
    assert ".extern .shared" in ptx and "__az_tc_smem" in ptx
    # two copies of the loop (16- and 2-byte copies), each 2 m-tiles x (8 n-tiles x 8 k-steps + 16 x 4)
    assert ptx.count("mma.sync.aligned.m16n8k16") == 2 * 2 * (8 * 8 + 16 * 4)
    assert "xor.b32 a," in ptx  # k-step offsets inside the ldmatrix asm
    assert "attention_attn_narrow" in ptx  # the 2-byte copy path in a function of its own
    if shutil.which("ptxas"):
        r = subprocess.run(["ptxas", "-arch=sm_90", "-v", "-o", "/dev/null", "-"], input=ptx, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("bm,bn,d,warps", [(128, 64, 64, 8), (128, 64, 128, 8)])
def test_attention_ptx_on_sm_90_uses_tensor_cores_without_spills(bm: int, bn: int, d: int, warps: int) -> None:
    art = compile_gpu(kernel_ir(REFERENCE, bm, bn, d, warps), "sm_90", ptxas=None)
    ptx = art.ptx
    assert ptx.count("mma.sync.aligned.m16n8k16") >= 2 * (bn // 8) * (d // 16) and "ldmatrix" in ptx
    assert "cp.async" in ptx and "ex2.approx" in ptx and "shfl.sync.bfly" in ptx
    assert "fma.rn.f32" not in ptx  # no generic FMA loop beside it
    assert art.static_shared_bytes <= 48 * 1024
    if shutil.which("ptxas"):
        r = subprocess.run(["ptxas", "-arch=sm_90", "-v", "-o", "/dev/null", "-"], input=ptx, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        part = r.stderr[r.stderr.index("properties for attention"):]
        assert "0 bytes spill stores, 0 bytes spill loads" in part.split("\n")[1]


# ---- GPU twins -------------------------------------------------------------------------------------


def emulate(q, k, v, out_rows: int, seq: int, bm: int, bn: int, d: int, scale: float) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The reference kernel's semantics in NumPy: program t owns rows t*BM.., its keys start at
    (t*BM // seq) * seq, every operand reads zero past its own extents."""
    def rows(x, r0: int, n: int) -> np.ndarray:  # type: ignore[no-untyped-def]
        out = np.zeros((n, d), np.float32)
        part = x[max(r0, 0):r0 + n, :d].astype(np.float32)
        out[:part.shape[0], :part.shape[1]] = part
        return out

    o = np.zeros((out_rows, d), np.float32)
    for t in range(-(-out_rows // bm)):
        r0 = t * bm
        base = (r0 // seq) * seq
        qt = rows(q, r0, bm)
        m = np.full((bm, 1), -1.0e30, np.float32)
        l = np.zeros((bm, 1), np.float32)
        acc = np.zeros((bm, d), np.float32)
        for j in range(0, seq, bn):
            s = qt @ rows(k, base + j, bn).T * np.float32(scale)
            m_new = np.maximum(m, s.max(1, keepdims=True))
            p = np.exp(s - m_new)
            alpha = np.exp(m - m_new)
            l = l * alpha + p.sum(1, keepdims=True)
            acc = p.astype(np.float16).astype(np.float32) @ rows(v, base + j, bn) + acc * alpha
            m = m_new
        o[r0:r0 + bm] = (acc / l)[:max(0, min(bm, out_rows - r0))]
    return o


_EXAMPLES: dict = {}  # type: ignore[type-arg]  # warps -> the example's module with that num_warps


def _kernel(warps: int, stages: int = 0):  # type: ignore[no-untyped-def]
    """examples/tile_attention.py's kernel with `num_warps=warps` (the decorator is read from
    source, so the variant is a copy of the file with that one literal changed); `stages`: a
    copy of its own (a kernel object of its own, so its compile follows ANODIZE_ATTN_STAGES)."""
    import importlib.util
    import tempfile

    if (warps, stages) not in _EXAMPLES:
        text = (ROOT / "examples" / "tile_attention.py").read_text()
        assert "@az.tile_kernel(num_warps=4)" in text
        path = Path(tempfile.mkdtemp()) / f"tile_attention_w{warps}_s{stages}.py"
        path.write_text(text.replace("@az.tile_kernel(num_warps=4)", f"@az.tile_kernel(num_warps={warps})"))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        sys.modules[path.stem] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
        _EXAMPLES[(warps, stages)] = mod
    return _EXAMPLES[(warps, stages)].attention


@pytest.mark.gpu
@pytest.mark.parametrize("bm,bn,d,warps,stages", [(128, 64, 64, 8, 1), (128, 64, 64, 4, 1), (128, 64, 128, 8, 1),
                                                  (64, 64, 128, 4, 1), (128, 32, 128, 8, 2), (64, 32, 128, 4, 2),
                                                  (256, 64, 128, 8, 2), (128, 64, 128, 4, 2), (256, 32, 128, 8, 1),
                                                  (128, 64, 128, 8, 2), (256, 64, 64, 8, 2)])
def test_tensor_core_attention_matches_sdpa(bm: int, bn: int, d: int, warps: int, stages: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv("ANODIZE_ATTN_STAGES", str(stages))
    import torch.nn.functional as F  # noqa: N812

    bsz, heads, seq = 1, 3, 512
    q, k, v = (torch.randn(bsz, heads, seq, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.full((bsz * heads * seq, d), 7.0, device="cuda", dtype=torch.float16)
    flat = [t.reshape(-1, d) for t in (q, k, v)]
    launch = _kernel(warps, stages).specialize(BM=bm, BN=bn, D=d)[az.LaunchConfig.for_tiles((bsz * heads * seq, d), (bm, d))]
    launch(*flat, o, seq, np.float32(d ** -0.5))
    torch.cuda.synchronize()
    ref = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(o.view(bsz, heads, seq, d).float(), ref.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("bm,bn,d,warps,lazy", [(64, 32, 128, 4, "1"), (128, 64, 64, 8, "1"), (128, 64, 128, 4, "0"),
                                                (128, 64, 64, 4, "0")])
def test_lazy_and_eager_rescaling_match_sdpa(bm: int, bn: int, d: int, warps: int, lazy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch
    import torch.nn.functional as F  # noqa: N812

    monkeypatch.setenv("ANODIZE_ATTN_LAZY", lazy)  # (lazy is the compiler's default; "0": O rescaled every key tile)
    bsz, heads, seq = 2, 2, 1024
    q, k, v = (torch.randn(bsz, heads, seq, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.full((bsz * heads * seq, d), 7.0, device="cuda", dtype=torch.float16)
    flat = [t.reshape(-1, d) for t in (q, k, v)]
    launch = _kernel(warps, 9 + int(lazy)).specialize(BM=bm, BN=bn, D=d)[az.LaunchConfig.for_tiles((bsz * heads * seq, d), (bm, d))]
    launch(*flat, o, seq, np.float32(d ** -0.5))
    torch.cuda.synchronize()
    ref = F.scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(o.view(bsz, heads, seq, d).float(), ref.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("seq,cols,bm,bn,d,warps,stages", [
    (200, 64, 128, 64, 64, 8, 1), (100, 128, 64, 32, 128, 4, 2), (96, 60, 128, 32, 64, 4, 1), (1, 64, 64, 64, 64, 4, 1),
    (96, 60, 128, 64, 64, 8, 2), (300, 128, 64, 64, 128, 4, 1),
    (300, 128, 256, 64, 128, 8, 2), (100, 124, 128, 64, 128, 4, 2), (200, 120, 256, 32, 128, 8, 1)])
def test_ragged_and_unaligned_sizes_match_the_sources_semantics(seq: int, cols: int, bm: int, bn: int, d: int, warps: int,
                                                                stages: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # seq not a multiple of the tiles (the loads past the head read the next head's rows, and
    # zeros past the matrix: the source says so), and rows of 60 halves (not 16-byte aligned:
    # the 2-byte copy path; columns past 60 read as zero)
    monkeypatch.setenv("ANODIZE_ATTN_STAGES", str(stages))
    rng = np.random.default_rng(seq + cols)
    n = 2 * seq
    q, k, v = (rng.standard_normal((n, cols), dtype=np.float32).astype(np.float16) for _ in range(3))
    dev = az.device()
    o = dev.full((n, cols), 7.0, az.f16)
    launch = _kernel(warps, stages).specialize(BM=bm, BN=bn, D=d)[az.LaunchConfig.for_tiles((n, cols), (bm, d))]
    launch(dev.to_device(q), dev.to_device(k), dev.to_device(v), o, seq, np.float32(0.125))
    want = emulate(q, k, v, n, seq, bm, bn, d, 0.125)[:, :cols]
    np.testing.assert_allclose(o.to_host().astype(np.float32), want, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("seq,cols,bm,bn,d,warps", [
    (320, 128, 128, 64, 128, 8), (64, 128, 128, 64, 128, 8), (200, 124, 128, 64, 128, 8), (300, 64, 128, 64, 64, 8)])
def test_two_warp_groups_splitting_the_keys_match_the_sources_semantics(seq: int, cols: int, bm: int, bn: int, d: int,
                                                                       warps: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # two warp groups take alternate key tiles (5 tiles: 3 and 2; 1 tile: group 1 has none) and
    # merge at the end; rows of 124 halves take the 2-byte path
    monkeypatch.setenv("ANODIZE_ATTN_GROUPS", "2")
    rng = np.random.default_rng(seq + cols + 1)
    n = 2 * seq
    q, k, v = (rng.standard_normal((n, cols), dtype=np.float32).astype(np.float16) for _ in range(3))
    dev = az.device()
    o = dev.full((n, cols), 7.0, az.f16)
    launch = _kernel(warps, 22).specialize(BM=bm, BN=bn, D=d)[az.LaunchConfig.for_tiles((n, cols), (bm, d))]
    launch(dev.to_device(q), dev.to_device(k), dev.to_device(v), o, seq, np.float32(0.125))
    want = emulate(q, k, v, n, seq, bm, bn, d, 0.125)[:, :cols]
    np.testing.assert_allclose(o.to_host().astype(np.float32), want, rtol=2e-2, atol=2e-2)


def test_the_emulation_matches_the_cpu_backend_at_ragged_sizes() -> None:
    # the NumPy emulation the GPU twins compare against is the generic lowering's semantics
    rng = np.random.default_rng(5)
    seq, cols, n = 50, 30, 100
    q, k, v = (rng.standard_normal((n, cols), dtype=np.float32).astype(np.float16) for _ in range(3))
    dev = az.device("cpu")
    o = dev.full((n, cols), 7.0, az.f16)
    launch = _kernel(1).specialize(BM=32, BN=16, D=32)[az.LaunchConfig.for_tiles((n, cols), (32, 32))]
    launch(dev.to_device(q), dev.to_device(k), dev.to_device(v), o, seq, np.float32(0.25))
    want = emulate(q, k, v, n, seq, 32, 16, 32, 0.25)[:, :cols]
    np.testing.assert_allclose(o.to_host().astype(np.float32), want, rtol=1e-2, atol=1e-2)


def test_the_accept_fixture_with_module_constants_and_other_names_takes_the_form() -> None:
    path = ROOT / "fixtures" / "accept" / "tile_attention_tensor_cores.py"
    front = front_for_source(path.read_text(), str(path))
    fdef = next(f for f in front.kernels() if f.name == "flash")
    k = front.typed(fdef, ()).ir
    assert k is not None
    (a,) = attentions(k, 64)
    assert a.tile == (32, 32, 32) and (a.q.name, a.o.name) == ("query", "out")
