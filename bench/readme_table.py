"""README's "Performance and reliability" table, every row measured in one process, printed ready to paste.

    python3 bench/readme_table.py [--numba-path DIR] [--json /tmp/readme_table.json] [--budget-s 95]
    python3 bench/readme_table.py --dry      # no GPU: the CPU backend at toy sizes (tests run it)

Each row runs the function of the bench that owns it (nothing is copied here).  Sections, in the
order they run (the most wanted first), with their sizes and repetitions on a GPU:

* bandwidth (vecadd `index_1d` coarsened, stencil2d, vecadd `grid_stride`): bench/suite.py's
  `bandwidth_results`, 2^28 f32 and 16384^2 f32, 10 event-timed runs each, every anodize output
  checked against NumPy; peers PyTorch, Triton, CuPy; the copy ceiling is CuPy's
  device-to-device `copyto` of the same bytes;
* launch: suite's `launch_results`, host microseconds of 20,000 launches in 5 batches, beside
  raw cuda.core, CuPy, PyTorch, numba-cuda;
* dlpack: bench/interop_bench.py's `vecadd_rows` (2^26 f32) and `gemm_rows` (the tile GEMM
  4096^3 f16 and bf16): the same kernel over anodize buffers and over PyTorch tensors passed
  through `__dlpack__` alone, 10 reps, outputs checked;
* records: bench/records_bench.py's `particle_part`, the particle step over 2^24 records against
  the copy ceiling of the same bytes and numba-cuda's same kernel, 10 reps, outputs checked;
* config: bench/dispatch_overhead.py's `forms` on 4,096 elements (a config built on every call,
  held launchers, `torch.add`), host microseconds, 3 interleaved rounds of 2,000 launches;
* bounds: suite's `bounds_checks` (checked vs unchecked stencil2d, 10 runs);
* tiles: bench/tile_bench.py's `main` (add, softmax, layer norm, the GEMM 4096^3 f16 beside
  cuBLAS and the Triton tutorial, attention d64 and d128 beside SDPA, the GEMM's cold compile;
  batches of 10 calls, attention 3 reps; outputs checked against PyTorch);
* compile: suite's `compile_times` (3 fresh interpreters each: cold, and loaded from the
  persistent cache) and tile_bench's `cold_compile` (the tile GEMM's first compile).

numba-cuda's launch and compile figures come from one bench/numba_peer.py process at toy sizes
(`--numba-path`, by default /tmp/site_numpy where it exists: numba-cuda needs an older NumPy).  The GEMM variants
(bias+ReLU, A@B.T, ...) are bench/tile_variants_v2.py's, not in this run.  Each section's rows
are printed (`ROW ...`) as soon as it ends, the table at the end; a failed section is a FAILED
row and the exit status is 1; no section starts after `--budget-s` seconds (95 by default: the
run is meant to take under 2 minutes on an H100).
`--dry` runs every section it can on the CPU backend at toy sizes (2 reps, 1 compile run) and
prints the same table with the GPU-only cells marked "needs a GPU": the figures it prints are
the CPU backend's, never README figures.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import suite  # noqa: E402

GPU_ONLY = "needs a GPU"
NUMBA_PATH = "/tmp/site_numpy"  # where the GPU image keeps numba-cuda with its older NumPy
Row = tuple[str, str, str]  # (what, anodize, peers in the same run)
CEILING_NAMES = {"anodize": "anodize's copy kernel", "CuPy copyto": "CuPy's device-to-device `copyto`"}


def med(xs: Any) -> float:
    return statistics.median(xs) if isinstance(xs, list) else float(xs)


class Table:
    """The rows measured so far, the raw figures behind them (`--json`), each section's wall time."""

    def __init__(self, args: argparse.Namespace, dev: Any):
        self.args, self.dev = args, dev
        self.gpu = dev.kind == "cuda"
        self.rows: list[Row] = []
        self.figures: dict[str, Any] = {}
        self.seconds: dict[str, float] = {}
        self.failed: list[str] = []
        self._numba: dict[str, Any] | None = None
        # the suite's functions run without numba-cuda: its one process runs once (`numba`)
        self.suite_args = argparse.Namespace(**{**vars(args), "numba_path": ""})

    def numba(self) -> dict[str, Any]:
        """bench/numba_peer.py's launch and compile figures (its bandwidth rows at toy sizes: README's
        bandwidth rows have no numba-cuda peer), from one process of its own, started on first
        use; {} without `--numba-path`."""
        if self._numba is None:
            small = argparse.Namespace(**{**vars(self.args), "log2n": 10, "side": 64, "reps": 2})  # README's rows: launch, compile
            self._numba = suite.numba_results(small) if self.gpu and self.args.numba_path else {}
            self.figures["numba"] = self._numba
        return self._numba

    def section(self, name: str, fn: Callable[[Table], None], start: float) -> None:
        """Run one section; its rows are printed as soon as it ends (a run cut short keeps
        them). A failed section is a FAILED row (its traceback on stderr); past the time budget
        a section is not started."""
        t = time.perf_counter()
        before = len(self.rows)
        if self.args.budget_s and t - start > self.args.budget_s:
            self.rows.append((name, f"not measured: the run passed its {self.args.budget_s:.0f} s budget", ""))
        else:
            try:
                with contextlib.redirect_stdout(sys.stderr):  # the benches' own tables go to stderr
                    fn(self)
            except Exception as e:  # noqa: BLE001 - one failed section must not lose the others
                traceback.print_exc()
                self.failed.append(name)
                self.rows.append((name, f"FAILED: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", ""))
        self.seconds[name] = time.perf_counter() - t
        for what, ours, peer in self.rows[before:]:
            print(f"ROW {name} ({self.seconds[name]:.1f} s) | {what} | {ours} | {peer} |", flush=True)


