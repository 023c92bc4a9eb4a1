"""Each example kernel on the GPU beside the library call that does the same work, in one run.

The examples are the safe-tier versions (no `unsafe`); where an unsafe version is kept
(reduce_sum_unsafe, softmax_unsafe) it is timed on the row below, beside the same peer.

    python3 bench/examples_bench.py [--reps 20] [--only sgemm,softmax] [--write bench/RESULTS.md]

Every row checks the result against the peer before timing.  Times are the median
(min-max) of event-timed runs after a warm-up.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

from suite import fmt, time_events  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--write", default="")
    ap.add_argument("--only", default="", help="comma-separated examples to run (saxpy,stencil2d,transpose,reduce_sum,histogram,sgemm,softmax,scan); all by default")
    args = ap.parse_args()
    only = {x.strip() for x in args.only.split(",") if x.strip()}

    def want(name: str) -> bool:
        return not only or name in only
    import cupy as cp
    import torch

    import anodize as az
    from histogram import histogram
    from reduce_sum import reduce_sum
    from reduce_sum_unsafe import reduce_sum as reduce_sum_unsafe
    from saxpy import saxpy
    from scan import add_offsets, block_scan
    from sgemm import config as sgemm_config, sgemm
    from sgemm_slots import sgemm as sgemm_slots
    from softmax import config as softmax_config, per_thread as softmax_per, softmax
    from softmax_unsafe import softmax as softmax_unsafe
    from stencil2d import stencil2d
    from transpose import transpose

    dev = az.device(0)
    rng = np.random.default_rng(0)
    rows: list[str] = []

    def add(name: str, size: str, ours: list[float], peer_name: str, peer: list[float]) -> None:
        r = statistics.median(peer) / statistics.median(ours)
        rows.append(f"| {name} | {size} | {fmt(ours)} | {peer_name} | {fmt(peer)} | {r:.2f}x |")

    def ours(fn):  # noqa: ANN001, ANN202
        return time_events(fn, args.reps, "anodize", dev.stream)

    def cupy_t(fn):  # noqa: ANN001, ANN202
        return time_events(fn, args.reps, "cupy")

    def torch_t(fn):  # noqa: ANN001, ANN202
        return time_events(fn, args.reps, "torch")

    # saxpy
    if want("saxpy"):
        n = 1 << 26
        x_h, y_h = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        x, y, o = dev.to_device(x_h), dev.to_device(y_h), dev.empty(n, az.f32)
        cfg = az.LaunchConfig.for_num_elems(n, block=256)
        t_ours = ours(lambda: saxpy[cfg](2.5, x, y, o))
        tx, ty = torch.from_numpy(x_h).cuda(), torch.from_numpy(y_h).cuda()
        to = torch.empty_like(tx)
        t_peer = torch_t(lambda: torch.add(ty, tx, alpha=2.5, out=to))
        np.testing.assert_allclose(o.to_host(), to.cpu().numpy(), rtol=1e-6)
        add("saxpy", "2^26 f32", t_ours, "torch.add(alpha=)", t_peer)

    # stencil2d
    if want("stencil2d"):
        side = 8192
        u_h = rng.random((side, side), dtype=np.float32)
        u, uo = dev.to_device(u_h), dev.empty((side, side), az.f32)
        cfg2 = az.LaunchConfig.for_shape((side, side), block=(32, 8))
        t_ours = ours(lambda: stencil2d[cfg2](u, uo))
        import peers

        cu, cuo = cp.asarray(u_h), cp.empty((side, side), cp.float32)
        st = cp.RawModule(code=peers.STENCIL_CU).get_function("stencil")
        g = ((side + 31) // 32, (side + 7) // 8)
        t_peer = cupy_t(lambda: st(g, (32, 8), (cu, cuo, cp.int64(side), cp.int64(side))))
        np.testing.assert_allclose(uo.to_host(), cp.asnumpy(cuo), rtol=1e-5)
        add("stencil2d", f"{side}x{side} f32", t_ours, "CuPy RawKernel (C++)", t_peer)
        del cu, cuo

    # transpose
    if want("transpose"):
        side = 8192
        m_h = rng.random((side, side), dtype=np.float32)
        m, mt = dev.to_device(m_h), dev.empty((side, side), az.f32)
        cfg2 = az.LaunchConfig.for_shape((side, side), block=(32, 32))
        t_ours = ours(lambda: transpose[cfg2](m, mt))
        cm = cp.asarray(m_h)
        cmt = cp.empty_like(cm)
        t_peer = cupy_t(lambda: cp.copyto(cmt, cm.T))
        np.testing.assert_array_equal(mt.to_host(), cp.asnumpy(cmt))
        add("transpose", f"{side}x{side} f32", t_ours, "CuPy copyto(a.T)", t_peer)
        del cm, cmt

    # reduce_sum: the safe tier (one launch: grid-stride, block.reduce, one atomic per block),
    # the unsafe hand-written form beside it
    if want("reduce_sum"):
        n = 1 << 26
        r_h = rng.random(n, dtype=np.float32)
        r, tot = dev.to_device(r_h), dev.zeros(1, az.f32)
        launch_r = reduce_sum[az.LaunchConfig(grid=132 * 4, block=512)]
        t_ours = ours(lambda: launch_r(r, tot))
        cr = cp.asarray(r_h)
        t_peer = cupy_t(lambda: cp.sum(cr))
        add("reduce_sum", "2^26 f32", t_ours, "cp.sum", t_peer)
        expect = float(cp.sum(cr.astype(cp.float64)))
        tot2 = dev.zeros(1, az.f32)
        launch_r(r, tot2)
        assert abs(float(tot2.to_host()[0]) - expect) < 1e-4 * expect
        launch_u = reduce_sum_unsafe[az.LaunchConfig(grid=132 * 8, block=256)]
        tot3 = dev.zeros(1, az.f32)
        launch_u(r, tot3)
        assert abs(float(tot3.to_host()[0]) - expect) < 1e-4 * expect
        t_ours = ours(lambda: launch_u(r, tot))
        add("reduce_sum_unsafe (beside)", "2^26 f32", t_ours, "cp.sum", t_peer)
        del cr

    # histogram: uniform over [0, 256), 256 bins (block-private bins in shared memory)
    if want("histogram"):
        n = 1 << 26
        d_h = rng.integers(0, 256, n, dtype=np.int32)
        d, h = dev.to_device(d_h), dev.zeros(256, az.u32)
        cfg = az.LaunchConfig(grid=132 * 8, block=256)
        t_ours = ours(lambda: histogram[cfg](d, h))
        cd = cp.asarray(d_h)
        t_peer = cupy_t(lambda: cp.bincount(cd, minlength=256))
        h2 = dev.zeros(256, az.u32)
        histogram[cfg](d, h2)
        np.testing.assert_array_equal(h2.to_host(), cp.asnumpy(cp.bincount(cd, minlength=256)).astype(np.uint32))
        add("histogram", "2^26 i32 in [0, 256), 256 bins", t_ours, "cp.bincount", t_peer)
        del cd

    # sgemm
    if want("sgemm"):
        s = 4096  # the issue-16 target size
        a_h, b_h = rng.standard_normal((s, s), dtype=np.float32), rng.standard_normal((s, s), dtype=np.float32)
        a, b, c = dev.to_device(a_h), dev.to_device(b_h), dev.empty((s, s), az.f32)
        cfg2 = sgemm_config(s, s)
        t_ours = ours(lambda: sgemm[cfg2](a, b, c))
        ca, cb = cp.asarray(a_h), cp.asarray(b_h)
        t_peer = cupy_t(lambda: cp.matmul(ca, cb))
        ref = cp.asnumpy(cp.matmul(ca.astype(cp.float64), cb.astype(cp.float64)))
        err = np.linalg.norm(c.to_host() - ref) / np.linalg.norm(ref)
        assert err < 1e-5, err
        add("sgemm", f"{s}^3 f32", t_ours, "cp.matmul (cuBLAS)", t_peer)
        # the same kernel staged by multi-slot ownership (examples/sgemm_slots.py), on the same inputs
        c.fill(0)
        t_slots = ours(lambda: sgemm_slots[cfg2](a, b, c))
        err = np.linalg.norm(c.to_host() - ref) / np.linalg.norm(ref)
        assert err < 1e-5, err
        add("sgemm_slots", f"{s}^3 f32", t_slots, "cp.matmul (cuBLAS)", t_peer)
        del ca, cb

    # softmax: the safe tier (one block per row through a per-thread tile, the row in
    # registers, block collectives), the unsafe one-block-per-row form beside it
    if want("softmax"):
        rws, cls = 4096, 4096
        s_h = rng.standard_normal((rws, cls), dtype=np.float32)
        sx, so = dev.to_device(s_h), dev.empty((rws, cls), az.f32)
        cfg = softmax_config(rws)
        per = softmax_per(cls)
        softmax[cfg](sx, so, per)
        t_ours = ours(lambda: softmax[cfg](sx, so, per))
        ts = torch.from_numpy(s_h).cuda()
        t_peer = torch_t(lambda: torch.softmax(ts, dim=1))
        ref_s = torch.softmax(ts, dim=1).cpu().numpy()
        np.testing.assert_allclose(so.to_host(), ref_s, rtol=1e-4, atol=1e-7)
        add("softmax", f"{rws}x{cls} f32", t_ours, "torch.softmax", t_peer)
        cfg_u = az.LaunchConfig(grid=rws, block=256)
        so2 = dev.empty((rws, cls), az.f32)
        softmax_unsafe[cfg_u](sx, so2)
        np.testing.assert_allclose(so2.to_host(), ref_s, rtol=1e-4, atol=1e-7)
        t_ours = ours(lambda: softmax_unsafe[cfg_u](sx, so2))
        add("softmax_unsafe (beside)", f"{rws}x{cls} f32", t_ours, "torch.softmax", t_peer)

    # scan (two-level: up to 256*256 elements)
    if want("scan"):
        n = 256 * 256
        q_h = rng.integers(-100, 100, n, dtype=np.int32)
        q = dev.to_device(q_h)
        nb = n // 256
        part, sums, scanned, unused, out = (
            dev.empty(n, az.i32), dev.empty(nb, az.i32), dev.empty(nb, az.i32), dev.empty(1, az.i32), dev.empty(n, az.i32)
        )
        c1, c2 = az.LaunchConfig.for_num_elems(n, block=256), az.LaunchConfig.for_num_elems(nb, block=256)

        def scan_all() -> None:
            block_scan[c1](q, part, sums)
            block_scan[c2](sums, scanned, unused)
            add_offsets[c1](part, scanned, out)

        t_ours = ours(scan_all)
        cq = cp.asarray(q_h)
        t_peer = cupy_t(lambda: cp.cumsum(cq))
        np.testing.assert_array_equal(out.to_host(), cp.asnumpy(cp.cumsum(cq)).astype(np.int32))
        add("scan (3 launches)", "2^16 i32", t_ours, "cp.cumsum", t_peer)

    lines = [
        f"## {datetime.date.today().isoformat()}: examples on {dev.name} beside CuPy/PyTorch",
        "",
        f"Command: `python3 bench/examples_bench.py {' '.join(sys.argv[1:])}`; median (min-max) ms of {args.reps} event-timed runs; "
        "speed ratio = peer time / anodize time (above 1 means anodize is faster).",
        "",
        "| example | size | anodize ms | peer | peer ms | ratio |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.write:
        with open(args.write, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
