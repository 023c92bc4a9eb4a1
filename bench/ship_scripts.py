"""The fresh-process scripts of bench/ship_bench.py's first-result mode: the built package's and
CuPy's first result, each traced (a timeline of stages and of the runtime's first-GPU calls by
thread), and the driver floor (the same cubin through cuda.bindings' driver calls alone).
Each runs as `python -c` after `import time; T0 = time.perf_counter()`; the traced ones print
`TRACE <json events>`, every one its seconds from T0 as its last line."""

from __future__ import annotations

CUDA_VECADD = r"""
extern "C" __global__ void vecadd(const float* a, const float* b, float* c, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""

ANODIZE_FIRST = """
import time, sys
t0 = time.perf_counter()
import vecadd_kernels as K
t_import = time.perf_counter() - t0
import numpy as np, anodize as az
n = 1 << 20
dev = az.device(0)
x = np.ones(n, np.float32)
a, b, c = dev.to_device(x), dev.to_device(x), dev.empty(n, az.f32)
K.vecadd[az.LaunchConfig.for_num_elems(n, block=256)](a, b, c)
assert c.to_host()[n - 1] == 2.0
print(f"{time.perf_counter() - T0:.4f} {t_import * 1e3:.2f}")
"""

CUPY_FIRST = """
import time
import numpy as np, cupy as cp
src = {src!r}
k = cp.RawKernel(src, "vecadd")
n = 1 << 20
a = cp.asarray(np.ones(n, np.float32)); b = cp.asarray(np.ones(n, np.float32)); c = cp.empty(n, cp.float32)
k(((n + 255) // 256,), (256,), (a, b, c, cp.int64(n)))
assert float(c[n - 1].get()) == 2.0
print(f"{{time.perf_counter() - T0:.4f}} 0")
"""

# the timeline both traced scripts keep: EV holds (what, thread, start, end) from the script's T0
_TRACE_HEAD = """
import json, threading, time
EV = []


def _ev(what, t0, t1):
    EV.append((what, threading.current_thread().name, t0 - T0, t1 - T0))


class step:
    def __init__(self, what):
        self.what = what

    def __enter__(self):
        self.t = time.perf_counter()

    def __exit__(self, *exc):
        _ev(self.what, self.t, time.perf_counter())
"""

# what the first-result timeline times, by (module, attribute path, label, wraps CudaDevice's
# methods once its module is loaded): tests/runtime/test_ship_bench_names.py resolves every one
TRACE_WRAPS = (
    ("anodize.runtime.probe", "_probe", "cuInit + cuDeviceGetCount (probe)", False),
    ("anodize.runtime.device", "_retain_primary_context", "primary context (cuDevicePrimaryCtxRetain)", False),
    ("anodize.runtime.lazy", "cuda_device", "import cuda.core + runtime.cuda_device", True),
    ("anodize.runtime.faults", "FaultArena.__init__", "FaultArena.__init__", False),
    ("anodize.built", "_prebuilt", "import runtime.prebuilt (first use)", False),
    ("anodize.built", "BuiltKernel.compile", "BuiltKernel.compile (manifest -> CompiledKernel)", False),
    ("anodize.built", "BuiltKernel.load_prebuilt", "BuiltKernel.load_prebuilt (load on the device)", False),
)
CUDA_DEVICE_WRAPS = ("__init__", "load", "_alloc", "_upload", "_download", "launch_call")  # runtime/cuda_device.py

FIRST_TRACE = _TRACE_HEAD + f"""
import importlib
TRACE_WRAPS = {TRACE_WRAPS!r}
CUDA_DEVICE_WRAPS = {CUDA_DEVICE_WRAPS!r}
""" + """

def wrap(owner, name, label=None, then=None, calls=3):
    fn = getattr(owner, name)
    seen = [0]

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            got = fn(*a, **k)
        finally:
            seen[0] += 1
            if seen[0] <= calls:  # (the first few calls: the first-use costs)
                _ev(label or name, t, time.perf_counter())
        if then is not None:
            then(got)
        return got

    setattr(owner, name, timed)


with step("import the built package (loader)"):
    import vecadd_kernels as K
with step("import numpy"):
    import numpy as np
with step("import anodize (rest)"):
    import anodize as az


def _resolve(module, path):
    owner = importlib.import_module(module)
    for part in path.split(".")[:-1]:
        owner = getattr(owner, part)
    return owner, path.split(".")[-1]


def _cuda_device_loaded(mod):
    cls = mod.CudaDevice
    if getattr(cls, "_traced", False):
        return
    cls._traced = True
    for name in CUDA_DEVICE_WRAPS:
        wrap(cls, name, f"CudaDevice.{name}")


for module, path, label, then in TRACE_WRAPS:
    wrap(*_resolve(module, path), label, then=_cuda_device_loaded if then else None)
n = 1 << 20
with step("az.device(0)"):
    dev = az.device(0)
with step("buffers (to_device x2, empty)"):
    x = np.ones(n, np.float32)
    a, b, c = dev.to_device(x), dev.to_device(x), dev.empty(n, az.f32)
with step("config + K.vecadd[cfg]"):
    launch = K.vecadd[az.LaunchConfig.for_num_elems(n, block=256)]
with step("first launch (plan, module load, launch)"):
    launch(a, b, c)
with step("sync + copy back + check"):
    assert c.to_host()[n - 1] == 2.0
_ev("total (script)", T0, time.perf_counter())
print("TRACE " + json.dumps(EV))
print(f"{time.perf_counter() - T0:.4f} 0")
"""

CUPY_TRACE = _TRACE_HEAD + """

with step("import numpy"):
    import numpy as np
with step("import cupy"):
    import cupy as cp
src = {src!r}
with step("cp.RawKernel(src)"):
    k = cp.RawKernel(src, "vecadd")
n = 1 << 20
with step("first asarray (CUDA init, context, pool)"):
    a = cp.asarray(np.ones(n, np.float32))
with step("asarray, empty"):
    b = cp.asarray(np.ones(n, np.float32)); c = cp.empty(n, cp.float32)
with step("first launch (cache lookup, module load, launch)"):
    k(((n + 255) // 256,), (256,), (a, b, c, cp.int64(n)))
with step("sync + copy back + check"):
    assert float(c[n - 1].get()) == 2.0
EV.append(("total (script)", "MainThread", 0.0, time.perf_counter() - T0))
print("TRACE " + json.dumps(EV))
print(f"{{time.perf_counter() - T0:.4f}} 0")
"""


# the floor under both: the same cubin through cuda.bindings' driver calls alone (no cuda.core, no
# anodize): FLOOR_EARLY=1 starts cuInit and the primary context on a thread before NumPy's import;
# FLOOR_LOAD=module|library picks cuModuleLoadData or cuLibraryLoadData
DRIVER_FLOOR = _TRACE_HEAD + """
import ctypes, os
EARLY = os.environ.get("FLOOR_EARLY") == "1"
LOADER = os.environ.get("FLOOR_LOAD", "module")
with step("import cuda.bindings.driver"):
    from cuda.bindings import driver as d


def ok(r, what):
    if int(r[0]) != 0:
        raise SystemExit(f"{what}: {r[0]}")
    return r[1] if len(r) > 1 else None


def start():
    t = time.perf_counter()
    ok(d.cuInit(0), "cuInit")
    t1 = time.perf_counter()
    _ev("cuInit", t, t1)
    dev = ok(d.cuDeviceGet(0), "cuDeviceGet")
    ctx = ok(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    _ev("cuDevicePrimaryCtxRetain", t1, time.perf_counter())
    return ctx


if EARLY:
    import threading
    got = []
    th = threading.Thread(target=lambda: got.append(start()), name="early")
    th.start()
with step("import numpy"):
    import numpy as np
if EARLY:
    with step("join the early thread"):
        th.join()
    ctx = got[0]
else:
    ctx = start()
with step("cuCtxSetCurrent"):
    ok(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
n = 1 << 20
nb = 4 * n
with step("cuMemAlloc x4, memset"):
    pa, pb, pc, pf = (int(ok(d.cuMemAlloc(s), "cuMemAlloc")) for s in (nb, nb, nb, 64))
    ok(d.cuMemsetD8(pf, 0, 64), "cuMemsetD8")
with step("cuMemcpyHtoD x2"):
    x = np.ones(n, np.float32)
    ok(d.cuMemcpyHtoD(pa, x.ctypes.data, nb), "cuMemcpyHtoD")
    ok(d.cuMemcpyHtoD(pb, x.ctypes.data, nb), "cuMemcpyHtoD")
with step("read the cubin"):
    with open(CUBIN, "rb") as f:
        cubin = f.read()
with step("load (" + LOADER + ")"):
    if LOADER == "library":
        lib = ok(d.cuLibraryLoadData(cubin, None, None, 0, None, None, 0), "cuLibraryLoadData")
        fn = ok(d.cuKernelGetFunction(ok(d.cuLibraryGetKernel(lib, b"vecadd"), "cuLibraryGetKernel")), "cuKernelGetFunction")
    else:
        mod = ok(d.cuModuleLoadData(cubin), "cuModuleLoadData")
        fn = ok(d.cuModuleGetFunction(mod, b"vecadd"), "cuModuleGetFunction")
with step("cuLaunchKernel"):
    U = ctypes.c_uint64
    vals = [U(pa), U(n), U(pb), U(n), U(pc), U(n), U(pf), ctypes.c_uint32(1), U(n)]
    ptrs = (ctypes.c_void_p * len(vals))(*(ctypes.addressof(v) for v in vals))
    ok(d.cuLaunchKernel(fn, n // 1024, 1, 1, 256, 1, 1, 0, 0, ctypes.addressof(ptrs), 0), "cuLaunchKernel")  # (`extra` is a void_ptr: 0, not None)
with step("cuMemcpyDtoH + check"):
    out = np.empty(n, np.float32)
    ok(d.cuMemcpyDtoH(out.ctypes.data, pc, nb), "cuMemcpyDtoH")
    assert out[n - 1] == 2.0, out[n - 1]
_ev("total (script)", T0, time.perf_counter())
print("TRACE " + json.dumps(EV))
print(f"{time.perf_counter() - T0:.4f} 0")
"""