def _gbs(moved: int, ms: list[float]) -> float:
    return moved / (med(ms) * 1e-3) / 1e9


def bandwidth(t: Table) -> None:
    res, moved, ceiling = suite.bandwidth_results(t.suite_args, t.dev)
    t.figures["bandwidth_ms"] = res
    ceil = _gbs(moved["copy"], res["copy"][ceiling])

    def cell(kernel: str, impl: str) -> str:
        g = _gbs(moved[kernel], res[kernel][impl])
        return f"{g:,.0f} GB/s ({100 * g / ceil:.0f}% of the copy ceiling)" if impl.startswith("anodize") else f"{g:,.0f} GB/s"

    def peers(kernel: str, names: list[tuple[str, str]]) -> str:
        got = [f"{label} {cell(kernel, impl)}" for label, impl in names if impl in res[kernel]]
        return ", ".join(got) if got else GPU_ONLY

    n, side = f"2^{t.args.log2n}", t.args.side
    t.rows += [
        (f"vecadd {n} f32, `index_1d` (coarsened: 4 indices per thread, 16-byte accesses)", cell("vecadd", "anodize"),
         peers("vecadd", [("PyTorch", "PyTorch add(out=)"), ("Triton", "Triton"), ("CuPy `add`", "CuPy add")])),
        (f"stencil2d {side}^2 f32, `index_2d` (coarsened)", cell("stencil2d", "anodize"),
         peers("stencil2d", [("Triton", "Triton"), ("CuPy C++", "CuPy RawKernel (NVRTC C++)")])),
        (f"vecadd {n} f32, `grid_stride` (16-byte accesses)", cell("vecadd", "anodize (grid-stride)"),
         peers("vecadd", [("PyTorch", "PyTorch add(out=)"), ("Triton", "Triton")])),
    ]
    t.figures["copy_ceiling"] = {"by": ceiling, "gbs": ceil}


def launch(t: Table) -> None:
    rows = suite.launch_results(t.suite_args, t.dev)
    if "launch_empty_us" in t.numba():
        rows["empty"]["numba-cuda"] = t.numba()["launch_empty_us"]
    t.figures["launch_us"] = rows
    ours = med(rows["empty"]["anodize safe launch"])
    raw = rows["empty"].get("raw cuda.core launch")
    vs = f" ({ours / med(raw):.2f}x raw cuda.core)" if raw else ""
    peers = [f"{label} {med(rows['empty'][k]):.2f} us" for label, k in
             (("CuPy", "CuPy RawKernel"), ("PyTorch `fill_`", "PyTorch fill_ (tiny, closest to empty)"), ("numba-cuda", "numba-cuda"))
             if k in rows["empty"]]
    t.rows.append(("safe launch, empty kernel", f"{ours:.2f} us{vs}", ", ".join(peers) if peers else GPU_ONLY))


