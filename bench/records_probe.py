"""What the particle step's access pattern costs, and what would close its gap to the copy ceiling.

    python3 bench/records_probe.py [--log2n 24] [--reps 30] [--json PATH]

examples/particles.py's kernel reads each 32-byte record with two `ld.global.nc.v4.b32` and
writes it with two `st.global.v4.b32` (one record a thread): every warp instruction touches 32
sectors and uses half of each, where the 16-byte copy kernel of the ceiling touches 16 and uses
all.  This probe times, in one process over the same 2^log2n records, anodize's kernel and its
copy ceiling beside CUDA C++ kernels (CuPy RawKernel, NVRTC) that isolate each candidate:

  aos          the same loads/stores as anodize's PTX (checks that the probe reproduces it)
  aos_cs       + streaming stores (`st.global.cs`)
  aos_l2_256   + an L2 prefetch-size hint on the loads (`ld.global.nc.L2::256B.v4`)
  aos_bs2      two records a thread, block-strided (more loads in flight, same pattern)
  warp_t       loads and stores lane-contiguous (each warp instruction 512 whole bytes) and the
               records moved between lanes with 8 `shfl.sync` each way (a warp transpose)
  copy_rec     a record copy with anodize's pattern (the pattern alone, no arithmetic)
  copy16       a 16-byte copy kernel, one chunk a thread (the ceiling's copy kernel)
  copy16_bs2   two 16-byte chunks a thread, block-strided (lane-contiguous, 32 bytes a thread)

and anodize's own PTX of the particle step (`compile_gpu`) launched the same way, without and
with the warp's copy (`ANODIZE_RECORD_WARP`, codegen/llvm/record_warp.py).

Every particle result is checked against anodize's (bit-equal) and every copy against its input.
Rounds alternate the variants (so drift hits all alike); the figure is each one's best time,
GB/s counted in the record bytes read and written (2 x 32 bytes a record).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

SRC = r"""
__device__ __forceinline__ void step(float4 &a, float4 &b, float dt) {
    // a = pos[0..2], vel[0]; b = vel[1], vel[2], mass, bounces (examples/particles.py)
    float vy = __fadd_rn(b.x, __fmul_rn(dt, -9.81f));
    float y = __fadd_rn(a.y, __fmul_rn(dt, vy));
    bool hit = y < 0.0f;
    a.x = __fadd_rn(a.x, __fmul_rn(dt, a.w));
    a.y = hit ? -y : y;
    a.z = __fadd_rn(a.z, __fmul_rn(dt, b.y));
    b.x = hit ? __fmul_rn(vy, -0.5f) : vy;
    b.w = __int_as_float(__float_as_int(b.w) + (hit ? 1 : 0));
}
__device__ __forceinline__ float4 ld_l2(const float4* p) {
    float4 v;
    asm volatile("ld.global.nc.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ float4 shfl4(float4 v, int src) {
    return make_float4(__shfl_sync(0xffffffffu, v.x, src), __shfl_sync(0xffffffffu, v.y, src),
                       __shfl_sync(0xffffffffu, v.z, src), __shfl_sync(0xffffffffu, v.w, src));
}
extern "C" __global__ void aos(const float4* __restrict__ p, float4* __restrict__ o, float dt, long long n) {
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n) { float4 a = __ldg(p + 2 * i), b = __ldg(p + 2 * i + 1); step(a, b, dt); o[2 * i] = a; o[2 * i + 1] = b; }
}
extern "C" __global__ void aos_cs(const float4* __restrict__ p, float4* __restrict__ o, float dt, long long n) {
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n) { float4 a = __ldg(p + 2 * i), b = __ldg(p + 2 * i + 1); step(a, b, dt); __stcs(o + 2 * i, a); __stcs(o + 2 * i + 1, b); }
}
extern "C" __global__ void aos_l2_256(const float4* __restrict__ p, float4* __restrict__ o, float dt, long long n) {
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n) { float4 a = ld_l2(p + 2 * i), b = ld_l2(p + 2 * i + 1); step(a, b, dt); o[2 * i] = a; o[2 * i + 1] = b; }
}
extern "C" __global__ void aos_bs2(const float4* __restrict__ p, float4* __restrict__ o, float dt, long long n) {
    long long i = blockIdx.x * 512ll + threadIdx.x, j = i + 256;
    float4 a, b, c, d;
    if (i < n) { a = __ldg(p + 2 * i); b = __ldg(p + 2 * i + 1); }
    if (j < n) { c = __ldg(p + 2 * j); d = __ldg(p + 2 * j + 1); }
    if (i < n) { step(a, b, dt); o[2 * i] = a; o[2 * i + 1] = b; }
    if (j < n) { step(c, d, dt); o[2 * j] = c; o[2 * j + 1] = d; }
}
extern "C" __global__ void warp_t(const float4* __restrict__ p, float4* __restrict__ o, float dt, long long n) {
    long long i = blockIdx.x * 256ll + threadIdx.x;
    int l = threadIdx.x & 31;
    long long wb = i - l;  // the warp's first record
    if (wb + 32 <= n) {  // warp-uniform: every lane's record exists
        const float4* q = p + 2 * wb;
        float4 c0 = __ldg(q + l), c1 = __ldg(q + 32 + l);  // chunks l and 32 + l of the warp's 64
        bool odd = l & 1, hi = l >= 16;
        int m = hi ? l - 16 : l;
        float4 g0 = shfl4(odd ? c1 : c0, hi ? 2 * m + 1 : 2 * m);
        float4 g1 = shfl4(odd ? c0 : c1, hi ? 2 * m : 2 * m + 1);
        float4 a = hi ? g1 : g0, b = hi ? g0 : g1;  // the lane's record, halves 0 and 1
        step(a, b, dt);
        float4 h0 = shfl4(hi ? b : a, odd ? 16 + l / 2 : l / 2);
        float4 h1 = shfl4(hi ? a : b, odd ? l / 2 : 16 + l / 2);
        float4* r = o + 2 * wb;
        r[l] = odd ? h1 : h0;
        r[32 + l] = odd ? h0 : h1;
    } else if (i < n) {
        float4 a = __ldg(p + 2 * i), b = __ldg(p + 2 * i + 1); step(a, b, dt); o[2 * i] = a; o[2 * i + 1] = b;
    }
}
extern "C" __global__ void copy_rec(const float4* __restrict__ p, float4* __restrict__ o, float dt, long long n) {
    long long i = blockIdx.x * 256ll + threadIdx.x;
    if (i < n) { float4 a = __ldg(p + 2 * i), b = __ldg(p + 2 * i + 1); o[2 * i] = a; o[2 * i + 1] = b; }
}
extern "C" __global__ void copy16(const float4* __restrict__ p, float4* __restrict__ o, float dt, long long n) {
    long long c = blockIdx.x * 256ll + threadIdx.x;  // n records = 2n chunks
    if (c < 2 * n) o[c] = __ldg(p + c);
}
extern "C" __global__ void copy16_bs2(const float4* __restrict__ p, float4* __restrict__ o, float dt, long long n) {
    long long c = blockIdx.x * 512ll + threadIdx.x, d = c + 256;
    float4 x, y;
    if (c < 2 * n) x = __ldg(p + c);
    if (d < 2 * n) y = __ldg(p + d);
    if (c < 2 * n) o[c] = x;
    if (d < 2 * n) o[d] = y;
}
"""

# name -> (records a block covers, is a particle step)
VARIANTS = {
    "aos": (256, True), "aos_cs": (256, True), "aos_l2_256": (256, True), "aos_bs2": (512, True),
    "warp_t": (256, True), "copy_rec": (256, False), "copy16": (128, False), "copy16_bs2": (256, False),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--log2n", type=int, default=24)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import cupy as cp

    import anodize as az
    from kernels import copy_gs
    from particles import Particle, particle_step
    from records_bench import _particles
    from suite import time_events

    n = 1 << args.log2n
    dev = az.device(0)
    h = _particles(n)
    h["vel"][::7, 1] = -50.0  # some records bounce
    a, b = dev.to_device(h), dev.empty(n, Particle)
    dt = np.float32(0.05)
    cfg = az.LaunchConfig.for_num_elems(n, block=256)
    particle_step[cfg](a, dt, b)
    want = b.view(az.u8).to_host()
    src_bytes = h.view(np.uint8).reshape(-1)
    words = a.nbytes // 4
    fa, fc = a.view(az.f32).view(words), b.view(az.f32).view(words)
    gcfg = az.LaunchConfig.for_num_elems(-(-words // 4), block=256)
    cp_in = cp.asarray(src_bytes).view(cp.float32)
    cp_out = cp.empty_like(cp_in)
    mod = cp.RawModule(code=SRC, options=("-std=c++17",))
    fns = {k: mod.get_function(k) for k in VARIANTS}
    # anodize's own PTX of the particle step, without and with the warp's copy
    # (codegen/llvm/record_warp.py), launched the same way as the CUDA variants
    import os
    import tempfile

    from anodize.codegen.driver import compile_gpu

    fault = cp.zeros(1 << 12, cp.uint8)
    tmp = Path(tempfile.mkdtemp())
    for tag, on in (("anodize ptx", "0"), ("anodize ptx, warp copy", "1")):
        os.environ["ANODIZE_RECORD_WARP"] = on
        (tmp / f"{on}.ptx").write_text(compile_gpu(particle_step, arch=getattr(dev, "arch", "sm_90"), ptxas=False).ptx)
        fns[tag] = cp.RawModule(path=str(tmp / f"{on}.ptx")).get_function("particle_step")
    os.environ.pop("ANODIZE_RECORD_WARP")
    nbytes = 2 * n * Particle.dtype.itemsize

    def launcher(name: str):  # type: ignore[no-untyped-def]
        per_block, _ = VARIANTS[name]
        grid = (-(-n // per_block),)
        return lambda: fns[name](grid, (256,), (cp_in, cp_out, dt, np.int64(n)))

    runs = {
        "anodize particle_step": (lambda: particle_step[cfg](a, dt, b), "anodize"),
        "anodize copy_gs (ceiling kernel)": (lambda: copy_gs[gcfg](fa, fc), "anodize"),
        "memcpy (ceiling)": (lambda: b.copy_from(a), "anodize"),
        "cupy copyto": (lambda: cp.copyto(cp_out, cp_in), "cupy"),
        **{name: (launcher(name), "cupy") for name in VARIANTS},
        **{tag: ((lambda f=fns[tag]: f((-(-n // 256),), (256,), (cp_in, np.uint64(n), dt, cp_out, np.uint64(n), fault, np.int32(1)))), "cupy")
           for tag in ("anodize ptx", "anodize ptx, warp copy")},
    }
    # correctness first: each kernel once, checked
    for name, (fn, backend) in runs.items():
        cp_out.fill(0)
        b.view(az.u8).fill(0)
        fn()
        dev.synchronize()
        cp.cuda.get_current_stream().synchronize()
        got = b.view(az.u8).to_host() if backend == "anodize" else cp.asnumpy(cp_out.view(cp.uint8))
        step = name in VARIANTS and VARIANTS[name][1] or name.startswith("anodize p")
        if not np.array_equal(got, want if step else src_bytes):
            raise AssertionError(f"{name}: wrong result")
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.rounds):
        for name, (fn, backend) in runs.items():
            times[name] += time_events(fn, args.reps, backend, dev.stream if backend == "anodize" else None)
    ceiling = max(nbytes / min(times[k]) / 1e6 for k in ("anodize copy_gs (ceiling kernel)", "memcpy (ceiling)"))
    res = {"device": dev.describe(), "n": n, "ceiling_gbs": ceiling,
           "rows": {k: {"best_ms": min(v), "gbs": nbytes / min(v) / 1e6, "of_ceiling": nbytes / min(v) / 1e6 / ceiling}
                    for k, v in times.items()}}
    print(f"{dev.describe()}: 2^{args.log2n} records of 32 bytes, {nbytes / 1e9:.3f} GB moved; "
          f"ceiling (faster of copy_gs, memcpy) {ceiling:,.0f} GB/s")
    print("| kernel | best ms | GB/s | of ceiling |\n|---|---|---|---|")
    for k, r in res["rows"].items():  # type: ignore[union-attr]
        print(f"| {k} | {r['best_ms']:.4f} | {r['gbs']:,.0f} | {100 * r['of_ceiling']:.1f}% |")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
