"""The canonical GEMM beside NVIDIA cuTile Python's tile GEMM and cuBLAS, in one process (issue 26).

    bash tools/cutile_setup.sh          # on the device: unpacks the carried .cutile/ into /tmp/cutile
    python3 bench/cutile_peer.py [--size 4096] [--dtypes f16,bf16] [--rounds 7]
    python3 bench/cutile_peer.py --compile-only     # no GPU needed: cuTile's GEMM to an sm_90 cubin

Contenders, all C = A @ B with A M x K and B K x N row-major, f32 accumulate, output in the
input type:
  * cuTile: cuTile Python's documented tile GEMM (its MatMul sample's program: one block per
    output tile in grouped order, `ct.load` / `ct.mma` over K, `ct.astype`, `ct.store`) at
    128 x 128 x 64 (`--cutile-tiles`), launched with `ct.launch` on torch's stream;
  * anodize: tests/codegen/tile_mma_cases.py's canonical program at 128 x 256 x 64 over 8 warps
    and 128 x 128 x 64 over 4 warps, and the latter again under `--ab` (default
    WGMMA_STACK + TWO_BLOCKS, read when the kernel compiles);
  * cuBLAS: `torch.matmul(a, b, out=c)`.
Every output is checked against torch's float32 product before the timing and again after it
(the last timed call's).  Times: wall clock of `--calls` back-to-back calls then a synchronise,
median of `--rounds` interleaved rounds (the order rotates each round; one round before them
warms up and is not kept).  Ratios: the other's time / anodize's (>= 1: anodize faster);
issue 26's target is >= 0.9x cuBLAS and >= 1.0x cuTile.

cuTile comes from `CUTILE_HOME` (default /tmp/cutile: `py/` holds cuda.tile, `cu13/` tileiras,
ptxas and libnvvm 13.4; tools/fetch_cutile.sh, tools/cutile_setup.sh).  Its compiler is pointed
at `cu13/` without touching this process's PATH or CUDA_HOME, so anodize's own ptxas is
unchanged.  Without cuTile the script says so and exits 0; a wrong result or a cuTile failure
exits 1.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HOME = "/tmp/cutile"
DEFAULT_AB = "ANODIZE_TILE_WGMMA_STACK=1,ANODIZE_TILE_TWO_BLOCKS=1"
ct: Any = None  # cuda.tile once imported (a global: cuTile evaluates the kernel's annotations in its module)


def cutile_home() -> Path:
    """Where the unpacked cuTile lies: `CUTILE_HOME`, else /tmp/cutile."""
    return Path(os.environ.get("CUTILE_HOME") or DEFAULT_HOME)


def import_cutile(home: Path) -> tuple[Any, str]:
    """(cuda.tile, "") when it imports from `home`/py (or an installed copy), else (None, why);
    sets the module's `ct`."""
    global ct
    py = home / "py"
    if (py / "cuda" / "tile").is_dir() and str(py) not in sys.path:
        sys.path.insert(0, str(py))
    try:
        import cuda.tile as ct  # noqa: F811
    except ImportError as e:
        if not (py / "cuda" / "tile").is_dir():
            return None, f"{type(e).__name__}: {e}"
        try:  # a regular `cuda` package (an older cuda-python) shadows the namespace: extend it
            import cuda

            cuda.__path__ = [*cuda.__path__, str(py / "cuda")]
            import cuda.tile as ct  # noqa: F811
        except ImportError as e2:
            return None, f"{type(e2).__name__}: {e2}"
    try:  # the compiler driver imports what the package's top does not (typing_extensions, ...)
        import cuda.tile._compile  # noqa: F401
    except ImportError as e3:
        return None, f"{type(e3).__name__}: {e3}"
    return ct, ""


