"""Differential testing: generated accepted kernels, run on every backend present, compared.

    python tools/difftest.py [--programs 200] [--seed 0] [--n 257] [--out DIR] [--require-gpu]

Each program is a 1-D kernel over one scalar type T (i32 i64 u32 u64 f32 f64):
locals, a `for`-range loop with a conditional `break`, `if`/`else`, conditional
expressions, `+ - * // % << >> & | ^ ~`, unary minus, `abs`/`min`/`max`, casts
and (for floats) `/`, `math.sqrt`, `math.fabs`, `math.exp/log/sin/cos`.  The
generator keeps a tree of the program, so the same tree is both printed as an
anodize kernel and evaluated by a reference interpreter written in Python with
NumPy scalars, following docs/language.md (wrapping ints, Python floor division,
clamped shifts, IEEE floats).

Comparisons (exact for integers; floats within the docs/language.md ULP table,
plus contraction slack on the GPU, see `FLOAT_ULPS`; when exp/log/sin/cos feed
later cancellation a relative 1e-4 (f32) / 1e-12 (f64) is accepted and counted
separately as `ok-within-propagated-math-tolerance`):
- always: CPU backend vs the reference interpreter;
- when a GPU is present: GPU (sm_90 PTX) vs CPU backend, and GPU vs reference.

Writes `difftest.json` and `difftest.md` under `--out` (default /tmp/anodize-difftest).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

INT_BITS = {"i32": (32, True), "i64": (64, True), "u32": (32, False), "u64": (64, False)}
NP = {"i32": np.int32, "i64": np.int64, "u32": np.uint32, "u64": np.uint64, "f32": np.float32, "f64": np.float64}
# ULPs allowed between two backends (docs/language.md's libdevice table for math; the
# arithmetic ops are exact on both, but the NVPTX backend contracts a*b+c into fma at -O3,
# which can differ from the separately rounded CPU result: `CONTRACT_ULPS` and a relative
# tolerance absorb that and are reported separately).
FLOAT_ULPS = {"sqrt": 0, "exp": 2, "log": 1, "sin": 2, "cos": 2, "fabs": 0}
CONTRACT_REL = {"f32": 1e-5, "f64": 1e-13}
PROPAGATING = {"exp", "log", "sin", "cos"}
PROPAGATED_REL = {"f32": 1e-4, "f64": 1e-12}


# ---- the program tree, printed and evaluated ------------------------------------------------
class Prog:
    def __init__(self, rng: random.Random, t: str) -> None:
        self.r, self.t = rng, t
        self.is_int = t in INT_BITS
        self.math_used: set[str] = set()

    # generation
    def expr(self, d: int, names: list[str]) -> Any:
        r = self.r
        if d <= 0 or r.random() < 0.25:
            k = r.random()
            if k < 0.55:
                return ("var", r.choice(names))
            if k < 0.7:
                return ("r",)
            return ("lit", self.lit())
        k = r.random()
        if k < 0.55:
            ops = ["+", "-", "*", "//", "%", "<<", ">>", "&", "|", "^"] if self.is_int else ["+", "-", "*", "/"]
            return ("bin", r.choice(ops), self.expr(d - 1, names), self.expr(d - 1, names))
        if k < 0.65:
            return ("un", r.choice(["-", "~"] if self.is_int else ["-"]), self.expr(d - 1, names))
        if k < 0.78:
            return ("ifexp", self.cond(d - 1, names), self.expr(d - 1, names), self.expr(d - 1, names))
        if k < 0.9 or self.is_int:
            f = r.choice(["abs", "min", "max"])
            n = 1 if f == "abs" else 2
            return ("call", f, [self.expr(d - 1, names) for _ in range(n)])
        f = r.choice(["sqrt", "fabs", "exp", "log", "sin", "cos"])
        self.math_used.add(f)
        return ("call", f, [self.expr(d - 1, names)])

    def lit(self) -> Any:
        r = self.r
        if self.is_int:
            bits, signed = INT_BITS[self.t]
            pool = [0, 1, 2, 3, 5, 7, 31, 32, 33, 63, 64, 100, 255, (1 << (bits - 1)) - 1]
            v = r.choice(pool)
            return -v if signed and r.random() < 0.3 else v
        return r.choice([0.0, 1.0, 0.5, 2.0, -1.5, 3.25, 10.0, 1e-3, 1e3])

    def cond(self, d: int, names: list[str]) -> Any:
        r = self.r
        k = r.random()
        if d > 0 and k < 0.2:
            return (r.choice(["and", "or"]), self.cond(d - 1, names), self.cond(d - 1, names))
        if d > 0 and k < 0.3:
            return ("not", self.cond(d - 1, names))
        return ("cmp", r.choice(["<", "<=", ">", ">=", "==", "!="]), self.expr(min(d, 1), names), self.expr(min(d, 1), names))

    def body(self, d: int, names: list[str], in_loop: bool) -> list[Any]:
        r = self.r
        out: list[Any] = []
        for _ in range(r.randint(1, 3)):
            k = r.random()
            if k < 0.5 or d <= 0:
                out.append(("assign", r.choice(["x", "y", "acc"]), self.expr(2, names)))
            elif k < 0.75:
                out.append(("if", self.cond(1, names), self.body(d - 1, names, in_loop), self.body(d - 1, names, in_loop) if r.random() < 0.5 else []))
            elif k < 0.9 and not in_loop:
                out.append(("for", r.randint(0, 5), self.body(d - 1, names, True)))
            elif in_loop:
                out.append(("break_if", self.cond(1, names)))
        return out

    # printing
    def src_e(self, e: Any) -> str:
        t = self.t
        k = e[0]
        if k == "var":
            return e[1]
        if k == "r":
            return f"{t}(r)"
        if k == "lit":
            return f"{t}({e[1]!r})"
        if k == "bin":
            op, a, b = e[1], self.src_e(e[2]), self.src_e(e[3])
            if op in ("//", "%"):
                return f"({a} {op} ({b} | 1))"
            return f"({a} {op} {b})"
        if k == "un":
            return f"({e[1]}{self.src_e(e[2])})"
        if k == "ifexp":
            return f"({self.src_e(e[2])} if {self.src_c(e[1])} else {self.src_e(e[3])})"
        if k == "call":
            f = e[1]
            args = ", ".join(self.src_e(a) for a in e[2])
            return f"{f}({args})" if f in ("abs", "min", "max") else f"math.{f}({args})"
        raise AssertionError(e)

    def src_c(self, c: Any) -> str:
        if c[0] == "cmp":
            return f"({self.src_e(c[2])} {c[1]} {self.src_e(c[3])})"
        if c[0] == "not":
            return f"(not {self.src_c(c[1])})"
        return f"({self.src_c(c[1])} {c[0]} {self.src_c(c[2])})"

    def src_body(self, body: list[Any], ind: int, loop_var: bool) -> list[str]:
        pad = "    " * ind
        lines: list[str] = []
        for s in body:
            if s[0] == "assign":
                lines.append(f"{pad}{s[1]} = {self.src_e(s[2])}")
            elif s[0] == "if":
                lines.append(f"{pad}if {self.src_c(s[1])}:")
                lines += self.src_body(s[2], ind + 1, loop_var) or [pad + "    pass"]
                if s[3]:
                    lines.append(f"{pad}else:")
                    lines += self.src_body(s[3], ind + 1, loop_var)
            elif s[0] == "for":
                lines.append(f"{pad}for r in range({s[1]}):")
                lines += self.src_body(s[2], ind + 1, True) or [pad + "    pass"]
            elif s[0] == "break_if":
                lines.append(f"{pad}if {self.src_c(s[1])}:")
                lines.append(f"{pad}    break")
        return lines

    # evaluation (NumPy scalars of type T; Python ints for integer types, wrapped)
    def wrap(self, v: int) -> int:
        bits, signed = INT_BITS[self.t]
        v &= (1 << bits) - 1
        if signed and v >> (bits - 1):
            v -= 1 << bits
        return v

    def ev(self, e: Any, env: dict[str, Any]) -> Any:
        k = e[0]
        if k == "var":
            return env[e[1]]
        if k == "r":
            return self.wrap(env["r"]) if self.is_int else NP[self.t](env["r"])
        if k == "lit":
            return self.wrap(e[1]) if self.is_int else NP[self.t](e[1])
        if k == "ifexp":
            return self.ev(e[2], env) if self.evc(e[1], env) else self.ev(e[3], env)
        if k == "un":
            v = self.ev(e[2], env)
            if self.is_int:
                return self.wrap(-v if e[1] == "-" else ~v)
            return NP[self.t](-v)
        if k == "call":
            args = [self.ev(a, env) for a in e[2]]
            f = e[1]
            if self.is_int:
                return self.wrap({"abs": lambda: abs(args[0]), "min": lambda: min(args), "max": lambda: max(args)}[f]())
            ty = NP[self.t]
            if f == "min":
                return ty(np.fmin(args[0], args[1]))
            if f == "max":
                return ty(np.fmax(args[0], args[1]))
            if f in ("abs", "fabs"):
                return ty(np.abs(args[0]))
            return ty(getattr(np, f)(args[0]))
        a, b = self.ev(e[2], env), self.ev(e[3], env)
        op = e[1]
        if not self.is_int:
            ty = NP[self.t]
            return ty({"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op](a, b))
        bits, signed = INT_BITS[self.t]
        if op in ("//", "%"):
            b = self.wrap(b | 1)
            return self.wrap(a // b if op == "//" else a % b)
        if op in ("<<", ">>"):
            cnt = b & ((1 << bits) - 1)  # the count as an unsigned value of T
            if cnt >= bits:
                return 0 if op == "<<" or not signed or a >= 0 else -1
            return self.wrap(a << cnt if op == "<<" else a >> cnt)
        return self.wrap({"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b}[op])

    def evc(self, c: Any, env: dict[str, Any]) -> bool:
        if c[0] == "cmp":
            a, b = self.ev(c[2], env), self.ev(c[3], env)
            return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[c[1]])
        if c[0] == "not":
            return not self.evc(c[1], env)
        if c[0] == "and":
            return self.evc(c[1], env) and self.evc(c[2], env)
        return self.evc(c[1], env) or self.evc(c[2], env)

    def run_body(self, body: list[Any], env: dict[str, Any]) -> bool:
        """Executes `body`; returns True when a `break` fired."""
        for s in body:
            if s[0] == "assign":
                env[s[1]] = self.ev(s[2], env)
            elif s[0] == "if":
                if self.run_body(s[2] if self.evc(s[1], env) else s[3], env):
                    return True
            elif s[0] == "for":
                for r in range(s[1]):
                    env["r"] = r
                    if self.run_body(s[2], env):
                        break
            elif s[0] == "break_if":
                if self.evc(s[1], env):
                    return True
        return False


def make_program(seed: int) -> tuple[Prog, str, list[Any], Any]:
    rng = random.Random(seed)
    t = rng.choice(list(NP))
    p = Prog(rng, t)
    names = ["x", "y", "acc", "s"]
    body = p.body(2, names, False)
    final = p.expr(2, names)
    init = p.lit()
    lines = [
        "import math",
        "from anodize import DisjointSlice, Slice, f32, f64, i32, i64, u32, u64, kernel, launch_contract, thread",
        "",
        "",
        "@launch_contract(domain=1, block=64, requires=lambda a, b, s, out: len(a) == len(out) and len(b) == len(out))",
        "@kernel",
        f"def kern(a: Slice[{t}], b: Slice[{t}], s: {t}, out: DisjointSlice[{t}]) -> None:",
        "    i = thread.index_1d()",
        "    if i in out:",
        f"        x: {t} = a[i]",
        f"        y: {t} = b[i]",
        f"        acc: {t} = {t}({init!r})",
        "        r = 0",
    ]
    lines += p.src_body(body, 2, False)
    lines.append(f"        out[i] = {p.src_e(final)}")
    return p, "\n".join(lines) + "\n", body, (final, init)


def reference(p: Prog, body: list[Any], final: Any, init: Any, a: np.ndarray, b: np.ndarray, s: Any) -> np.ndarray:
    out = np.zeros(len(a), dtype=NP[p.t])
    with np.errstate(all="ignore"):
        for k in range(len(a)):
            if p.is_int:
                env: dict[str, Any] = {"x": int(a[k]), "y": int(b[k]), "s": int(s), "acc": p.wrap(init), "r": 0}
            else:
                ty = NP[p.t]
                env = {"x": ty(a[k]), "y": ty(b[k]), "s": ty(s), "acc": ty(init), "r": 0}
            p.run_body(body, env)
            v = p.ev(final, env)
            out[k] = np.array(v).astype(np.uint64).view(np.int64).astype(NP[p.t]) if (p.is_int and v < 0 and p.t.startswith("u")) else v
    return out


def inputs(p: Prog, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, Any]:
    ty = NP[p.t]
    if p.is_int:
        info = np.iinfo(ty)
        def one() -> np.ndarray:
            small = rng.integers(max(info.min, -100), 100, n, endpoint=True)
            big = rng.integers(info.min, info.max, n, endpoint=True, dtype=ty)
            return np.where(rng.random(n) < 0.6, small.astype(ty), big).astype(ty)
        return one(), one(), ty(rng.integers(max(info.min, -50), 50))
    def onef() -> np.ndarray:
        v = rng.standard_normal(n) * rng.choice([1.0, 10.0, 1e3])
        v[rng.random(n) < 0.02] = rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan])
        return v.astype(ty)
    return onef(), onef(), ty(rng.standard_normal())


def ulp_diff(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """ULP distance between two float arrays (NaN == NaN counts as 0)."""
    it = np.int32 if x.dtype == np.float32 else np.int64
    xi, yi = x.view(it).astype(np.int64), y.view(it).astype(np.int64)
    top = np.int64(np.iinfo(it).min)
    xi = np.where(xi < 0, top - xi, xi)
    yi = np.where(yi < 0, top - yi, yi)
    d = np.abs(xi.astype(object) - yi.astype(object)).astype(float) if it is np.int64 else np.abs(xi - yi).astype(float)
    both_nan = np.isnan(x) & np.isnan(y)
    return np.where(both_nan, 0.0, d)


def compare(p: Prog, got: np.ndarray, want: np.ndarray, gpu: bool) -> tuple[bool, str]:
    if p.is_int:
        bad = np.nonzero(got != want)[0]
        return (len(bad) == 0, "" if not len(bad) else f"{len(bad)} differ, first at {bad[0]}: {got[bad[0]]} vs {want[bad[0]]}")
    tol = max([FLOAT_ULPS[f] for f in p.math_used] + [0])
    u = ulp_diff(got, want)
    ok = u <= tol
    if gpu:  # fma contraction: accept a small relative error too
        with np.errstate(all="ignore"):
            rel = np.abs(got.astype(np.float64) - want.astype(np.float64)) / np.maximum(np.abs(want.astype(np.float64)), 1e-30)
        ok |= rel <= CONTRACT_REL[p.t] * 16
    if p.math_used & PROPAGATING and not ok.all():
        # a transcendental's documented ulps grow through later cancellation and division
        # (seen: sin(1) one ulp apart, then `x - sin(1)` and two divisions: 5 ulp)
        with np.errstate(all="ignore"):
            rel = np.abs(got.astype(np.float64) - want.astype(np.float64)) / np.maximum(np.abs(want.astype(np.float64)), 1e-30)
        loose = ok | (rel <= PROPAGATED_REL[p.t])
        if loose.all():
            return (True, "propagated")
    bad = np.nonzero(~ok)[0]
    return (len(bad) == 0, "" if not len(bad) else f"{len(bad)} beyond {tol} ulp, first at {bad[0]}: {got[bad[0]]!r} vs {want[bad[0]]!r} ({u[bad[0]]:.0f} ulp)")


_TMP = Path(tempfile.mkdtemp(prefix="anodize-difftest-"))


def load(src: str, seed: int) -> Any:
    name = f"azdiff_{os.getpid()}_{seed}"
    path = _TMP / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_on(dev: Any, kern: Any, a: np.ndarray, b: np.ndarray, s: Any) -> np.ndarray:
    import anodize as az

    da, db = dev.to_device(a), dev.to_device(b)
    out = dev.zeros(len(a), a.dtype)
    kern[az.LaunchConfig.for_num_elems(len(a), block=64)](da, db, s, out)
    dev.synchronize()
    return np.asarray(out.to_host())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=257)
    ap.add_argument("--out", default="/tmp/anodize-difftest")
    ap.add_argument("--require-gpu", action="store_true")
    ap.add_argument("--time-limit", type=float, default=0)
    ns = ap.parse_args(argv)
    import anodize as az
    from anodize.checker.api import check_source
    from anodize.runtime import gpu_available

    t0 = time.time()
    have_gpu = gpu_available()
    if ns.require_gpu and not have_gpu:
        print("difftest: --require-gpu but no GPU is present", file=sys.stderr)
        return 2
    cpu = az.device("cpu")
    gpu = az.device(0) if have_gpu else None
    tally: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    out_dir = Path(ns.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for k in range(ns.programs):
        if ns.time_limit and time.time() - t0 > ns.time_limit:
            tally["stopped_by_time_limit"] = 1
            break
        seed = ns.seed + k
        p, src, body, (final, init) = make_program(seed)
        tally["generated"] += 1
        tally["type:" + p.t] += 1
        diags = [d for d in check_source(src, f"difftest_{seed}.py") if d.severity == "error"]
        if diags:
            tally["rejected_by_checker"] += 1
            failures.append({"seed": seed, "kind": "rejected", "detail": diags[0].code + " " + diags[0].message, "src": src})
            continue
        rng = np.random.default_rng(seed)
        a, b, s = inputs(p, rng, ns.n)
        try:
            mod = load(src, seed)
            want = reference(p, body, final, init, a, b, s)
            got_cpu = run_on(cpu, mod.kern, a, b, s)
            results = [("cpu-vs-reference", got_cpu, want, False)]
            if gpu is not None:
                got_gpu = run_on(gpu, mod.kern, a, b, s)
                results += [("gpu-vs-cpu", got_gpu, got_cpu, True), ("gpu-vs-reference", got_gpu, want, True)]
        except Exception:
            tally["errors"] += 1
            failures.append({"seed": seed, "kind": "error", "detail": traceback.format_exc(limit=6), "src": src})
            continue
        tally["compared_programs"] += 1
        for name, got, ref, is_gpu in results:
            ok, why = compare(p, got, ref, is_gpu)
            tally[f"{name}:{'ok' if ok else 'mismatch'}"] += 1
            if why == "propagated":
                tally[f"{name}:ok-within-propagated-math-tolerance"] += 1
            tally["compared_elements"] += len(got)
            if not ok:
                failures.append({"seed": seed, "kind": name, "type": p.t, "detail": why, "src": src})
        sys.modules.pop(mod.__name__, None)
    summary = {
        "mode": "gpu+cpu+reference" if gpu is not None else "cpu+reference (no GPU present)",
        "seconds": round(time.time() - t0, 1),
        **dict(sorted(tally.items())),
        "failures": failures[:50],
    }
    (out_dir / "difftest.json").write_text(json.dumps(summary, indent=1, default=str))
    md = [f"# difftest ({summary['mode']})", "", "| figure | value |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in summary.items() if k != "failures"]
    md += ["", f"## Failures ({len(failures)})", ""]
    for f in failures[:20]:
        md += [f"### seed {f['seed']}: {f['kind']}", "", "```", str(f["detail"]).strip(), "```", "", "```python", f["src"].rstrip(), "```", ""]
    (out_dir / "difftest.md").write_text("\n".join(md) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}, indent=1))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