def config_per_call(t: Table) -> None:
    import dispatch_overhead as D

    import anodize as az

    n = 4096
    if t.gpu:
        import torch

        a, b = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
        c = torch.empty_like(a)

        def host(x: Any) -> np.ndarray:
            return x.cpu().numpy()  # type: ignore[no-any-return]

        def sync() -> None:
            t.dev.synchronize()
            torch.cuda.synchronize()
    else:
        torch = None
        a, b = t.dev.to_device(np.ones(n, np.float32)), t.dev.to_device(np.full(n, 2, np.float32))
        c = t.dev.empty(n, az.f32)

        def host(x: Any) -> np.ndarray:
            return x.to_host()  # type: ignore[no-any-return]

        sync = t.dev.synchronize
    wanted = ["held tile launcher", "per-call for_tiles", "held generic launcher", "per-call generic (Constants)", "torch.add(out=)"]
    forms = {k: v for k, v in D.forms(n, a, b, c, torch).items() if k in wanted}
    want = host(a) + host(b)
    for name, (fn, backend) in forms.items():
        if torch is None:
            c.fill(0)
        else:
            c.zero_()
        fn()
        sync()
        np.testing.assert_array_equal(host(c), want, err_msg=name)
    us: dict[str, list[float]] = {k: [] for k in forms}
    for _ in range(t.args.config_rounds):
        for name, (fn, _) in forms.items():
            us[name] += suite.host_launch_us(fn, t.args.config_launches, sync)  # type: ignore[arg-type]
    t.figures["config_us"] = us
    m = {k: med(v) for k, v in us.items()}
    ours = (f"{m['per-call for_tiles']:.2f} us a launch, the held launcher's {m['held tile launcher']:.2f} us "
            f"{m['per-call for_tiles'] - m['held tile launcher']:+.2f}; generic {m['per-call generic (Constants)']:.2f} us, "
            f"held {m['held generic launcher']:.2f}")
    peer = f"`torch.add` on {n} elements {m['torch.add(out=)']:.2f} us" if "torch.add(out=)" in m else GPU_ONLY
    t.rows.append(("a config built on every call (`k[az.LaunchConfig.for_tiles(...)](...)`, and a generic kernel with `az.Constant`s)", ours, peer))


def bounds(t: Table) -> None:
    if t.gpu:
        out = suite.bounds_checks(argparse.Namespace(**{**vars(t.suite_args), "log2n": 24}), [])  # its gather row: 2^24
        t.figures["bounds"] = out
        s = out["stencil2d"]
        t.rows.append(("stencil2d bounds checks", f"{int(s['checks_left'])} left, {s['cost_pct']:+.1f}% time", ""))
        return
    from stencil2d import stencil2d

    left = stencil2d.compile(arch="sm_90").bounds_checks
    t.rows.append(("stencil2d bounds checks", f"{left} left, time: {GPU_ONLY}", ""))


def compile_rows(t: Table) -> None:
    import tile_bench

    c = suite.compile_times(t.suite_args, [])
    t.figures["compile_ms"] = c
    r = tile_bench.cold_compile()  # no stage hooks: the figure
    cold = {"first_ms": r["first"] * 1e3, "next_ms": r["next"] * 1e3}
    t.figures["tile_gemm_cold_ms"] = cold
    nb = (f"numba-cuda {t.numba()['compile_vecadd_ms']:.0f} ms for its first" if "compile_vecadd_ms" in t.numba()
          else "numba-cuda: run with `--numba-path`")
    t.rows.append(("cold compile, check + codegen + PTX + cubin",
                   f"{c['cold_second']:.0f} ms per kernel ({c['cold_first']:.0f} ms for a process's first, imports included; "
                   f"the tile GEMM's first {cold['first_ms']:,.0f} ms, its next specialisation {cold['next_ms']:,.0f} ms)", nb))
    t.rows.append(("load from the persistent cache",
                   f"{c['cached_second']:.2f} ms per kernel ({c['cached']:.1f} ms for a process's first, runtime imports included)", ""))


