"""Slots whose value never crosses a block become the values themselves before LLVM
(codegen/llvm/block_slots.py): the PTX is byte-identical to the PTX with every slot kept, over
the tile examples, the GEMM class's epilogues and the SIMT kernels; a slot some load may read
before any store in its block stays, with its zero."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import cg_kernels as K
import llvmlite.ir as llir
import pytest

from anodize.codegen.driver import compile_gpu
from anodize.codegen.gpu import ptx
from anodize.codegen.llvm import lower as lower_mod
from anodize.codegen.lowerings import lower_kernel
from anodize.language.typer import build_ir

sys.path.insert(0, str(Path(__file__).parent))
import tile_mma_cases as C  # noqa: E402
from tile_cases import _example_kernels, kernel_ir  # noqa: E402


def canonical(ptx_text: str) -> str:
    """PTX with what counts compiles in a process numbered from its first appearance: the wgmma
    tile's and the staged epilogue's inline-asm labels (`AZM_LOOP_<n>`, `AZE_DONE_<n>`) and the
    target machine's `// callseq <n>` comments."""
    seen: dict[str, str] = {}

    def number(m: re.Match[str]) -> str:
        return m.group(1) + seen.setdefault(m.group(0), str(len(seen)))

    return re.sub(r"(AZ[ME]_[A-Za-z_]*|callseq )(\d+)", number, ptx_text)


def _both(kernel: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    kept = compile_gpu(kernel, "sm_90", ptxas=False).ptx
    with monkeypatch.context() as m:
        m.setattr(lower_mod, "forward_block_slots", lambda fn, zero: 0)
        every = compile_gpu(kernel, "sm_90", ptxas=False).ptx
    return canonical(kept), canonical(every)


def _gemm(name: str) -> Any:
    return kernel_ir(C.source(name, 128, 256, 64, 8, "f16"), "k")


QUICK = ["gelu_residual"]
SLOW = ["canonical", "epilogue", "acc_in", "two", "b_trans"]


@pytest.mark.parametrize("name", QUICK + [pytest.param(n, marks=pytest.mark.slow) for n in SLOW])
def test_gemm_class_ptx_is_byte_identical(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    kept, every = _both(_gemm(name), monkeypatch)
    assert kept == every


@pytest.mark.slow
def test_tile_examples_ptx_is_byte_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in _example_kernels():
        kept, every = _both(k, monkeypatch)
        assert kept == every, k.name


SIMT = ["vecadd", "saxpy", "scale2d", "control", "math32", "math64", "helpers", "block_reduce", "warp_ops", "transpose", "bools"]


def test_simt_kernels_ptx_is_byte_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SIMT:
        kept, every = _both(getattr(K, name), monkeypatch)
        assert kept == every, name


def _lowered(k: Any) -> Any:
    lw = lower_kernel(k, ptx.NVPTXTarget(k.contract, "sm_90"))
    entry = lw.module.get_global(lw.entry_name).blocks[0]
    slots = {ins.name for ins in entry.instructions if isinstance(ins, llir.AllocaInstr)}
    zeroed = {ins.operands[1].name for ins in entry.instructions if isinstance(ins, llir.StoreInstr)}
    return lw, slots, zeroed


def test_a_slot_read_before_any_store_in_its_block_stays() -> None:
    # block_reduce's loop reads `s` at the loop's head, before the body stores it
    lw, slots, zeroed = _lowered(build_ir(K.block_reduce))
    assert "s" in slots and "s" in zeroed
    assert 0 < len(slots) < len(lw.zero_stores)  # (`d`, stored then read in one block, went)
    assert "d" not in slots and "d" in {n for n, _ in build_ir(K.block_reduce).locals}


def test_the_gelu_epilogue_temporaries_become_values() -> None:
    from anodize.codegen.driver import _tiles

    k = _gemm("gelu_residual")
    tiled = _tiles(k, k.tile_warps * 32, "sm_90")
    lw, slots, zeroed = _lowered(tiled)
    assert not any(n.startswith("__az_e") for n in slots)  # each written before it is read, element by element
    assert zeroed == slots and len(slots) < len(lw.zero_stores) // 2
    text = str(lw.module)
    # (4,528 loads with every slot kept; the store loop's second copy, the one with paired residual
    # loads, codegen/tile/pair_loads.py, reads the GELU tile's registers again: 1,318, 870 without it)
    assert "__az_e" not in text and text.count(" = load ") < 1400
