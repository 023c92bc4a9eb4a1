"""Copies between devices: `buf.copy_to(dev)` and the device-to-device step of a cross-device `copy_op`.

    b1 = b0.copy_to(az.device(1))          # GPU 0 -> GPU 1: a peer copy
    c1 = c0.copy_to(az.device("cpu", 1))   # CPU stand-in 0 -> CPU stand-in 1: a plain copy

Between two GPUs that can access each other (`cuDeviceCanAccessPeer`, through cuda.core's
`Device.can_access_peer`), the first copy enables peer access both ways, once per pair of
devices: `cuCtxEnablePeerAccess` for each context, and access to each device's
stream-ordered memory pool (where anodize allocates, and where context peer access does
not reach) for the other device (`cuMemPoolSetAccess`, cuda.core's
`DeviceMemoryResource.peer_accessible_by`).  The copy is then one `cuMemcpyPeerAsync`
over NVLink or PCIe.  Between GPUs that cannot, `copy_to` stages through pinned host
memory (device -> host on the source's stream, host -> device on the destination's) and
returns once the copy is done; a cross-device `copy_op` hands the same case to
`cuMemcpyPeerAsync`, which the driver stages itself.

Ordering, with no host wait on the peer path: the destination's stream waits (an event)
for the work already queued on the source's stream, the copy runs on the destination's
stream, and the source's stream then waits for the copy.  So the copy sees every earlier
write of the source, and a later launch on the source's device that overwrites it (or
the source's stream-ordered free) cannot start before the copy has read it.  Lazy ops in
flight that write the source are waited for first (runtime/inflight.py).

CPU stand-in devices (`az.device("cpu", n)`) copy with `memmove`; between a CPU device and
a GPU the copy goes through the host.
"""

from __future__ import annotations

import ctypes
import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from anodize.language.errors import ArgumentError
from anodize.runtime import inflight as _inflight, lazy
from anodize.runtime.buffer import FRONTS, Buffer
from anodize.runtime.device import Device as _Device, device as _device
from anodize.runtime.lazy import check_cu
from anodize.runtime.streams import device_lane, ensure_current, order_launch, pinned_empty

if TYPE_CHECKING:
    from anodize.runtime.device import Device

__all__ = ["copy_to", "copy_between", "can_access_peer", "enable_peer_access", "enqueue_peer_copy"]

_lock = threading.Lock()
_ACCESS: dict[tuple[int, int], bool] = {}  # (src ordinal, dst ordinal) -> peer access usable (enabled)


def _resolve(target: Any) -> Device:
    if isinstance(target, _Device):
        return target
    try:
        return _device(target)
    except ArgumentError as e:
        raise ArgumentError(
            f"`copy_to` takes a device (`az.device(1)`, `az.device(\"cpu\", 1)`), got {target!r}",
            help=e.help,
        ) from None


def copy_to(buf: Buffer, target: Any) -> Buffer:
    """A new C-contiguous Buffer on `target` with `buf`'s elements (see the module docstring)."""
    dst_dev = _resolve(target)
    src = buf if buf.is_contiguous else buf.copy()  # a strided view: gather it on its own device first
    src_dev = src.device
    if src_dev is dst_dev:
        return src.copy() if src is buf else src
    if _inflight._ACTIVE:  # lazy ops in flight that write the source come first
        order_launch(src_dev, (_inflight.use_of_buffer(src, False, "the source of `copy_to`"),))
    out = dst_dev._new(src.shape, src.scalar)
    if not src.nbytes:
        return out
    if src_dev.kind == "cuda" and dst_dev.kind == "cuda":
        _gpu_to_gpu(dst_dev, out.ptr, src_dev, src.ptr, src.nbytes)
    elif src_dev.kind in ("cpu", "debug") and dst_dev.kind in ("cpu", "debug"):
        ctypes.memmove(out.ptr, src.ptr, src.nbytes)
    elif src_dev.kind == "cpu":
        dst_dev._upload(out.ptr, np.asarray(src), src.nbytes)  # zero-copy view of the host memory
    else:
        out._write(src.to_host())
    return out


def copy_between(dst: Buffer, src: Buffer) -> bool:
    """`dst.copy_from(src)` for contiguous Buffers on two devices of one kind (checked by the
    caller: same shape and dtype, in-flight writes into `dst` refused); False for other kinds."""
    if not src.nbytes:
        return True
    if _inflight._ACTIVE:
        order_launch(src.device, (_inflight.use_of_buffer(src, False, "the source of `copy_from`"),))
    if src.device.kind == "cuda" and dst.device.kind == "cuda":
        _gpu_to_gpu(dst.device, dst.ptr, src.device, src.ptr, src.nbytes)
        return True
    if src.device.kind in ("cpu", "debug") and dst.device.kind in ("cpu", "debug"):
        ctypes.memmove(dst.ptr, src.ptr, src.nbytes)
        return True
    return False


