"""Differential race fuzzing: generated shared-memory kernels that `anodize check` accepts must
run race-free on the debug device, whose interpreter reports every pair of conflicting
accesses that no barrier orders (`az.device("debug")`, a `KernelFault` naming "data race").

    python tools/race_oracle.py [--kind shared|global|shared2d|owned] [--cases 200] [--seed 0] [--out DIR]

Each case is one 1-D kernel of 64 threads over two shared arrays: safe-tier writes at the
thread's own slot, reads at own, neighbouring, mirrored or constant slots, unsafe-tier writes
at thread-id forms, barriers (some in a helper), block reductions, block-shared atomics, and
`if`s on the thread (`w.get() < K`) or on a uniform parameter, `range` loops of constant trip
count.  `--kind global` generates kernels writing one output of 100 elements from 2 blocks
of 64 threads through `index_1d`, helpers returning or taking a witness, grid-stride loops
(with `break`, `continue`, and their variable after the loop) and rebinding; `--kind shared2d` 8 x 8 blocks over a 2-D array at `index_in_block_2d()` and
a 1-D one at the linear `index_in_block()`, with unsafe writes at raw ids; `--kind owned`
per-thread tiles of one 2-D output (literal and module-constant shapes, groups) beside
`index_2d` and a helper taking the index, on a grid that covers the output unevenly.  An accepted
case that the debug device finds racy is a checker hole: its source is written to `--out`
and the run exits 1.  Rejected cases are counted, not run.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

HEAD = '''import anodize as az
from anodize import DisjointSlice, Slice, f32, func, i64, kernel, launch_contract, thread, u32


@func
def _sync() -> None:
    az.syncthreads()


@func
def _h(x: f32) -> f32:
    hs = az.shared.{harr}
    hw = thread.index_in_block()
    y = x
{hbody}    return y


@launch_contract(domain=1, block=64, shared_mem=lambda block: 256)
@kernel
def case(a: Slice[f32], c: DisjointSlice[f32], n: i64) -> None:
    i = thread.index_1d()
    w = thread.index_in_block()
    d = az.shared.dynamic_array(f32)
    s = az.shared.array({ns}, f32)
    r = az.shared.array(64, f32)
    h = az.shared.atomic_array(4, u32)
    v = a[i] if i in a else 0.0
'''
TAIL = '''    if i in c:
        c[i] = v
'''


class Gen:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def idx(self) -> str:
        k = self.rng.randint(1, 63)
        return self.rng.choice(["w", "w.get()", f"(w.get() + {k}) % 64", f"{k}", "63 - w.get()", "w.get() // 2"])

    def raw_idx(self) -> str:
        return self.rng.choice(["thread.tid_x()", "(thread.tid_x() + 1) % 64", "thread.tid_x() // 2", "63 - thread.tid_x()",
                                "thread.tid_x() * 2 % 64", "thread.tid_x() + 64 * i64(n > 3)"])

    def stmt(self, depth: int) -> list[str]:
        rng = self.rng
        arr = rng.choice(["s", "r", "d"])
        k = rng.randint(0, 63)
        kind = rng.choices(
            ["own", "read", "sync", "helper_sync", "tdep_if", "uni_if", "loop", "unsafe", "reduce", "atomic",
             "strided", "slot_branch", "while", "call"],
            [5, 6, 4, 1, 2, 2, 2, 2, 1, 1, 1, 1, 1, 3],
        )[0]
        if kind == "strided":  # a strided loop of the unsafe tier, its variable used after it
            stop = rng.choice(["n", "64", "128", str(k)])
            after = rng.choice([f"{arr}[j] = v", "v = v + " + f"{arr}[j]", "pass"])
            return ["with az.unsafe():", f"    j = {rng.choice(['0', 'thread.tid_x()'])}",
                    f"    for j in range(thread.tid_x(), {stop}, 64):", f"        {arr}[j] = v", f"    {after}"]
        if kind == "slot_branch":  # a block-local witness bound under a branch
            cond = rng.choice([f"w.get() < {k}", f"n > {rng.randint(0, 6)}"])
            return [f"if {cond}:", "    w2 = thread.index_in_block()", f"{arr}[w2] = v"]
        if kind == "while" and depth < 2:
            body = [ln for _ in range(rng.randint(1, 3)) for ln in self.stmt(depth + 1)]
            return [f"m{depth} = 0", f"while m{depth} < {rng.randint(0, 2)}:"] + ["    " + ln for ln in body] + [f"    m{depth} += 1"]
        if kind == "while":
            kind = "read"
        if depth >= 2 and kind in ("tdep_if", "uni_if", "loop"):
            kind = "read"
        if kind == "own":
            return [f"{arr}[{rng.choice(['w', 'w.get()'])}] = v + {k}.0"]
        if kind == "call":
            return ["v = v + _h(v)"]
        if kind == "read":
            return [f"v = v + {arr}[{self.idx()}]"]
        if kind == "sync":
            return ["az.syncthreads()"]
        if kind == "helper_sync":
            return ["_sync()"]
        if kind == "reduce":
            return ["x = az.block.reduce(v, \"sum\")", "v = v + x"]
        if kind == "atomic":
            return [f"h.add({rng.randint(0, 3)}, u32(1))"]
        if kind == "unsafe":
            return ["with az.unsafe():", f"    {arr}[{self.raw_idx()}] = v"]
        body = [ln for _ in range(rng.randint(1, 3)) for ln in self.stmt(depth + 1)]
        if kind == "tdep_if":
            head = f"if w.get() < {rng.randint(1, 63)}:"
        elif kind == "uni_if":
            head = f"if n > {rng.randint(0, 6)}:"
        else:
            head = f"for _k{depth} in range({rng.randint(1, 3)}):"
        return [head] + ["    " + ln for ln in body]

    def module(self) -> str:
        rng = self.rng
        lines = [ln for _ in range(rng.randint(2, 7)) for ln in self.stmt(0)]
        ns = rng.choice([64, 65, 128])
        harr = rng.choice(["array(64, f32)", "dynamic_array(f32)"])
        hbody = [rng.choice(["hs[hw] = x", "az.syncthreads()", "y = y + hs[(hw.get() + 1) % 64]", "y = y + hs[hw]"])
                 for _ in range(rng.randint(1, 4))]
        return (HEAD.format(ns=ns, harr=harr, hbody="".join(f"    {ln}\n" for ln in hbody))
                + "".join(f"    {ln}\n" for ln in lines) + TAIL)


GHEAD = '''import anodize as az
from anodize import DisjointSlice, Index1D, Slice, f32, func, i64, kernel, launch_contract, thread


@func
def _w() -> Index1D:
    return thread.index_1d()


@func
def _put(c: DisjointSlice[f32], j: Index1D, v: f32) -> None:
    if j in c:
        c[j] = v


@launch_contract(domain=1, block=64)
@kernel
def case(a: Slice[f32], c: DisjointSlice[f32], n: i64) -> None:
    i = thread.index_1d()
    v = a[i] if i in a else 0.0
'''


class GlobalGen(Gen):
    """Kernels writing one output through witnesses: index_1d, helpers returning or taking one,
    grid-stride loops (with break, continue, and their variable after the loop), rebinding."""

    def stmt(self, depth: int) -> list[str]:
        rng = self.rng
        k = rng.randint(0, 9)
        kind = rng.choices(
            ["write", "bump", "helper_w", "put", "gs", "gs_after", "rebind", "tdep_if", "uni_if", "loop", "read"],
            [4, 3, 2, 2, 2, 1, 1, 2, 2, 2, 2],
        )[0]
        if depth >= 2 and kind in ("tdep_if", "uni_if", "loop", "gs", "gs_after"):
            kind = "write"
        if kind == "write":
            return ["if i in c:", f"    c[i] = v + {k}.0"]
        if kind == "bump":
            return ["if i in c:", "    c[i] += 1.0"]
        if kind == "read":
            return ["if i in c:", "    v = v + c[i]"]
        if kind == "helper_w":
            return ["j2 = _w()", "if j2 in c:", f"    c[j2] = v + {k}.0"]
        if kind == "put":
            return ["_put(c, i, v)"]
        if kind == "rebind":
            return [f"if {rng.choice(['i.get() < ' + str(k * 7), 'n > ' + str(k % 5)])}:", "    i = thread.index_1d()"]
        if kind in ("gs", "gs_after"):
            inner = rng.choice(["c[j] = v", "c[j] += 1.0", "if a[0] > 100.0:\n        break\n    c[j] = v",
                                "if j.get() % 3 == 0:\n        continue\n    c[j] = v"])
            out = ["for j in thread.grid_stride(c):"] + ["    " + ln for ln in inner.split("\n")]
            if kind == "gs_after":
                out += [rng.choice(["c[j] = v", "if j in c:\n    c[j] += 1.0"])]
            return [ln for part in out for ln in part.split("\n")]
        body = [ln for _ in range(rng.randint(1, 3)) for ln in self.stmt(depth + 1)]
        if kind == "tdep_if":
            head = f"if i.get() < {rng.randint(1, 100)}:"
        elif kind == "uni_if":
            head = f"if n > {rng.randint(0, 6)}:"
        else:
            head = f"for _k{depth} in range({rng.randint(1, 3)}):"
        return [head] + ["    " + ln for ln in body]

    def module(self) -> str:
        lines = [ln for _ in range(self.rng.randint(1, 5)) for ln in self.stmt(0)]
        return GHEAD + "".join(f"    {ln}\n" for ln in lines)


THEAD = '''import anodize as az
from anodize import DisjointSlice2D, Slice2D, f32, func, i64, kernel, launch_contract, thread


@func
def _sync() -> None:
    az.syncthreads()


@launch_contract(domain=2, block=(8, 8))
@kernel
def case(a: Slice2D[f32], c: DisjointSlice2D[f32], n: i64) -> None:
    ij = thread.index_2d()
    w = thread.index_in_block_2d()
    q = thread.index_in_block()
    t = az.shared.array((8, {cols}), f32)
    s = az.shared.array(64, f32)
    v = a[ij] if ij in a else 0.0
'''
TTAIL = '''    if ij in c:
        c[ij] = v
'''


class TileGen(Gen):
    """2-D blocks (8 x 8): a 2-D array at `t[w]` / `t[w.row, w.col]`, a 1-D one at the linear
    slot `s[q]`; reads at shifted, transposed and constant slots; unsafe writes at raw ids."""

    def stmt(self, depth: int) -> list[str]:
        rng = self.rng
        k = rng.randint(1, 7)
        kind = rng.choices(["own", "own1", "read", "read1", "sync", "helper_sync", "tdep_if", "uni_if", "loop", "unsafe", "reduce"],
                           [4, 2, 5, 3, 4, 1, 2, 2, 2, 2, 1])[0]
        if depth >= 2 and kind in ("tdep_if", "uni_if", "loop"):
            kind = "read"
        if kind == "own":
            return [f"t[{rng.choice(['w', 'w.row, w.col'])}] = v + {k}.0"]
        if kind == "own1":
            return [f"s[{rng.choice(['q', 'q.get()'])}] = v + {k}.0"]
        if kind == "read":
            idx = rng.choice(["w", "w.row, w.col", f"w.row, (w.col + {k}) % 8", f"(w.row + {k}) % 8, w.col", "w.col, w.row", f"{k}, {k}"])
            return [f"v = v + t[{idx}]"]
        if kind == "read1":
            idx = rng.choice(["q", "q.get()", f"(q.get() + {k}) % 64", "q.get() ^ 1", f"w.row * 8 + w.col", f"w.col * 8 + w.row"])
            return [f"v = v + s[{idx}]"]
        if kind == "sync":
            return ["az.syncthreads()"]
        if kind == "helper_sync":
            return ["_sync()"]
        if kind == "reduce":
            return ["x = az.block.reduce(v, \"sum\")", "v = v + x"]
        if kind == "unsafe":
            idx = rng.choice(["thread.tid_y(), thread.tid_x()", "thread.tid_x(), thread.tid_y()", f"thread.tid_y(), (thread.tid_x() + {k}) % 8",
                              "thread.tid_y() // 2, thread.tid_x()"])
            one = rng.choice(["thread.tid_y() * 8 + thread.tid_x()", "thread.tid_x() * 8 + thread.tid_y()", "thread.tid_x() + thread.tid_y()"])
            return ["with az.unsafe():", rng.choice([f"    t[{idx}] = v", f"    s[{one}] = v"])]
        body = [ln for _ in range(rng.randint(1, 3)) for ln in self.stmt(depth + 1)]
        if kind == "tdep_if":
            head = rng.choice([f"if w.row < {k}:", f"if w.col < {k}:", f"if q.get() < {k * 8}:"])
        elif kind == "uni_if":
            head = f"if n > {rng.randint(0, 6)}:"
        else:
            head = f"for _k{depth} in range({rng.randint(1, 3)}):"
        return [head] + ["    " + ln for ln in body]

    def module(self) -> str:
        lines = [ln for _ in range(self.rng.randint(2, 7)) for ln in self.stmt(0)]
        return THEAD.format(cols=self.rng.choice([8, 9])) + "".join(f"    {ln}\n" for ln in lines) + TTAIL


PHEAD = '''import anodize as az
from anodize import DisjointSlice2D, Index2D, Slice2D, f32, func, i64, kernel, launch_contract, thread

K = {k}


@func
def _put(c: DisjointSlice2D[f32], ij: Index2D, v: f32) -> None:
    if ij in c:
        c[ij] += v


@launch_contract(domain=2, block=(4, 2))
@kernel
def case(a: Slice2D[f32], c: DisjointSlice2D[f32], n: i64) -> None:
    v = f32(1.0)
'''


class OwnedGen(Gen):
    """Per-thread tiles of one 2-D output (shapes from literals and a module constant, groups),
    `t.at(r, s)` in constant and runtime loops, `index_2d`, helpers taking the index."""

    def shape(self) -> str:
        rng = self.rng
        tr, tc = rng.choice([1, 2, 4]), rng.choice([1, 2, 4])
        if rng.random() < 0.3:
            return rng.choice(["K, 2", "2, K", "K, K"])
        if rng.random() < 0.4:
            return f"{tr}, {tc}, {rng.choice([d for d in (1, 2, 4) if tr % d == 0])}, {rng.choice([d for d in (1, 2, 4) if tc % d == 0])}"
        return f"{tr}, {tc}"

    def stmt(self, depth: int) -> list[str]:
        rng = self.rng
        kind = rng.choices(["tile", "plain", "helper", "uni_if"], [5, 2, 1, 1])[0]
        if kind == "plain":
            return ["ij = thread.index_2d()", "if ij in c:", "    c[ij] += v"]
        name = f"t{rng.randint(0, 2)}"
        r, q = rng.choice([("r", "q"), ("q", "r"), ("0", "q"), ("r", "0")])
        loop = [f"{name} = thread.tile_2d({self.shape()})", "for r in range(2):", "    for q in range(2):",
                f"        ij = {name}.at({r}, {q})"]
        if kind == "helper":
            return loop + ["        _put(c, ij, v)"]
        if kind == "uni_if":
            return [f"if n > {rng.randint(0, 6)}:"] + ["    " + ln for ln in loop + ["        if ij in c:", "            c[ij] += v"]]
        return loop + ["        if ij in c:", "            c[ij] += v"]

    def module(self) -> str:
        lines = [ln for _ in range(self.rng.randint(1, 3)) for ln in self.stmt(0)]
        return PHEAD.format(k=self.rng.choice([1, 2, 4])) + "".join(f"    {ln}\n" for ln in lines)


def run_case(src: str, tmp: Path, n: int) -> str | None:
    """The debug device's race report for an accepted case, else None."""
    import numpy as np

    import anodize as az

    path = tmp / f"race_case_{n}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(f"race_case_{n}", path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    dev = az.device("debug")
    try:
        if "block=(4, 2)" in src:
            c = dev.zeros((13, 11), az.f32)
            a = dev.to_device(np.zeros((13, 11), np.float32))
            mod.case[az.LaunchConfig((3, 2), (4, 2))](a, c, n % 7)
        elif "index_in_block_2d" in src:
            c = dev.zeros((8, 8), az.f32)
            a = dev.to_device(np.arange(64, dtype=np.float32).reshape(8, 8))
            mod.case[az.LaunchConfig.for_shape((8, 8), block=(8, 8))](a, c, n % 7)
        else:
            c = dev.zeros(64 if "shared" in src else 100, az.f32)
            a = dev.to_device(np.arange(64, dtype=np.float32))
            grid = 1 if "shared" in src else 2
            mod.case[az.LaunchConfig(grid=grid, block=64, shared_mem=256 if "dynamic" in src else 0)](a, c, n % 7)
        dev.synchronize()
    except az.KernelFault as e:
        return str(e) if "data race" in str(e) else None
    return None


def main(argv: list[str] | None = None) -> int:
    from anodize.checker.api import check_source

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--kind", choices=("shared", "global", "shared2d", "owned"), default="shared")
    ns = ap.parse_args(argv)
    make = {"shared": Gen, "global": GlobalGen, "shared2d": TileGen, "owned": OwnedGen}[ns.kind]
    rng = random.Random(ns.seed)
    tmp = Path(tempfile.mkdtemp(prefix="anodize-race-oracle-"))
    out = Path(ns.out) if ns.out else tmp
    accepted = rejected = holes = 0
    for n in range(ns.cases):
        src = make(rng).module()
        errs = [d for d in check_source(src, f"race_case_{n}.py") if d.severity == "error"]
        if errs:
            rejected += 1
            continue
        accepted += 1
        report = run_case(src, tmp, n)
        if report is not None:
            holes += 1
            (out / f"hole_{n}.py").write_text(f"# debug device: {report}\n" + src)
            print(f"HOLE case {n}: {report[:160]}")
    print(f"cases {ns.cases}: accepted {accepted} (run on the debug device), rejected {rejected}, holes {holes}"
          + (f" (sources in {out})" if holes else ""))
    return 1 if holes else 0


if __name__ == "__main__":
    sys.exit(main())
