"""The on-chip memory bound: what the typer refuses is what ptxas would refuse, and the tile
lowering never allocates more than the language's bound (language/tile_storage.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from kernelgen import RandomChooser  # noqa: E402
from kernelgen_tiles import gen_tile_module  # noqa: E402

from anodize.checker.api import analyze_source  # noqa: E402
from anodize.codegen.tile.entry import lower_tiles  # noqa: E402
from anodize.language import ir  # noqa: E402
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES, tile_storage_bound  # noqa: E402


def _typed_tile_kernels(src: str, path: str):
    a = analyze_source(src, path)
    if a.model is None:
        return
    front = a.model.front
    for fdef in front.kernels():
        t = front.typed(fdef)
        if t.ir is not None and t.ir.tile_warps:
            yield t.ir


def _allocated(k, tensor_cores: bool) -> int | None:
    """The static shared memory of `k`'s GPU lowering, the tensor-core GEMM's own ring aside.
    On tensor cores every accumulator the bound leaves out is on them; None where the bound
    does not speak for the lowering: without tensor cores, for a kernel with such an
    accumulator (that compile counts it: `storage_error_without_tensor_cores`)."""
    from anodize.codegen.tile.attention import TileAttention
    from anodize.codegen.tile.mma import TileMma
    from anodize.language.tile_plan import plan_tiles

    low = lower_tiles(k, k.tile_warps * 32, tensor_cores=tensor_cores, wgmma=tensor_cores, shared_limit=227 * 1024 if tensor_cores else 48 * 1024)
    on_tc = any(isinstance(s, (TileMma, TileAttention)) for s in ir.walk_stmts(low.body))
    accs = plan_tiles(k).registers
    if tensor_cores:
        assert on_tc == bool(accs), (k.name, accs)
    elif accs:
        return None
    # (the attention form's own buffer, like a GEMM ring, is the routine's: attention_config sizes it)
    return sum(t.size * t.elem.info.mem_bits // 8 for name, t in low.shared
               if not t.dynamic and "gemm_smem" not in name and "attn_smem" not in name)


SOURCES = [(p.name, p.read_text()) for p in sorted((ROOT / "fixtures" / "accept").glob("*.py")) + sorted((ROOT / "examples").glob("tile_*.py"))]


@pytest.mark.parametrize("seeds", [range(0, 60)])
def test_the_lowering_stays_within_the_bound(seeds: range) -> None:
    sources = [s for s in SOURCES if "tile_kernel" in s[1]] + [(f"gen{n}.py", gen_tile_module(RandomChooser(n))) for n in seeds]
    checked = 0
    for path, src in sources:
        for k in _typed_tile_kernels(src, path):
            bound = tile_storage_bound(k)
            assert bound <= STATIC_SHARED_MAX_BYTES
            for tc in (False, True):
                used = _allocated(k, tc)
                assert used is None or used <= bound, (path, k.name, used, bound)
            checked += 1
    assert checked > 40


def test_static_shared_over_the_limit_is_a_located_type_error() -> None:
    src = (ROOT / "fixtures" / "reject" / "shared_too_large.py").read_text()
    a = analyze_source(src, "shared_too_large.py")
    got = sorted((d.span.line, d.code) for d in a.diagnostics)
    assert got == [(14, "az-type"), (26, "az-type"), (33, "az-type")]
    texts = " ".join(d.message for d in a.diagnostics)
    assert "65536 bytes" in texts and "49152" in texts


def test_the_tile_examples_fit_and_stay_within_the_bound() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "codegen"))
    from tile_cases import _example_kernels

    kernels = _example_kernels()
    assert {k.name for k in kernels} >= {"attention", "gemm", "softmax", "layer_norm"}
    for k in kernels:
        bound = tile_storage_bound(k)
        assert bound <= STATIC_SHARED_MAX_BYTES, (k.name, bound)
        for tc in (False, True):
            used = _allocated(k, tc)
            assert used is None or used <= bound, (k.name, tc)
        if k.name == "gemm":  # the example's 128x256 accumulator: in registers on tensor cores
            assert _allocated(k, True) is not None


FORM = ROOT / "fixtures" / "accept" / "tile_gemm_big_accumulator.py"
NOT_FORM = ROOT / "fixtures" / "reject" / "tile_gemm_accumulator_reduced.py"
ANY_OFFSETS = ROOT / "fixtures" / "accept" / "tile_gemm_any_offsets.py"


def test_a_gemm_accumulator_is_left_out_only_when_the_tensor_core_path_takes_it() -> None:
    """The same 64 KiB-accumulator GEMM three times: stored, its accumulator is in registers on
    tensor cores (bound 0, the lowering keeps nothing in static shared memory), whatever the
    operands' offsets; read by a reduction it stays a shared tile, is counted, and the check (not
    the compile, with a traceback) refuses it at the kernel's name."""
    a = analyze_source(NOT_FORM.read_text(), NOT_FORM.name)
    assert [(d.span.line, d.code) for d in a.diagnostics] == [(14, "az-type")]
    (k,) = _typed_tile_kernels(ANY_OFFSETS.read_text(), ANY_OFFSETS.name)
    assert tile_storage_bound(k) == 0 and _allocated(k, True) == 0
    assert "83456 bytes" in a.diagnostics[0].message
    (k,) = _typed_tile_kernels(FORM.read_text(), FORM.name)
    assert tile_storage_bound(k) == 0 and _allocated(k, True) == 0


