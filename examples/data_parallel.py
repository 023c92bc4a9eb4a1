"""data_parallel: one kernel on every device over its shard of the data, then a sum across devices.

    python examples/data_parallel.py        # every GPU; NCCL through CuPy (`pip install anodize[nccl]`)

Each device holds one shard of the samples and histograms it into its own 256 bins
(the same kernel on every device; the launches are queued on each device's own stream,
so the devices run at the same time).  The per-device histograms are then summed:

* GPUs, with CuPy's NCCL binding (`cupy.cuda.nccl`): an in-place all-reduce of the
  bins, one NCCL communicator per GPU, queued on each device's anodize stream, so it
  follows the kernel there with no host wait; every GPU ends up holding the total.
* otherwise (one GPU, no CuPy/NCCL, or the CPU backend): each device's bins are copied
  to the host and summed there.  Without a GPU the example runs over two CPU stand-in
  devices (`az.device("cpu", 0)` and `az.device("cpu", 1)`), the same code path.

Why CuPy's binding rather than `torch.distributed`: it drives NCCL from one process over
raw device pointers and stream handles (`ncclCommInitAll` and group calls), which is
what anodize Buffers are, with no process group, launcher or rendezvous to set up, and
it is one wheel (`cupy-cuda12x`, with NCCL from `nvidia-nccl-cu12`).  It is imported
only when there are several GPUs.  The result is checked against NumPy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import anodize as az
from anodize import AtomicSlice, Slice, i32, kernel, launch_contract, thread, u32

BINS = 256


@launch_contract(domain=1, block=256, requires=lambda data, hist: len(hist) == 256)
@kernel
def shard_histogram(data: Slice[i32], hist: AtomicSlice[u32]) -> None:
    for i in thread.grid_stride(data):
        hist.add(data[i] & 255, 1)


def pick_devices(count: int | None = None) -> list[az.Device]:
    """Every GPU (or the first `count`); without a GPU, two CPU stand-in devices."""
    gpus = az.devices()
    if gpus:
        return gpus[:count] if count else gpus
    return [az.device("cpu", k) for k in range(count or 2)]


def shards(n: int, parts: int) -> list[tuple[int, int]]:
    """[lo, hi) of each device's shard: as equal as possible, in order."""
    edges = [n * k // parts for k in range(parts + 1)]
    return list(zip(edges[:-1], edges[1:]))


def nccl_allreduce(bufs: list[az.Buffer]) -> str | None:
    """Sum `bufs` (one per GPU, same shape and dtype) in place through NCCL; None when done,
    else the reason NCCL was not used (the caller reduces on the host)."""
    if len(bufs) < 2 or any(b.device.kind != "cuda" for b in bufs):
        return "fewer than two GPUs"
    try:
        from cupy.cuda import nccl  # the optional extra: pip install anodize[nccl]
    except Exception as e:  # noqa: BLE001 - CuPy missing, or built without NCCL
        return f"CuPy's NCCL binding is not available ({e!r})"
    types = {np.dtype(np.float32): nccl.NCCL_FLOAT32, np.dtype(np.float64): nccl.NCCL_FLOAT64,
             np.dtype(np.int32): nccl.NCCL_INT32, np.dtype(np.uint32): nccl.NCCL_UINT32,
             np.dtype(np.int64): nccl.NCCL_INT64, np.dtype(np.uint64): nccl.NCCL_UINT64}
    comms = _communicators(nccl, [b.device.index for b in bufs])
    nccl.groupStart()  # one thread drives every GPU: the calls form one group
    for comm, b in zip(comms, bufs):
        stream = b.device._stream_handle()  # after the kernel queued there; before any later read
        comm.allReduce(b.ptr, b.ptr, b.size, types[b.dtype], nccl.NCCL_SUM, stream)
    nccl.groupEnd()
    return None


_COMMS: dict[tuple[int, ...], Any] = {}


def _communicators(nccl: Any, ordinals: list[int]) -> Any:
    key = tuple(ordinals)
    if key not in _COMMS:  # ncclCommInitAll: one communicator per GPU, made once
        _COMMS[key] = nccl.NcclCommunicator.initAll(list(ordinals))
    return _COMMS[key]


def data_parallel_histogram(devs: list[az.Device], data_h: np.ndarray) -> tuple[np.ndarray, str]:
    """The histogram of `data_h`, computed over `devs`; returns (bins, how they were reduced)."""
    parts = [dev.to_device(data_h[lo:hi]) for dev, (lo, hi) in zip(devs, shards(len(data_h), len(devs)))]
    hists = [dev.zeros(BINS, az.u32) for dev in devs]
    cfg = az.LaunchConfig(grid=64, block=256)
    for x, h in zip(parts, hists):
        shard_histogram[cfg](x, h)  # each on its own device's stream: the devices overlap
    why_not = nccl_allreduce(hists)
    if why_not is None:
        totals = [h.to_host() for h in hists]  # every GPU holds the sum
        for t in totals[1:]:
            np.testing.assert_array_equal(t, totals[0])
        return totals[0], f"NCCL all-reduce over {len(devs)} GPUs"
    total = np.zeros(BINS, dtype=np.uint64)
    for h in hists:
        total += h.to_host()
    return total.astype(np.uint32), f"host sum ({why_not})"


def main(n: int = 1 << 20, devices: int | None = None) -> np.ndarray:
    devs = pick_devices(devices)
    data_h = np.random.default_rng(7).integers(0, 1 << 20, n, dtype=np.int32)
    res, how = data_parallel_histogram(devs, data_h)
    ref = np.bincount(data_h & 255, minlength=BINS).astype(np.uint32)
    np.testing.assert_array_equal(res, ref)
    sep = ", "
    names = sep.join(d.describe() for d in devs)
    print(f"data_parallel: n={n} over {len(devs)} devices ({names}); reduced by {how}; matches NumPy")
    return res


if __name__ == "__main__":
    main()
