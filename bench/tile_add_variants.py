"""The add 2^28 f32 at the copy ceiling: shapes of a hand-written CUDA C add (CuPy RawModule:
128-512 threads, 1, 2 or 4 float4 a thread, streaming loads/stores, persistent grid-stride
loops over 4-16 blocks an SM) beside `torch.add` (twice: the second slot is the noise control)
and examples/tile_add.py, interleaved rounds of batched event timing (10 calls between two
events; the order reversed every other round).

    python3 bench/tile_add_variants.py      # on the GPU machine; ROUNDS=25 by default

Results: bench/RESULTS.md (session 7).
"""
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
import torch, cupy as cp
import anodize as az
import tile_add

SRC = r"""
__device__ __forceinline__ float4 add4(float4 x, float4 y) { return make_float4(x.x+y.x, x.y+y.y, x.z+y.z, x.w+y.w); }
extern "C" __global__ void one(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) c[i] = add4(a[i], b[i]);
}
extern "C" __global__ void one_cs(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) {
  long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
  if (i < n4) __stcs(c + i, add4(__ldcs(a + i), __ldcs(b + i)));
}
template <int U> __device__ void multi(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) {
  long base = blockIdx.x * (long)blockDim.x * U + threadIdx.x;
  float4 x[U], y[U];
  #pragma unroll
  for (int u = 0; u < U; u++) { long i = base + u * (long)blockDim.x; if (i < n4) { x[u] = a[i]; y[u] = b[i]; } }
  #pragma unroll
  for (int u = 0; u < U; u++) { long i = base + u * (long)blockDim.x; if (i < n4) c[i] = add4(x[u], y[u]); }
}
extern "C" __global__ void two(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) { multi<2>(a, b, c, n4); }
extern "C" __global__ void four(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) { multi<4>(a, b, c, n4); }
template <int U> __device__ void gs(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) {
  long stride = (long)gridDim.x * blockDim.x;
  for (long base = blockIdx.x * (long)blockDim.x + threadIdx.x; base < n4; base += stride * U) {
    float4 x[U], y[U];
    #pragma unroll
    for (int u = 0; u < U; u++) { long i = base + u * stride; if (i < n4) { x[u] = a[i]; y[u] = b[i]; } }
    #pragma unroll
    for (int u = 0; u < U; u++) { long i = base + u * stride; if (i < n4) c[i] = add4(x[u], y[u]); }
  }
}
extern "C" __global__ void gs1(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) { gs<1>(a, b, c, n4); }
extern "C" __global__ void gs2(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) { gs<2>(a, b, c, n4); }
extern "C" __global__ void gs4(const float4* __restrict__ a, const float4* __restrict__ b, float4* __restrict__ c, long n4) { gs<4>(a, b, c, n4); }
"""


def main() -> None:
    n = 1 << 28
    n4 = n // 4
    dev = az.device(0)
    a = torch.rand(n, device="cuda"); b = torch.rand(n, device="cuda")
    cs = {k: torch.empty_like(a) for k in range(16)}
    ref = a + b
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    A, B = cp.asarray(a), cp.asarray(b)
    runs = {}
    def cu(name, fn, grid, block, k):
        f = mod.get_function(fn); C = cp.asarray(cs[k])
        runs[name] = (lambda: f((grid,), (block,), (A, B, C, cp.int64(n4))), "cupy", k)
    cu("one128", "one", n4 // 128, 128, 0)
    cu("one256", "one", n4 // 256, 256, 1)
    cu("one512", "one", n4 // 512, 512, 2)
    cu("one256cs", "one_cs", n4 // 256, 256, 3)
    cu("two128", "two", n4 // 256, 128, 4)
    cu("two256", "two", n4 // 512, 256, 5)
    cu("four128", "four", n4 // 512, 128, 6)
    for k, (fn, mul) in enumerate([("gs1", 8), ("gs2", 8), ("gs4", 8), ("gs2", 4), ("gs2", 16)]):
        cu(f"{fn}x{mul}", fn, sms * mul, 256, 7 + k)
    launch = tile_add.add[az.LaunchConfig.for_tiles((n,), (tile_add.BLOCK,))]
    c_az = cs[12]
    runs["anodize"] = (lambda: launch(a, b, c_az), "anodize", 12)
    c_t1, c_t2 = cs[13], cs[14]
    runs["torch"] = (lambda: torch.add(a, b, out=c_t1), "torch", 13)
    runs["torch2"] = (lambda: torch.add(a, b, out=c_t2), "torch", 14)
    for name, (fn, be, k) in runs.items():
        cs[k].fill_(-1.0); torch.cuda.synchronize()
        fn(); torch.cuda.synchronize(); dev.synchronize()
        assert torch.equal(cs[k], ref), name
    from cuda.core import EventOptions
    opts = EventOptions(timing_enabled=True)
    def timed(fn, be, per=10):
        if be == "anodize":
            e0 = dev.stream.record(options=opts)
            for _ in range(per): fn()
            e1 = dev.stream.record(options=opts); e1.sync(); return (e1 - e0) / per
        if be == "torch":
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(per): fn()
            e1.record(); e1.synchronize(); return e0.elapsed_time(e1) / per
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        for _ in range(per): fn()
        e1.record(); e1.synchronize(); return cp.cuda.get_elapsed_time(e0, e1) / per
    res = {k: [] for k in runs}
    for name, (fn, be, k) in runs.items():
        timed(fn, be, 3)
    rounds = int(os.environ.get("ROUNDS", "25"))
    for r in range(rounds):
        order = list(runs.items())
        if r % 2: order.reverse()
        for name, (fn, be, k) in order:
            res[name].append(timed(fn, be))
    tm = statistics.median(res["torch"])
    for name, xs in sorted(res.items(), key=lambda kv: statistics.median(kv[1])):
        m = statistics.median(xs)
        print(f"{name:10s} median {m:.4f} ms  min {min(xs):.4f}  max {max(xs):.4f}  vs torch {tm / m:.4f}  GB/s {12 * n / m / 1e6:.0f}")


if __name__ == "__main__":
    main()