def test_without_tensor_cores_the_compile_counts_the_accumulator() -> None:
    from anodize.codegen.driver import compile_gpu
    from anodize.language.errors import CheckError

    (k,) = _typed_tile_kernels(FORM.read_text(), FORM.name)
    compile_gpu(k, "sm_80", ptxas=False)  # tensor cores: the accumulator is in registers
    with pytest.raises(CheckError) as e:
        compile_gpu(k, "sm_75", ptxas=False)
    (d,) = e.value.diagnostics
    assert d.code == "az-type" and "below sm_80" in d.message and "81920 bytes" in d.message and d.span.line == 16


def test_the_attention_choice_at_the_least_limit_holds_on_every_arch_with_tensor_cores() -> None:
    """The typer leaves an attention form's tiles out of the bound when `attention_choice` takes
    it at STAGING_LIMIT (99 KiB); the lowering decides with the arch's own limit: a tile taken at
    the least limit must be taken at every larger one (else the compile would decline a kernel
    the check accepted)."""
    from anodize.language.attention_config import attention_choice
    from anodize.language.tile_plan import STAGING_LIMIT

    taken = 0
    for bm in (16, 32, 64, 128, 256):
        for bn in (16, 32, 64, 128):
            for d in (16, 32, 64, 128, 256):
                for warps in (1, 2, 4, 8, 16):
                    if attention_choice(bm, bn, d, warps, 0, STAGING_LIMIT, False) is None:
                        continue
                    taken += 1
                    for kib in (99, 163, 227):
                        assert attention_choice(bm, bn, d, warps, 0, kib * 1024, False) is not None, (bm, bn, d, warps, kib)
    assert taken > 50


def test_an_attention_tile_no_tensor_core_routine_takes_is_counted() -> None:
    """examples/tile_attention.py at BM=128, BN=128, D=256 over 4 warps: too many fragment
    registers for the tensor-core routine and for the layout plan's accumulator (256 f32 a
    thread), so its tiles (676 KiB) are counted and the specialisation is a located az-type
    error (it used to pass and stop the compile).  At BM=128, BN=64, D=128 the layout plan holds
    every tile in registers (row mode: language/tile_plan.py), so the bound is small."""
    path = ROOT / "examples" / "tile_attention.py"
    a = analyze_source(path.read_text(), str(path))
    front = a.model.front
    fdef = next(f for f in front.kernels() if f.name == "attention")
    bad = front.typed(fdef, (("BM", 128), ("BN", 128), ("D", 256)))
    assert bad.ir is None and [(d.code, d.span.line) for d in bad.diagnostics] == [("az-type", fdef.lineno)]
    assert "692224 bytes" in bad.diagnostics[0].message
    good = front.typed(fdef, (("BM", 128), ("BN", 64), ("D", 128)))
    assert good.ir is not None and tile_storage_bound(good.ir) <= 4096


def test_an_accumulator_too_large_for_a_threads_registers_is_not_the_form() -> None:
    """Found by the agreement run (seed 407825): a 256 x 256 accumulator over 16 warps is 128 f32
    registers a thread of the 128 a 512-thread block allows, which ptxas cannot assemble; it is
    not the tensor-core form, so it is counted and refused at the kernel's name."""
    from anodize.language.tile_plan import accumulator_fits

    assert accumulator_fits(128, 256, 8) and accumulator_fits(256, 128, 16)  # the example's tiles
    assert not accumulator_fits(256, 256, 16) and not accumulator_fits(256, 256, 8)
    src = FORM.read_text().replace("num_warps=8", "num_warps=16").replace("128", "256")
    a = analyze_source(src, "big.py")
    assert [(d.span.line, d.code) for d in a.diagnostics] == [(16, "az-type")]