# ---- GPU to GPU ---------------------------------------------------------------------------------


def can_access_peer(a: Device, b: Device) -> bool:
    """True when GPUs `a` and `b` can each access the other's memory (peer to peer)."""
    if a.kind != "cuda" or b.kind != "cuda" or a is b:
        return False
    try:
        return bool(a._cu.can_access_peer(b.index)) and bool(b._cu.can_access_peer(a.index))  # type: ignore[attr-defined]
    except Exception:  # pragma: no cover - an old cuda.core, or a driver that refuses the query
        driver = lazy.cuda_driver()

        ok1 = driver.cuDeviceCanAccessPeer(a.index, b.index)
        ok2 = driver.cuDeviceCanAccessPeer(b.index, a.index)
        return bool(ok1[0] == 0 and ok1[1] and ok2[0] == 0 and ok2[1])


def enable_peer_access(a: Device, b: Device) -> bool:
    """Enable peer access between GPUs `a` and `b`, both ways (once per pair); False when they cannot."""
    key = (min(a.index, b.index), max(a.index, b.index))
    hit = _ACCESS.get(key)
    if hit is not None:
        return hit
    with _lock:
        hit = _ACCESS.get(key)
        if hit is not None:
            return hit
        ok = can_access_peer(a, b)
        if ok:
            ok = _enable_one_way(a, b) and _enable_one_way(b, a)
        _ACCESS[key] = ok
        return ok


def _enable_one_way(owner: Device, peer: Device) -> bool:
    """Let `peer` access `owner`'s memory: context peer access, and access to `owner`'s memory pool."""
    driver = lazy.cuda_driver()

    ensure_current(peer)
    (err,) = driver.cuCtxEnablePeerAccess(owner._ctx, 0)  # type: ignore[attr-defined]
    if err not in (driver.CUresult.CUDA_SUCCESS, driver.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED):
        return False
    try:  # cuda.core: the pool anodize allocates from (`Device.allocate`)
        owner._cu.memory_resource.peer_accessible_by.add(peer.index)  # type: ignore[attr-defined]
        return True
    except Exception:
        pass
    err, pool = driver.cuDeviceGetMemPool(owner.index)
    if err != driver.CUresult.CUDA_SUCCESS:
        return False
    desc = driver.CUmemAccessDesc()
    desc.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    desc.location.id = peer.index
    desc.flags = driver.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    (err,) = driver.cuMemPoolSetAccess(pool, [desc], 1)
    return bool(err == driver.CUresult.CUDA_SUCCESS)


def enqueue_peer_copy(stream_cu: Any, dst_dev: Device, dst: int, src_dev: Device, src: int, nbytes: int) -> None:
    """Queue `nbytes` from `src` (on `src_dev`) to `dst` (on `dst_dev`) on a stream: `cuMemcpyPeerAsync`
    (direct when peer access is enabled, staged by the driver otherwise)."""
    driver = lazy.cuda_driver()

    if not nbytes:
        return
    enable_peer_access(src_dev, dst_dev)
    check_cu(
        driver.cuMemcpyPeerAsync(dst, dst_dev._ctx, src, src_dev._ctx, nbytes, stream_cu),  # type: ignore[attr-defined]
        "cuMemcpyPeerAsync",
    )


def _gpu_to_gpu(dst_dev: Device, dst: int, src_dev: Device, src: int, nbytes: int) -> None:
    src_lane = device_lane(src_dev)
    dst_lane = device_lane(dst_dev)
    if not enable_peer_access(src_dev, dst_dev):
        _staged(dst_dev, dst, src_dev, src, nbytes)
        return
    dst_lane.wait(src_lane.record())  # the source's pending writes come first
    ensure_current(dst_dev)
    enqueue_peer_copy(dst_lane.cu, dst_dev, dst, src_dev, src, nbytes)  # type: ignore[attr-defined]
    src_lane.wait(dst_lane.record())  # later work on the source's device waits for the copy


_STAGE_BYTES = 64 << 20


def _staged(dst_dev: Device, dst: int, src_dev: Device, src: int, nbytes: int) -> None:
    """Through pinned host memory, in chunks; returns when the copy is done."""
    stage = pinned_empty(src_dev, min(nbytes, _STAGE_BYTES), np.uint8)
    done = 0
    while done < nbytes:
        n = min(_STAGE_BYTES, nbytes - done)
        view = stage[:n]
        src_dev._download(view, src + done, n)  # on the source's stream, after its pending work
        dst_dev._upload(dst + done, view, n)  # (synchronous: the staging buffer is reused)
        done += n


FRONTS.copy_to, FRONTS.copy_between = copy_to, copy_between  # `Buffer.copy_to`, `Buffer.copy_from`
