"""bf16 and f16 from other libraries, without a GPU: a DLPack capsule's kDLBfloat is anodize's
bf16 without ml_dtypes loaded, and the element check takes bf16 by name (tests/runtime/
test_interop_gpu.py launches on PyTorch and JAX tensors)."""

from __future__ import annotations

import numpy as np
import pytest

from anodize.language.ir import ParamSpec
from anodize.language.vocab import SCALARS, SLICE_KINDS
from anodize.runtime import args as A
from anodize.runtime.dlpack import read_capsule


def _param(scalar: str) -> ParamSpec:
    return ParamSpec("x", SLICE_KINDS["Slice"], SCALARS[scalar])


def test_a_torch_bf16_capsule_reads_as_bf16() -> None:
    torch = pytest.importorskip("torch")
    t = read_capsule(torch.ones(8, dtype=torch.bfloat16).__dlpack__())
    assert t.bf16 and t.dtype is None and t.itemsize == 2 and t.shape == (8,)
    A._expect("k", _param("bf16"), None, t.shape, t.dtype_text, scalar=t.scalar)
    with pytest.raises(Exception, match="expects elements of f16"):
        A._expect("k", _param("f16"), None, t.shape, t.dtype_text, scalar=t.scalar)
    h = read_capsule(torch.ones(8, dtype=torch.float16).__dlpack__())
    assert not h.bf16 and h.dtype == np.float16 and h.itemsize == 2
    A._expect("k", _param("f16"), h.dtype, h.shape, h.dtype_text)


def test_bf16_elements_are_matched_by_name() -> None:
    ml = pytest.importorskip("ml_dtypes")
    assert A._element_matches(_param("bf16"), np.dtype(ml.bfloat16))
    assert not A._element_matches(_param("bf16"), np.dtype("V2"))
    assert not A._element_matches(_param("bf16"), np.dtype(np.float16))
    assert A._element_matches(_param("f32"), np.dtype(np.float32))
