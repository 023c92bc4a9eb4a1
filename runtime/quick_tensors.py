"""The quick launch path for plans whose arrays include PyTorch CUDA tensors.

A plan (runtime/launch.py) whose array arguments are all anodize Buffers re-checks a repeated
launch in one specialised pass (`_quick_path`).  A torch tensor otherwise takes the full path
on every launch: its `__cuda_array_interface__` dict is built in Python, its device found with
a driver query, `requires` evaluated by the generic evaluator: about 27 us of host time a
launch on the H200 host, against 7 us for `torch.softmax` (bench/RESULTS.md, session 5).

`tensor_quick` builds the same kind of pass for a plan whose array arguments are Buffers or
tensors of exactly `torch.Tensor`, reading what the full path checks straight from the tensor:
element type (a fixed table: the dtypes whose array interface maps one-to-one), rank, C
contiguity, device index, `requires_grad` (the array interface refuses such a tensor), then
aliasing between outputs and the other arrays and the compiled `requires`.  Anything it does
not accept returns None, and the full path then raises the error or launches.  It is only
built when the sample tensor's array interface carries no stream (the full path would order
the launch after that stream; torch's interface, version 2, names none).  No memo: a tensor
is not a Buffer whose liveness the memo can watch.

`host_tensor_quick` is the same pass for a CPU-backend plan made from NumPy views of PyTorch
CPU tensors (`az.torch`'s ops plan that way), taking the CPU tensors themselves: a tensor's
`data_ptr()` is the address its NumPy view has, so the op skips making the views and the
full path's adapters on every call.  A tensor with PyTorch's negative bit set (its memory
holds the negated values; `.numpy()` refuses it) is refused, as is any other device.
"""

from __future__ import annotations

import sys
from typing import Any

from anodize.runtime.buffer import Buffer
from anodize.runtime.requires_fast import compile_requires

__all__ = ["host_tensor_quick", "tensor_quick"]

_NP_TO_TORCH = ("float32", "float64", "float16", "bfloat16", "int8", "int16", "int32", "int64", "uint8")


def tensor_quick(plan: Any, sample: tuple[Any, ...], modes: tuple[int, int, int]) -> tuple[Any, Any]:
    """(quick, memo) for `plan`, or (None, None) when its arrays are not all Buffers and
    torch CUDA tensors of a supported dtype (see the module's docstring)."""
    torch = _torch()
    if torch is None or getattr(plan.device, "kind", None) != "cuda":
        return None, None
    quick = _build(torch, plan, sample, modes, False)
    return (quick, _no_memo) if quick is not None else (None, None)


def host_tensor_quick(plan: Any, sample: tuple[Any, ...], modes: tuple[int, int, int]) -> Any:
    """`quick(args) -> packed | None` for a CPU-backend `plan` whose arrays were NumPy views
    (`modes`: its buffer, scalar and NumPy step kinds), taking PyTorch CPU tensors where the
    plan took the views; None when `sample` is not such a launch (see the module's docstring)."""
    torch = _torch()
    if torch is None or getattr(plan.device, "kind", None) != "cpu":
        return None
    return _build(torch, plan, sample, modes, True)


def _build(torch: Any, plan: Any, sample: tuple[Any, ...], modes: tuple[int, int, int], host: bool) -> Any:
    """The quick pass over Buffers, scalars and torch tensors: CUDA tensors, or CPU ones (`host`)."""
    _BUF, _SCALAR, _OTHER = modes
    dev = plan.device
    index = getattr(dev, "index", 0)

    specs: list[tuple[int, Any, int, Any]] = []  # (kind 0 buffer / 1 tensor / 2 scalar, dtype, rank, converter)
    where: list[int] = []
    at = len(plan.prefix)
    for (mode, p, how, rank), a in zip(plan.steps, sample):
        where.append(at)
        if mode == _SCALAR:
            specs.append((2, type(a), 0, how))
            at += 1
            continue
        if mode == _BUF:
            specs.append((0, how, rank, None))
        elif mode == _OTHER and type(a) is torch.Tensor:
            name = p.scalar.numpy_name
            if name not in _NP_TO_TORCH or (host and name == "bfloat16"):  # (NumPy has no bf16 view)
                return None
            if not host:
                try:
                    cai = a.__cuda_array_interface__
                except Exception:  # noqa: BLE001 - the full path reports it
                    return None
                if cai.get("stream") is not None:
                    return None
            specs.append((1, getattr(torch, name), rank, None))
        else:
            return None
        at += 1 + rank
    check = None
    if plan.requires is not None:
        slices: dict[str, tuple[int, int]] = {}
        scalars: dict[str, int] = {}
        for i, rname, kind in plan.req_slots:
            if kind == 0:
                slices[rname] = (where[i] + 1, plan.params[i].rank)
            else:
                scalars[rname] = where[i]
        check = compile_requires(plan.requires, slices, scalars)
        if check is None:
            return None
    pairs = plan.alias_pairs
    prefix, suffix, nargs = plan.prefix, plan.suffix, plan.nargs
    spec = tuple(specs)
    tensor_type = torch.Tensor
    buffer_type = Buffer

    def quick(args: tuple[Any, ...]) -> list[Any] | None:
        if len(args) != nargs:
            return None
        flat = list(prefix)
        lo: list[int] = []
        hi: list[int] = []
        for (kind, want, rank, conv), a in zip(spec, args):
            if kind == 2:
                if type(a) is not want:
                    return None
                flat.append(conv(a))  # raises the range error the full path raises
                lo.append(0)
                hi.append(0)
                continue
            if kind == 0:
                if type(a) is not buffer_type or a._device is not dev or a._dtype is not want:
                    return None
                shape = a._shape
                ptr, nbytes = a._ptr, a._nbytes
            else:
                if type(a) is not tensor_type or a.dtype is not want or not a.is_contiguous():
                    return None
                if host:
                    if not a.is_cpu or a.is_neg():  # the negative bit: its memory holds the negated values
                        return None
                elif a.requires_grad or not a.is_cuda or a.get_device() != index:
                    return None
                shape = a.shape  # a torch.Size: a tuple
                nbytes = a.nbytes
                ptr = a.data_ptr() if nbytes else 0
            if len(shape) != rank:
                return None
            flat.append(ptr)
            flat.extend(shape)
            lo.append(ptr if nbytes else 0)
            hi.append(ptr + nbytes if nbytes else 0)
        for o, j in pairs:
            if lo[o] < hi[j] and lo[j] < hi[o]:
                return None
        if check is not None and not check(flat):
            return None
        flat += suffix
        return flat

    return quick


def _no_memo(args: tuple[Any, ...], packed: list[Any]) -> None:
    return None


def _torch() -> Any:
    return sys.modules.get("torch")  # only when the program uses torch already
