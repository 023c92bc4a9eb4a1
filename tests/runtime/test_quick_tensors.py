"""runtime/quick_tensors.py: the quick launch path for PyTorch CUDA tensors, checked here with a
stand-in `torch` module (no GPU, no torch needed), and on the GPU with real tensors."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest

from anodize.language.vocab import SCALARS
from anodize.runtime.quick_tensors import tensor_quick

_BUF, _SCALAR, _OTHER = 0, 3, 2


class _Tensor:
    def __init__(self, shape: tuple[int, ...], dtype: Any, ptr: int, device: int = 0, grad: bool = False, contiguous: bool = True):
        self.shape, self.dtype, self._ptr, self._dev = shape, dtype, ptr, device
        self.requires_grad, self._cont, self.is_cuda = grad, contiguous, True
        self.stream: int | None = None

    @property
    def __cuda_array_interface__(self) -> dict:  # type: ignore[type-arg]
        return {"shape": self.shape, "typestr": "<f4", "data": (self._ptr, False), "version": 3, "stream": self.stream}

    def get_device(self) -> int:
        return self._dev

    def is_contiguous(self) -> bool:
        return self._cont

    def numel(self) -> int:
        return int(np.prod(self.shape))

    def data_ptr(self) -> int:
        return self._ptr

    def element_size(self) -> int:
        return 4

    @property
    def nbytes(self) -> int:
        return self.numel() * 4


class _P:
    def __init__(self, name: str, rank: int, output: bool):
        self.name, self.rank, self.is_output = name, rank, output
        self.scalar = SCALARS["f32"]


def _plan(params: list[_P]) -> Any:
    plan = types.SimpleNamespace()
    plan.device = types.SimpleNamespace(kind="cuda", index=0)
    plan.steps = tuple((_OTHER, p, None, p.rank) for p in params)
    plan.prefix, plan.suffix, plan.nargs = ("F",), ("R",), len(params)
    plan.requires = None
    plan.params = tuple(params)
    plan.alias_pairs = tuple((o, j) for o in range(len(params)) if params[o].is_output for j in range(len(params)) if j != o and (j > o or not params[j].is_output))
    return plan


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> Any:
    mod = types.ModuleType("torch")
    mod.Tensor = _Tensor  # type: ignore[attr-defined]
    mod.float32, mod.float16 = object(), object()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", mod)
    return mod


def test_tensors_pack_like_the_full_path_and_anything_else_falls_back(fake_torch: Any) -> None:
    params = [_P("x", 2, False), _P("y", 2, True)]
    t = fake_torch.float32
    x, y = _Tensor((4, 8), t, 1000), _Tensor((4, 8), t, 5000)
    quick, memo = tensor_quick(_plan(params), (x, y), (_BUF, _SCALAR, _OTHER))
    assert quick is not None and memo((x, y), []) is None
    assert quick((x, y)) == ["F", 1000, 4, 8, 5000, 4, 8, "R"]
    # each of these is for the full path to accept or report
    assert quick((x, _Tensor((4, 8), t, 1064))) is None  # the output overlaps x: aliasing
    assert quick((x, _Tensor((4, 8), fake_torch.float16, 5000))) is None  # another dtype
    assert quick((x, _Tensor((4, 8), t, 5000, grad=True))) is None
    assert quick((x, _Tensor((4, 8), t, 5000, device=1))) is None
    assert quick((x, _Tensor((4, 8), t, 5000, contiguous=False))) is None
    assert quick((x, _Tensor((32,), t, 5000))) is None  # another rank
    assert quick((x, np.zeros((4, 8), np.float32))) is None
    plan = _plan(params)
    x.stream = 7  # a sample whose interface names a stream: the full path orders the launch after it
    assert tensor_quick(plan, (x, y), (_BUF, _SCALAR, _OTHER)) == (None, None)
    odd = types.SimpleNamespace(**{k: getattr(x, k) for k in ("shape", "dtype")})
    assert tensor_quick(plan, (odd, y), (_BUF, _SCALAR, _OTHER)) == (None, None)  # not exactly torch.Tensor


@pytest.mark.gpu
def test_torch_tensors_take_the_quick_path_and_errors_still_come_from_the_full_path() -> None:
    torch = pytest.importorskip("torch")
    import anodize as az
    from anodize.errors import AliasingError

    sys.path.insert(0, "examples")
    import tile_softmax

    x = torch.randn(8, 256, device="cuda")
    y = torch.empty_like(x)
    launch = tile_softmax.softmax.specialize(cols=256)[az.LaunchConfig.for_tiles((8, 256), (1, 256))]
    launch(x, y)
    launch(x, y)
    torch.cuda.synchronize()
    hot = getattr(launch, "last_plan", None)
    if hot is not None:  # the Launcher of the specialisation
        assert hot.quick is not None
    torch.testing.assert_close(y, torch.softmax(x, dim=1))
    with pytest.raises(AliasingError):
        launch(x, x)
    with pytest.raises(Exception, match="f32"):
        launch(x.double(), y)
