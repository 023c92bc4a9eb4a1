"""Each GPU compile's LLVM module lives in a context of its own, disposed after it
(codegen/gpu/ptx.py `emit_ptx`): nothing a compile creates stays in LLVM's global context, a
module that links libdevice included (its part of libdevice is parsed into the compile's
context); compiles on several threads at once give the PTX one thread gives."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import cg_kernels as K
import pytest

from anodize.codegen.driver import compile_gpu
from anodize.codegen.gpu import ptx
from anodize.codegen.llvm.binding import binding


@pytest.fixture
def contexts(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    llvm = binding()
    made: list[object] = []
    real = llvm.create_context

    def create_context() -> object:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(llvm, "create_context", create_context)
    return made


def _entry(llvm_ir: str) -> str:
    return llvm_ir.split("define ", 1)[1].split('@"', 1)[1].split('"', 1)[0]


_calls = 0


def _emit(llvm_ir: str) -> tuple[str, str]:
    """`emit_ptx`, past the test session's memo of it (tests/conftest.py): a comment line makes
    each call's text new."""
    global _calls
    _calls += 1
    return ptx.emit_ptx(f"{llvm_ir}\n; call {_calls}\n", _entry(llvm_ir))


def test_a_compile_disposes_its_context(contexts: list[object]) -> None:
    ir = compile_gpu(K.vecadd, ptxas=False).llvm_ir
    contexts.clear()
    first = _emit(ir)
    assert len(contexts) == 1 and contexts[0].closed  # type: ignore[attr-defined]
    assert _emit(ir) == first and len(contexts) == 2 and contexts[1].closed  # type: ignore[attr-defined]


def test_a_libdevice_compile_disposes_its_context(contexts: list[object]) -> None:
    if ptx.libdevice_path() is None:
        pytest.skip("no libdevice on this machine")
    ir = compile_gpu(K.math64, ptxas=False).llvm_ir
    assert ptx.uses_libdevice(ir)
    ptx._part_bitcode(ptx.libdevice_calls(ir))  # (cut once a process, in a context of its own, disposed)
    contexts.clear()
    outs = [_emit(ir) for _ in range(3)]
    assert len(contexts) == 3 and all(c.closed for c in contexts)  # type: ignore[attr-defined]
    assert outs[0][0] == outs[1][0] == outs[2][0] and "__nv_" not in outs[0][1]
    # (the PTX's `// callseq N` comments count the target machine's calls, not the context's)
    assert len({re.sub(r"callseq \d+", "", o[1]) for o in outs}) == 1


def test_compiles_on_several_threads_at_once_give_one_threads_ptx() -> None:
    irs = [compile_gpu(k, ptxas=False).llvm_ir for k in (K.vecadd, K.math32, K.math64, K.block_reduce, K.scale2d, K.transpose)]
    alone = [re.sub(r"callseq \d+", "", _emit(ir)[1]) for ir in irs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda ir: re.sub(r"callseq \d+", "", _emit(ir)[1]), irs * 2))
    assert together == alone * 2
