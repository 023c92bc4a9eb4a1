"""Copy ops: `dev.copy_op(dst, src)` (device to device, host to device, device to host)
and `buf.to_host_op()`, the leaves of the lazy-op tree (runtime/ops.py) that move bytes.

On a GPU a copy whose host side is not pinned memory is staged through a pinned buffer
of the device's staging cache (`streams.staging_empty`: reused, so a pipeline of pageable
copies neither allocates nor frees page-locked memory per copy), and the user's array is
filled when the host observes completion (a finalizer of the handle).
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.language.errors import AliasingError, ArgumentError
from anodize.runtime import inflight, peer, streams as S
from anodize.runtime.buffer import FRONTS, Buffer
from anodize.runtime.inflight import Use
from anodize.runtime.ops import _UNSET, Leaf, Op, _describe_array
from anodize.runtime.submission import _Ctx

if TYPE_CHECKING:
    from anodize.runtime.device import Device

__all__ = ["CopyOp", "ToHostOp", "copy_op"]


def copy_op(dev: Device, dst: Any, src: Any) -> CopyOp:
    """`dev.copy_op(dst, src)`: device to device, host (NumPy) to device, or device to host."""
    if isinstance(dst, Buffer) and isinstance(src, Buffer):
        kind = "d2d"
    elif isinstance(dst, Buffer) and isinstance(src, np.ndarray):
        kind = "h2d"
    elif isinstance(dst, np.ndarray) and isinstance(src, Buffer):
        kind = "d2h"
    else:
        raise ArgumentError(
            f"`copy_op(dst, src)` copies between anodize Buffers and NumPy arrays, got dst = "
            f"{_describe_array(dst)} and src = {_describe_array(src)}",
            help="at least one side must be a Buffer; copy host arrays with `np.copyto`",
        )
    if kind == "d2d" and dst.device is not src.device:
        if dst.device.kind != src.device.kind:
            raise ArgumentError(
                f"`copy_op`: dst lives on {dst.device.describe()} and src on {src.device.describe()}; "
                "a lazy copy runs between devices of one kind",
                help="copy through the host: `src.to_host_op()`, then `dev.copy_op(dst, host)`",
            )
        if dev is not dst.device and dev is not src.device:
            raise ArgumentError(
                f"`copy_op`: neither dst ({dst.device.describe()}) nor src ({src.device.describe()}) "
                f"lives on {dev.describe()}"
            )
        kind, dev = "peer", dst.device  # a copy between devices runs on the destination's device
        if dev.kind == "cuda":  # now, not while the copy is queued (or captured into a graph)

            peer.enable_peer_access(src.device, dst.device)
    for side, b in (("dst", dst), ("src", src)):
        if isinstance(b, Buffer) and not b.is_contiguous:
            raise ArgumentError(
                f"`copy_op`: {side} is a non-contiguous view of shape {b.shape} (strides {b.strides})",
                help="copy whole rows (a contiguous view), or make a contiguous copy with `view.copy()`",
            )
        if isinstance(b, Buffer) and b.device is not dev and kind != "peer":
            raise ArgumentError(
                f"`copy_op`: {side} lives on {b.device.describe()}, but the copy runs on {dev.describe()}",
                help="call `copy_op` on the buffer's device, or copy between devices with a Buffer on each side",
            )
    if dst.dtype != src.dtype:
        raise ArgumentError(
            f"`copy_op` needs matching dtypes, got dst {dst.dtype} and src {src.dtype}",
            help="convert the host array with `.astype(...)` first",
        )
    if tuple(dst.shape) != tuple(src.shape):
        raise ArgumentError(f"`copy_op` needs matching shapes, got dst {tuple(dst.shape)} and src {tuple(src.shape)}")
    if kind == "d2h":
        if not dst.flags.c_contiguous:
            raise ArgumentError("`copy_op`: the host destination must be C-contiguous", help="use `np.empty(shape, dtype)`")
        if not dst.flags.writeable:
            raise ArgumentError("`copy_op`: the host destination is read-only")
    if kind == "h2d" and not src.flags.c_contiguous:
        src = np.ascontiguousarray(src)  # a snapshot taken now
    if kind == "d2d" and dst.ptr < src.ptr + src.nbytes and src.ptr < dst.ptr + dst.nbytes and dst.nbytes:
        raise AliasingError(
            "`copy_op`: dst and src share memory",
            help="copy into a separate buffer (`dev.empty(...)`)",
        )
    return CopyOp(dev, dst, src, kind)


class CopyOp(Leaf):
    """`dev.copy_op(dst, src)`: one copy, recorded."""

    _ARROWS = {"h2d": "host -> device", "d2h": "device -> host", "d2d": "device -> device", "peer": "device -> device"}

    def __init__(self, dev: Device, dst: Any, src: Any, kind: str):
        super().__init__(dev)
        self.dst = dst
        self.src = src
        self.kind = kind
        self.nbytes = int(src.nbytes)
        what = f"copy op ({self._arrow()})"
        self._uses = (self._use(src, False, f"the source of {what}"), self._use(dst, True, f"the destination of {what}"))

    @staticmethod
    def _use(x: Any, writes: bool, label: str) -> Use:
        return inflight.use_of_buffer(x, writes, label) if isinstance(x, Buffer) else inflight.use_of_host(x, writes, label)

    def _arrow(self) -> str:
        if self.kind == "peer":
            return f"{self.src.device.describe()} -> {self.dst.device.describe()}"
        return self._ARROWS[self.kind]

    def describe(self) -> str:
        return f"copy op ({self._arrow()}, {self.nbytes} bytes)"

    @staticmethod
    def _addr(x: Any) -> int:
        return x.ptr if isinstance(x, Buffer) else int(x.ctypes.data)

    def _execute_cpu(self) -> None:
        if self.nbytes:
            ctypes.memmove(self._addr(self.dst), self._addr(self.src), self.nbytes)

    def _enqueue_gpu(self, ctx: _Ctx, lane: S.GpuLane) -> None:
        dst, src = self.dst, self.src
        if self.kind == "peer":
            S.ensure_current(lane.device)  # type: ignore[arg-type]
            peer.enqueue_peer_copy(lane.cu, dst.device, dst.ptr, src.device, src.ptr, self.nbytes)  # on this op's stream
            return
        if self.kind == "h2d" and not S.is_pinned(self.device, src):
            if ctx.capturing:
                raise _pinned_error("source")
            stage = S.staging_empty(self.device, src.shape, src.dtype)  # a snapshot, so the copy can overlap
            np.copyto(stage, src)
            ctx.handle.keep.append(stage)
            src = stage
        elif self.kind == "d2h" and not S.is_pinned(self.device, dst):
            if ctx.capturing:
                raise _pinned_error("destination")
            stage = S.staging_empty(self.device, dst.shape, dst.dtype)
            user = dst
            lane.copy(self.kind, self._addr(stage), self._addr(src), self.nbytes)
            # filled when the copy is done: at completion, or before a host step that reads it
            ctx.handle.staged.append(
                (lane.record(), lambda: np.copyto(user, stage) if user.flags.writeable else _copy_locked(user, stage))
            )
            return
        lane.copy(self.kind, self._addr(dst), self._addr(src), self.nbytes)

    def _collect(self) -> Any:
        self._result = self.dst
        return self.dst

    def _early(self) -> Any:
        """A device destination is usable in stream order; a host one only once complete."""
        return self.dst if isinstance(self.dst, Buffer) else _UNSET

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        return copy_op(self.device, mapping.get(id(self.dst), self.dst), mapping.get(id(self.src), self.src))


def _copy_locked(user: np.ndarray, stage: np.ndarray) -> None:
    user.flags.writeable = True
    try:
        np.copyto(user, stage)
    finally:
        user.flags.writeable = False


def _pinned_error(side: str) -> ArgumentError:
    return ArgumentError(
        f"a copy captured into a CUDA graph needs its host {side} in pinned memory",
        help="allocate it with `az.pinned_empty(dev, shape, dtype)`",
    )


class ToHostOp(CopyOp):
    """`buf.to_host_op()`: a copy into a new host array (pinned on a GPU), which is the result."""

    def __init__(self, buf: Buffer):
        if not isinstance(buf, Buffer):
            raise ArgumentError(f"`to_host_op` needs an anodize Buffer, got {_describe_array(buf)}")
        out = S.pinned_empty(buf.device, buf.shape, buf.dtype)
        super().__init__(buf.device, out, buf, "d2h")
        self.copy_result = False  # set for graph replays, whose array the next replay overwrites

    def describe(self) -> str:
        return f"to_host op ({self.nbytes} bytes)"

    def _collect(self) -> Any:
        self._result = self.dst.copy() if self.copy_result else self.dst
        return self._result

    def _rebind(self, mapping: dict[int, Any]) -> Op:
        return ToHostOp(mapping.get(id(self.src), self.src))


FRONTS.to_host_op, FRONTS.copy_op = ToHostOp, copy_op  # `Buffer.to_host_op`, `Device.copy_op`
FRONTS.ready = True  # (runtime/peer.py, imported above, filled the rest)