def tiles(t: Table) -> None:
    if not t.gpu:
        t.rows.append(("tile kernels", GPU_ONLY, GPU_ONLY))
        return
    import tile_bench

    got = tile_bench.main(["--reps", str(t.args.tile_reps), "--no-cold", "--only", "add,softmax,layer_norm,gemm,attention64,attention128"])
    t.figures["tiles"] = got
    by = {(str(r["name"]), str(r["peer"])): r for r in got if r["name"] != "cold"}

    def ratio(prefix: str, peer: str) -> str:
        r = next((v for (name, p), v in by.items() if name.startswith(prefix) and p.startswith(peer)), None)
        return "FAILED (see stderr)" if r is None else f"{r['ratio']:.2f}x"

    gemm = next((v for (name, _), v in by.items() if name.startswith("GEMM")), None)
    tf = f"{gemm['ours_tflops']:.0f} TFLOP/s, " if gemm else ""
    t.rows += [
        ("tile add 2^28 f32", f"{ratio('tile add', 'torch')} `torch.add`", "`torch.add(out=)`"),
        ("tile softmax, layer norm 4096^2 f32", f"{ratio('fused softmax', 'torch')}, {ratio('layer norm', 'F.layer_norm')}",
         "`torch.softmax`, `F.layer_norm`"),
        ("tile GEMM 4096^3 f16 (f32 accumulate), compiled by operations",
         f"{tf}{ratio('GEMM', 'torch.matmul')} cuBLAS, {ratio('GEMM', 'Triton')} the Triton tutorial (autotuned)",
         "cuBLAS (`torch.matmul`), Triton tutorial matmul"),
        ("tile attention forward b4 h16 s4096 f16", f"d64 {ratio('attention fwd d64', 'F.scaled')}, d128 {ratio('attention fwd d128', 'F.scaled')} SDPA",
         "`F.scaled_dot_product_attention`"),
    ]


def dlpack(t: Table) -> None:
    if not t.gpu:
        t.rows.append(("a kernel over PyTorch tensors through DLPack", GPU_ONLY, ""))
        return
    import interop_bench as I
    import torch

    vec = I.vecadd_rows(torch, t.dev, 1 << 26, t.args.interop_reps)
    gemm = I.gemm_rows(torch, t.dev, 4096, 4096, 4096, t.args.interop_reps)
    t.figures["dlpack"] = vec + gemm

    def pick(rows: list[tuple[str, float, float, float, float]], what: str) -> str:
        return "; ".join(f"{label.split(',')[0]}: back to back {tb:.3f} ms over DLPack tensors, {bb:.3f} over buffers "
                         f"({bb / tb:.2f}x the buffers' speed), one launch from idle {tm:.3f} vs {bm:.3f} ({bm / tm:.2f}x)"
                         for label, bm, tm, bb, tb in rows if label.endswith(what))

    t.rows.append(("a kernel over PyTorch tensors through DLPack (`__dlpack__` alone), vs over anodize buffers",
                   f"{pick(vec, 'DLPack')}; {pick(gemm, 'DLPack')}", "the same kernel over anodize buffers"))


def records(t: Table) -> None:
    import records_bench

    a = argparse.Namespace(log2n=t.args.records_log2n, reps=t.args.reps, numba_path=t.args.numba_path)
    r: dict[str, Any] = records_bench.particle_part(a, t.dev)
    t.figures["records"] = r
    ceiling = {"copy_memcpy": "a device-to-device memcpy", "copy_kernel": "a 16-byte copy kernel"}[str(r["ceiling"])]
    ours = (f"{r['particle_gbs']:,.0f} GB/s, {100 * float(r['fraction_of_copy']):.0f}% of the copy ceiling ({ceiling}, "
            f"{r['ceiling_gbs']:,.0f} GB/s; memcpy {r['copy_memcpy_gbs']:,.0f}, copy kernel {r['copy_kernel_gbs']:,.0f})")
    peer = (f"numba-cuda's same kernel {2 * r['n'] * r['record_bytes'] / min(r['numba_particle_ms']) / 1e6:,.0f} GB/s "
            f"({r['vs_numba']:.2f}x)") if "vs_numba" in r else ("numba-cuda: run with `--numba-path`" if t.gpu else GPU_ONLY)
    t.rows.append((f"records: the particle step over 2^{t.args.records_log2n} records of {r['record_bytes']} bytes "
                   "(examples/particles.py; GB/s of the record bytes read and written)", ours, peer))