def point_compiler_at(home: Path) -> str:
    """Make cuTile run `home`/cu13/bin/tileiras (which finds ptxas beside it on its PATH and
    libnvvm at ../lib, as in the pip wheels' layout), leaving this process's environment as it
    was.  Returns the tileiras path, or "" where cuTile finds its own (pip or system)."""
    from cuda.tile import _compile

    bin_dir = home / "cu13" / "bin"
    if not (bin_dir / "tileiras").is_file():
        return ""
    saved = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{bin_dir}{os.pathsep}{saved}"
    try:
        _compile._find_compiler_bin.cache_clear()
        binary = _compile._find_compiler_bin()  # cached: every later cuTile compile runs this one
    finally:
        os.environ["PATH"] = saved
    if Path(binary.path).parent == bin_dir:
        binary.pass_cuda_home_var = False  # libnvvm beside tileiras, not under a CUDA_HOME of another version
    return str(binary.path)


def cutile_gemm() -> Any:
    """cuTile's tile GEMM: one block per (tm, tn) tile of C, blocks in groups of 8 tile rows."""
    @ct.kernel
    def matmul(A, B, C, tm: ct.Constant[int], tn: ct.Constant[int], tk: ct.Constant[int]):  # noqa: ANN001, ANN202, N803
        rows, cols = ct.cdiv(A.shape[0], tm), ct.cdiv(B.shape[1], tn)
        bid = ct.bid(0)
        per_group = 8 * cols
        first = (bid // per_group) * 8
        height = min(rows - first, 8)
        bm = first + bid % height
        bn = (bid % per_group) // height
        acc = ct.full((tm, tn), 0, dtype=ct.float32)
        for kt in range(ct.num_tiles(A, axis=1, shape=(tm, tk))):
            a = ct.load(A, index=(bm, kt), shape=(tm, tk), padding_mode=ct.PaddingMode.ZERO)
            b = ct.load(B, index=(kt, bn), shape=(tk, tn), padding_mode=ct.PaddingMode.ZERO)
            acc = ct.mma(a, b, acc)
        ct.store(C, index=(bm, bn), tile=ct.astype(acc, C.dtype))

    return matmul


def compile_only(tiles: list[tuple[int, int, int]], dtypes: list[str], arch: str) -> int:
    """cuTile's GEMM to a cubin for `arch` (no GPU): the toolchain check the device run relies on."""
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, ConstantConstraint, KernelSignature, export_kernel

    kern = cutile_gemm()
    for t in dtypes:
        dt = {"f16": ct.float16, "bf16": ct.bfloat16}[t]
        for tm, tn, tk in tiles:
            arr = ArrayConstraint(dt, 2, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                                  may_alias_internally=False, stride_constant=(None, 1), shape_divisible_by=128,
                                  stride_divisible_by=(128, 1), base_addr_divisible_by=16)
            sig = KernelSignature([arr, arr, arr, ConstantConstraint(tm), ConstantConstraint(tn), ConstantConstraint(tk)],
                                  CallingConvention.cutile_python_v1())
            buf = io.BytesIO()
            t0 = time.perf_counter()
            export_kernel(kern, [sig], buf, gpu_code=arch, output_format="cubin")
            size = len(buf.getvalue())
            print(f"cuTile {t} {tm}x{tn}x{tk} -> {arch} cubin {size} bytes in {time.perf_counter() - t0:.2f} s", flush=True)
            if size < 1024 or not buf.getvalue().startswith(b"\x7fELF"):
                print(f"FAILED: cuTile {t} {tm}x{tn}x{tk}: not an ELF cubin", flush=True)
                return 1
    return 0


def wall(fn: Callable[[], Any], calls: int) -> float:
    """Milliseconds a call: `calls` back-to-back calls, then a synchronise (the benches' one
    timer, bench/tile_variants_v2.py's; `build` put bench/ on the path)."""
    from tile_variants_v2 import wall as timed

    return timed(fn, calls)  # type: ignore[no-any-return]


def parse_tiles(text: str, width: int) -> list[tuple[int, ...]]:
    """'128x128x64,128x256x64' -> [(128, 128, 64), (128, 256, 64)] (each of `width` numbers)."""
    out = [tuple(int(v) for v in t.split("x")) for t in text.split(",") if t]
    for t in out:
        if len(t) != width:
            raise SystemExit(f"cutile_peer: tile {'x'.join(map(str, t))} needs {width} numbers")
    return out


def ratio_line(name: str, ms: float, flops: float, cublas: float, cutile: float | None) -> str:
    """One row: time, TFLOP/s and the peers' time over this one's."""
    peer = f"{cutile / ms:7.3f}" if cutile else f"{'-':>7s}"
    return f"{name:46s} {ms:8.4f} {flops / ms / 1e9:8.1f} {cublas / ms:8.3f} {peer}"


class Contender:
    """A named call writing `out`, checked against torch's product before and after the timing."""

    def __init__(self, name: str, call: Callable[[], Any], out: Any) -> None:
        self.name, self.call, self.out = name, call, out
        self.times: list[float] = []


def check(con: Contender, ref: Any, k: int) -> str:
    """"" when `con.out` matches `ref`, else why not."""
    import torch

    try:
        torch.testing.assert_close(con.out.float(), ref, rtol=3e-2, atol=0.5 + 1e-3 * k ** 0.5)
    except AssertionError as e:
        return str(e).splitlines()[0] if str(e) else "mismatch"
    return ""


def build(args: argparse.Namespace, t: str, s: int) -> tuple[list[Contender], Any, list[str]]:
    """The contenders for one data type, each run once and checked; also the reference and the failures."""
    import torch

    import anodize as az

    sys.path.insert(0, str(ROOT / "tests" / "codegen"))
    sys.path.insert(0, str(ROOT / "bench"))
    import tile_mma_cases as cases
    from tile_variants_v2 import _module, switches

    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[t]
    torch.manual_seed(0)
    a, b = torch.randn(s, s, device="cuda", dtype=dt), torch.randn(s, s, device="cuda", dtype=dt)
    ref = a.float() @ b.float()
    failed: list[str] = []
    cons: list[Contender] = []

    def add(name: str, make: Callable[[Any], Callable[[], Any]]) -> None:
        out = torch.empty(s, s, device="cuda", dtype=dt)
        try:
            call = make(out)
            out.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - a contender that fails says why and the run goes on
            failed.append(f"{name}: {type(e).__name__}: {str(e)[:400]}")
            return
        con = Contender(name, call, out)
        why = check(con, ref, s)
        if why:
            failed.append(f"{name}: wrong result: {why}")
            return
        cons.append(con)

    add("cuBLAS (torch.matmul)", lambda out: (lambda: torch.matmul(a, b, out=out)))
    if ct is not None:
        kern = cutile_gemm()
        for tm, tn, tk in parse_tiles(args.cutile_tiles, 3):
            grid = (-(-s // tm) * -(-s // tn), 1, 1)
            add(f"cuTile {tm}x{tn}x{tk}",
                lambda out, tm=tm, tn=tn, tk=tk, grid=grid: (
                    lambda: ct.launch(torch.cuda.current_stream(), grid, kern, (a, b, out, tm, tn, tk))))
    runs: list[tuple[tuple[int, ...], str]] = [(tile, "") for tile in parse_tiles(args.tiles, 4)]
    runs += [(tuple(parse_tiles(args.ab_tile, 4)[0]), sw) for sw in args.ab.split(";") if sw]
    for q, ((bm, bn, bk, w), sw) in enumerate(runs):
        env = dict(kv.split("=", 1) for kv in sw.split(",")) if sw else {}
        label = f"anodize {bm}x{bn}x{bk}/{w}w" + (" +" + "+".join(k.removeprefix("ANODIZE_TILE_") for k in env) if env else "")

        def make(out: Any, bm: int = bm, bn: int = bn, bk: int = bk, w: int = w, env: dict[str, str] = env,
                 q: int = q) -> Callable[[], Any]:
            mod = _module(f"cutile_peer_{t}_{q}", cases.source("canonical", bm, bn, bk, w, t))
            launch = mod.k[az.LaunchConfig.for_tiles((s, s), (bm, bn))]
            with switches(env):  # the switches are read when the kernel compiles: at its first call, here
                launch(a, b, out, s)
                torch.cuda.synchronize()
            return lambda: launch(a, b, out, s)

        add(label, make)
    return cons, ref, failed


def measure(args: argparse.Namespace, t: str) -> list[str]:
    """One data type: build, time in interleaved rounds, check again, print; returns the failures."""
    s = args.size
    cons, ref, failed = build(args, t, s)
    for r in range(args.rounds + 1):  # round 0 warms the clocks up and is not kept
        for i in range(len(cons)):
            con = cons[(i + r) % len(cons)]
            ms = wall(con.call, args.calls)
            if r:
                con.times.append(ms)
    for con in cons:
        why = check(con, ref, s)
        if why:
            failed.append(f"{con.name}: wrong result after the timing: {why}")
    flops = 2.0 * s ** 3
    med = {con.name: statistics.median(con.times) for con in cons}
    cublas = med.get("cuBLAS (torch.matmul)")
    cutiles = {n: v for n, v in med.items() if n.startswith("cuTile")}
    best_cutile = min(cutiles.values()) if cutiles else None
    print(f"\n{t} {s}^3, f32 accumulate, {t} out; median of {args.rounds} rounds of {args.calls} calls", flush=True)
    print(f"{'contender':46s} {'ms':>8s} {'TFLOP/s':>8s} {'cuBLAS/x':>8s} {'cuTile/x':>7s}", flush=True)
    for con in cons:
        if cublas:
            print(ratio_line(con.name, med[con.name], flops, cublas, best_cutile), flush=True)
    ours = {n: v for n, v in med.items() if n.startswith("anodize")}
    if ours and cublas:
        name, mo = min(ours.items(), key=lambda kv: kv[1])
        line = f"{t}: anodize best ({name.removeprefix('anodize ')}) {mo:.4f} ms = {cublas / mo:.3f}x cuBLAS"
        line += f" (target 0.9: {'met' if cublas / mo >= 0.9 else 'NOT met'})"
        if best_cutile:
            line += f", {best_cutile / mo:.3f}x cuTile (target 1.0: {'met' if best_cutile / mo >= 1.0 else 'NOT met'})"
        print(line, flush=True)
    if best_cutile and cublas:
        print(f"{t}: cuTile best {best_cutile:.4f} ms = {cublas / best_cutile:.3f}x cuBLAS", flush=True)
    return failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--dtypes", default="f16,bf16")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--cutile-tiles", default="128x128x64", help="cuTile's tiles, tm x tn x tk, comma separated")
    ap.add_argument("--tiles", default="128x256x64x8,128x128x64x4", help="anodize's tiles, BM x BN x BK x warps")
    ap.add_argument("--ab", default=DEFAULT_AB, help="switch sets for anodize at --ab-tile, ';' separated ('' for none)")
    ap.add_argument("--ab-tile", default="128x128x64x4")
    ap.add_argument("--compile-only", action="store_true", help="only compile cuTile's GEMM to a cubin (no GPU needed)")
    ap.add_argument("--arch", default="sm_90", help="the cubin's target for --compile-only")
    args = ap.parse_args(argv)
    dtypes = [t for t in args.dtypes.split(",") if t]
    home = cutile_home()
    mod, why = import_cutile(home)
    if mod is None:
        print(f"cuTile Python is not importable ({why}); looked in {home}/py and the installed packages. "
              "Nothing to compare: on the device run `bash tools/cutile_setup.sh` first (it unpacks the "
              "carried .cutile/, built by tools/fetch_cutile.sh).", flush=True)
        return 0
    tileiras = point_compiler_at(home)
    print(f"cuTile {ct.__version__} from {Path(ct.__file__).parent}; tileiras {tileiras or '(its own search)'}", flush=True)
    if args.compile_only:
        return compile_only([(t[0], t[1], t[2]) for t in parse_tiles(args.cutile_tiles, 3)], dtypes, args.arch)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing measured (try --compile-only)", flush=True)
        return 0
    print(f"device: {torch.cuda.get_device_name()}", flush=True)
    failed: list[str] = []
    for t in dtypes:
        failed += measure(args, t)
    for f in failed:
        print(f"FAILED: {f}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
