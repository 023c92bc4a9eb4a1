"""Each cooperative launch's own grid-barrier counter.

A GPU kernel calling `az.grid.sync()` takes the address of a 4-byte counter as its last hidden
argument (`CompiledKernel.grid_counter`, codegen/artifact.py).  Every launch gets a counter of
its own, from the driver's stream-ordered allocator, on the stream the launch goes to:

    cuMemAllocAsync(4, stream); cuMemsetD32Async(counter, 0, 1, stream); launch; cuMemFreeAsync(counter, stream)

The memset runs after everything queued before it on that stream and before the launch; the
free is ordered after the launch, and the driver's memory pool hands the four bytes out again
only once that free has happened in stream order (or to later work of the same stream).  Two
launches in flight at once, on two streams, therefore never share a counter, and a counter's
next user finds it zeroed whatever the last one left there.  Under stream capture the three
calls become graph nodes (an allocation, a memset, a free) around the kernel node, so every
replay of the graph gets a fresh counter as well.

The CPU backend and the debug device need none of this: their grid barrier lives in the host
threads of one launch (codegen/cpu/threads.py, codegen/debug/run.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anodize.runtime import lazy
from anodize.runtime.lazy import check_cu

__all__ = ["with_grid_counter", "counted_call"]

COUNTER_BYTES = 4


def with_grid_counter(stream_cu: Any, launch: Callable[[int], None]) -> None:
    """Run `launch(counter)` with a zeroed counter of its own, allocated and freed on `stream_cu`
    (a `CUstream`) around it."""
    driver = lazy.cuda_driver()
    ptr = check_cu(driver.cuMemAllocAsync(COUNTER_BYTES, stream_cu), "cuMemAllocAsync")
    try:
        check_cu(driver.cuMemsetD32Async(ptr, 0, 1, stream_cu), "cuMemsetD32Async")
        launch(int(ptr))
    finally:
        check_cu(driver.cuMemFreeAsync(ptr, stream_cu), "cuMemFreeAsync")


def counted_call(call: Callable[..., None], stream_cu: Any) -> Callable[..., None]:
    """`call(*packed)` of the launch fast path (runtime/launch_fast.py), each call given its own
    counter as the last argument: `call(*packed, counter)` on the device's stream `stream_cu`."""

    def launch_counted(*packed: Any) -> None:
        with_grid_counter(stream_cu, lambda counter: call(*packed, counter))

    return launch_counted