SECTIONS: dict[str, Callable[[Table], None]] = {  # the order they run in: the most wanted first
    "bandwidth": bandwidth, "launch": launch, "dlpack": dlpack, "records": records, "config": config_per_call,
    "bounds": bounds, "tiles": tiles, "compile": compile_rows,
}


def render(t: Table, command: str) -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    import anodize as az

    total = sum(t.seconds.values())
    lines = [
        f"Measured on {t.dev.name} ({'GPU' if t.gpu else 'CPU backend, a dry run: not README figures'}), {when}, "
        f"anodize {az.__version__}, every row in one run of `{command}` ({total:.0f} s); a ratio is the peer's time / "
        "anodize's (above 1: anodize is faster):",
        "",
        "| | anodize | peer in the same run |",
        "|---|---|---|",
        *(f"| {what} | {ours} | {peer} |" for what, ours, peer in t.rows),
        "",
        *([f"The copy ceiling of the bandwidth rows: {CEILING_NAMES.get(c['by'], c['by'])}, {c['gbs']:,.0f} GB/s (bytes read + written)."]
          if (c := t.figures.get("copy_ceiling")) else []),
        "Section times: " + ", ".join(f"{k} {v:.1f} s" for k, v in t.seconds.items()) + ".",
    ]
    return "\n".join(lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry", action="store_true", help="no GPU: the CPU backend at toy sizes")
    ap.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections: " + ", ".join(SECTIONS))
    ap.add_argument("--numba-path", default=NUMBA_PATH if Path(NUMBA_PATH).is_dir() else "",
                    help=f"PYTHONPATH for numba-cuda's processes (it needs an older NumPy; default {NUMBA_PATH} where it exists)")
    ap.add_argument("--json", type=Path, default=None, help="write the raw figures here")
    ap.add_argument("--budget-s", type=float, default=None, help="start no section after this many seconds "
                    "(default 95 on a GPU, none for --dry); the sections left out say so in the table")
    args = ap.parse_args(argv)
    gpu = not args.dry
    if args.dry:
        args.numba_path = ""
    if args.budget_s is None:
        args.budget_s = 0.0 if args.dry else 95.0
    sizes = {  # GPU run, dry run
        "log2n": (28, 12), "side": (16384, 64), "reps": (10, 2), "launches": (20000, 200), "compile_runs": (3, 1),
        "config_launches": (2000, 50), "config_rounds": (3, 1), "tile_reps": (5, 1), "interop_reps": (10, 2),
        "records_log2n": (24, 10),
    }
    for k, (g, d) in sizes.items():
        setattr(args, k, g if gpu else d)
    return args


def main(argv: list[str] | None = None) -> str:
    args = parse(argv)
    import anodize as az

    dev = az.device("cpu") if args.dry else az.device(0)
    t = Table(args, dev)
    asked = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in asked if s not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown sections {unknown}; known: {', '.join(SECTIONS)}")
    only = [s for s in SECTIONS if s in asked]  # in SECTIONS' order (compile reuses the tiles' cold compile)
    start = time.perf_counter()
    for name in only:
        t.section(name, SECTIONS[name], start)
    command = "python3 bench/readme_table.py" + "".join(f" {a}" for a in (sys.argv[1:] if argv is None else argv))
    text = render(t, command)
    print(text, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"device": dev.name, "rows": t.rows, "seconds": t.seconds, "figures": t.figures}, indent=1, default=str))
    if t.failed:
        raise SystemExit(f"sections failed: {', '.join(t.failed)} (tracebacks above)")
    return text


if __name__ == "__main__":
    main()
