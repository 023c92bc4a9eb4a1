"""Racy mutants of the shared-memory kernels: the unsafe tier's mutation test.

    python tools/mutate_races.py [--json FILE] [--share N] [--mutants-dir DIR] [PATH...]

Every accepted module among examples/*.py and fixtures/accept/*.py that uses
`az.shared.array` is mutated at each shared-array write `buf[idx] = v` that every
thread of the block runs (no `if`/`while` around it) with a thread-dependent `v`,
one mutant per site and class.  Each mutant races (or, for `helper_barrier`,
diverges at a barrier) on real hardware, by machine integer semantics:

  factor          idx -> i32((idx) * 65536 * 65536)           0 for every thread (i32 wraps)
  literal         idx -> i32((idx) * 4294967296)               0 (the weak literal is 2**32)
  narrow_zero     idx -> i32(i64(idx) * 4294967296)            0 (a narrowing cast)
  narrow_half     t   -> i32(i64(t) // 2 + 4294967296)         t // 2: threads 2k and 2k+1 collide
  unsigned_guard  buf[t] = v ->  d = u32(t) - u32(1)
                                 if d < 1: buf[t] = v          (t = 1 only: u32 wraps at t = 0)
                                 else: buf[t + 1] = v          (t = 0 writes element 1 too)
  helper_index    t   -> t + parity()                          an @az.func returning 1 or 0 from a
                                                               branch on the global index's parity
  dynamic_helper  the array becomes dynamic (`az.shared.array(0, T)`) and a helper reading the
                  dynamic region at `(tid + 1) % n` is called right after the write
  helper_barrier  az.syncthreads() -> if parity() == 1: az.syncthreads()

and the v1 features' classes of tools/mutate_races_v1.py (safe_read_next, leader_widen,
barrier_leader, grid_stride_exit, range_exit, tile_mixed), over the modules that use them.

`t` is an axis that is a plain thread id (`t = thread.tid_x()`, `thread.tid_y()`),
on the block's x axis for `helper_index`/`unsigned_guard` (its extent even).  The
checker must reject every mutant (`check_source` returns an error); survivors are
listed.  The barrier-removal and barrier-moving mutants of tools/mutate.py are
counted beside them (some of those need racecheck: see that tool).
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT))

from mutate import _replace, barrier_mutants  # noqa: E402
from mutate_races_v1 import CLASSES as V1_CLASSES, v1_mutants, v1_paths  # noqa: E402

CLASSES = (
    "factor",
    "literal",
    "narrow_zero",
    "narrow_half",
    "unsigned_guard",
    "helper_index",
    "dynamic_helper",
    "helper_barrier",
) + V1_CLASSES
_TIDS = {"tid_x": 0, "tid_y": 1, "tid_z": 2}


@dataclass
class Mutant:
    path: str
    line: int
    cls: str
    source: str
    rejected: bool | None = None
    codes: tuple[str, ...] = ()


def _errors(src: str, path: str) -> list[Any]:
    from anodize.checker.api import check_source

    return [d for d in check_source(src, path) if d.severity == "error"]


def shared_paths() -> list[Path]:
    paths = sorted((ROOT / "examples").glob("*.py")) + sorted((ROOT / "fixtures" / "accept").glob("*.py"))
    shared = [p for p in paths if "shared.array" in p.read_text()]
    return shared + [p for p in v1_paths(ROOT) if p not in shared]


# ---- sites -----------------------------------------------------------------------------------


@dataclass
class Site:
    fn: ast.FunctionDef
    stmt: ast.Assign
    target: ast.Subscript
    array: str
    alloc: ast.Call
    axes: list[ast.expr]
    tid_axes: dict[int, int]  # axis position -> thread id component (0 x, 1 y, 2 z)


def _tid_names(fn: ast.FunctionDef) -> dict[str, int]:
    """Locals bound once, to `thread.tid_x()` (or y, z)."""
    binds: Counter[str] = Counter()
    comp: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        binds[n.id] += 1
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                c = _tid_call(node.value)
                if c is not None:
                    comp[node.targets[0].id] = c
        elif isinstance(node, ast.For):
            for n in ast.walk(node.target):
                if isinstance(n, ast.Name):
                    binds[n.id] += 2
    return {k: v for k, v in comp.items() if binds[k] == 1}


def _tid_call(node: ast.AST) -> int | None:
    if isinstance(node, ast.Call) and not node.args and isinstance(node.func, ast.Attribute):
        return _TIDS.get(node.func.attr)
    return None


def _arrays(fn: ast.FunctionDef) -> dict[str, ast.Call]:
    out: dict[str, ast.Call] = {}
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func).endswith("shared.array")
        ):
            out[node.targets[0].id] = node.value
    return out


def _unconditional(fn: ast.FunctionDef) -> list[ast.stmt]:
    """Statements of `fn` under no `if`/`while`/`for` (only `with` blocks)."""
    out: list[ast.stmt] = []

    def walk(body: list[ast.stmt]) -> None:
        for s in body:
            out.append(s)
            if isinstance(s, ast.With):
                walk(s.body)

    walk(fn.body)
    return out


def sites(tree: ast.Module, src: str, path: str) -> list[Site]:
    from anodize.checker.kernel_model import ModuleModel

    model = ModuleModel(tree, path, src)
    found: list[Site] = []
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        info = model.by_node.get(fn)
        if info is None or info.kind != "kernel":
            continue
        arrays = _arrays(fn)
        tids = _tid_names(fn)
        for s in _unconditional(fn):
            if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Subscript)):
                continue
            t = s.targets[0]
            if not (isinstance(t.value, ast.Name) and t.value.id in arrays):
                continue
            v = model.values.get(s.value)
            if v is None or not v.tdep:
                continue  # a block-uniform value: every thread writing it is benign
            axes = list(t.slice.elts) if isinstance(t.slice, ast.Tuple) else [t.slice]
            tid_axes = {}
            for n, e in enumerate(axes):
                c = tids.get(e.id) if isinstance(e, ast.Name) else _tid_call(e)
                if c is not None:
                    tid_axes[n] = c
            found.append(Site(fn, s, t, t.value.id, arrays[t.value.id], axes, tid_axes))
    return found


def _block(fn: ast.FunctionDef) -> tuple[int, ...] | None:
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("launch_contract"):
            for k in d.keywords:
                if k.arg == "block":
                    try:
                        b = ast.literal_eval(k.value)
                    except ValueError:
                        return None
                    return (b,) if isinstance(b, int) else tuple(b)
    return None


def _domain(fn: ast.FunctionDef) -> int:
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and ast.unparse(d.func).endswith("launch_contract"):
            for k in d.keywords:
                if k.arg == "domain" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, int):
                    return k.value.value
    return 1


# ---- helpers appended to a mutant ------------------------------------------------------------


def _parity_helper(domain: int) -> str:
    make, get = ("index_2d", "w.col") if domain == 2 else ("index_1d", "w.get()")
    return f"""

@az.func
def _mut_parity() -> az.i32:
    w = az.thread.{make}()
    g = {get}
    if g % 2 == 0:
        return 1
    return 0
"""


def _dyn_helper(elem: str, n: int) -> str:
    return f"""

@az.func
def _mut_dyn_next() -> az.{elem}:
    with az.unsafe():
        d = az.shared.array(0, az.{elem})
        v = d[(az.thread.tid_x() + 1) % {n}]
    return v
"""


# ---- mutants ---------------------------------------------------------------------------------


def _axes_text(site: Site, axes: list[str]) -> str:
    return ", ".join(axes) if len(axes) > 1 else axes[0]


def _with_index(src: str, site: Site, axes: list[str]) -> str:
    return _replace(src, site.target.slice, _axes_text(site, axes))


def mutants(path: Path) -> list[Mutant]:
    src = path.read_text()
    tree = ast.parse(src)
    rel = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    lines = src.splitlines(keepends=True)
    out: list[Mutant] = []

    def add(line: int, cls: str, text: str) -> None:
        out.append(Mutant(rel, line, cls, text))

    for site in sites(tree, src, str(path)):
        line = site.stmt.lineno
        texts = [ast.unparse(e) for e in site.axes]
        add(line, "factor", _with_index(src, site, [f"az.i32(({x}) * 65536 * 65536)" for x in texts]))
        add(line, "literal", _with_index(src, site, [f"az.i32(({x}) * 4294967296)" for x in texts]))
        add(line, "narrow_zero", _with_index(src, site, [f"az.i32(az.i64({x}) * 4294967296)" for x in texts]))
        block = _block(site.fn)
        for axis, comp in site.tid_axes.items():
            half = list(texts)
            half[axis] = f"az.i32(az.i64({texts[axis]}) // 2 + 4294967296)"
            add(line, "narrow_half", _with_index(src, site, half))
        x_axes = [a for a, c in site.tid_axes.items() if c == 0]
        if x_axes and block is not None and block[0] % 2 == 0 and block[0] >= 2:
            axis = x_axes[0]
            t = texts[axis]
            a, b = site.stmt.lineno - 1, site.stmt.end_lineno  # type: ignore[assignment]
            indent = lines[a][: len(lines[a]) - len(lines[a].lstrip())]
            other = list(texts)
            other[axis] = f"{t} + 1"
            value = ast.unparse(site.stmt.value)
            arr = site.array
            guard = (
                f"{indent}_mut_d = az.u32({t}) - az.u32(1)\n"
                f"{indent}if _mut_d < 1:\n"
                f"{indent}    {arr}[{_axes_text(site, texts)}] = {value}\n"
                f"{indent}else:\n"
                f"{indent}    {arr}[{_axes_text(site, other)}] = {value}\n"
            )
            add(line, "unsigned_guard", "".join(lines[:a]) + guard + "".join(lines[b:]))
            bumped = list(texts)
            bumped[axis] = f"{t} + _mut_parity()"
            add(line, "helper_index", _with_index(src, site, bumped) + _parity_helper(_domain(site.fn)))
        shape = site.alloc.args[0] if site.alloc.args else None
        if len(site.axes) == 1 and 0 in site.tid_axes and isinstance(shape, ast.Constant) and isinstance(shape.value, int):
            if shape.value >= 2 and len(site.alloc.args) > 1 and block is not None and block[0] >= 2:
                elem = ast.unparse(site.alloc.args[1]).split(".")[-1]
                text = _replace(src, shape, "0")  # the allocation precedes the write: offsets above hold
                wl = site.stmt.end_lineno  # type: ignore[assignment]
                tl = text.splitlines(keepends=True)
                indent = tl[site.stmt.lineno - 1][: len(tl[site.stmt.lineno - 1]) - len(tl[site.stmt.lineno - 1].lstrip())]
                n = min(shape.value, block[0])
                text = "".join(tl[:wl]) + f"{indent}_mut_v = _mut_dyn_next()\n" + "".join(tl[wl:]) + _dyn_helper(elem, n)
                add(line, "dynamic_helper", text)
    # the v1 features' races (tools/mutate_races_v1.py)
    for line, cls, text in v1_mutants(src, tree, _block, _domain, _parity_helper):
        add(line, cls, text)
    # a barrier under a helper's thread-dependent result
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        for node in ast.walk(fn):
            for field in ("body", "orelse"):
                body = getattr(node, field, None)
                if not isinstance(body, list):
                    continue
                for s in body:
                    if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and ast.unparse(s.value.func).endswith("syncthreads"):
                        a, b = s.lineno - 1, s.end_lineno
                        indent = lines[a][: len(lines[a]) - len(lines[a].lstrip())]
                        text = "".join(lines[:a]) + f"{indent}if _mut_parity() == 1:\n    " + "".join(lines[a:b]) + "".join(lines[b:])  # type: ignore[misc]
                        add(s.lineno, "helper_barrier", text + _parity_helper(_domain(fn)))
    return out


def run(paths: list[Path], share: float = 1.0, seed: int = 0) -> dict[str, Any]:
    report: dict[str, Any] = {"files": 0, "files_skipped_not_accepted": [], "race": {}, "barrier": {}}
    tally: Counter[str] = Counter()
    survivors: list[dict[str, Any]] = []
    rng = random.Random(seed)
    for p in paths:
        src = p.read_text()
        if _errors(src, str(p)):
            report["files_skipped_not_accepted"].append(str(p))
            continue
        report["files"] += 1
        for m in mutants(p):
            if share < 1.0 and rng.random() >= share:
                continue
            errs = _errors(m.source, str(p))
            m.rejected, m.codes = bool(errs), tuple(sorted({d.code for d in errs}))
            tally["total"] += 1
            tally["rejected" if m.rejected else "survived"] += 1
            tally[f"{m.cls}:{'rejected' if m.rejected else 'survived'}"] += 1
            if not m.rejected:
                survivors.append({"path": m.path, "line": m.line, "class": m.cls})
    rate = tally["rejected"] / tally["total"] if tally["total"] else None
    report["race"] = {**dict(sorted(tally.items())), "rate": rate, "survivors": survivors}
    btally: Counter[str] = Counter()
    for p in paths:
        if share < 1.0 or "examples" not in p.parts or "syncthreads" not in p.read_text():
            continue
        for bm in barrier_mutants(p):
            btally["total"] += 1
            btally["static" if _errors(bm.source, str(p)) else "needs_racecheck"] += 1
    report["barrier"] = dict(btally)
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--json", default=None)
    ap.add_argument("--share", type=float, default=1.0, help="run this share of the mutants (sampled)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--mutants-dir", default=None, help="also write every mutant here (for tools/sanitize.py --mutants)")
    ns = ap.parse_args(argv)
    paths = [Path(p).resolve() for p in ns.paths] or shared_paths()
    if ns.mutants_dir:
        out = Path(ns.mutants_dir)
        out.mkdir(parents=True, exist_ok=True)
        for p in paths:
            for m in mutants(p):
                name = f"{p.stem}_{m.cls}_L{m.line}.py"
                (out / name).write_text(f"# racy mutant of {m.path}: {m.cls} at line {m.line}\n" + m.source)
    rep = run(paths, ns.share, ns.seed)
    r, b = rep["race"], rep["barrier"]
    print(f"files: {rep['files']} (skipped, not accepted: {len(rep['files_skipped_not_accepted'])})")
    print(f"racy mutants: {r.get('total', 0)}, rejected {r.get('rejected', 0)}, survived {r.get('survived', 0)}, rate {r['rate']}")
    for cls in CLASSES:
        k, s = r.get(f"{cls}:rejected", 0), r.get(f"{cls}:survived", 0)
        if k or s:
            print(f"  {cls:15} {k}/{k + s} rejected")
    for s in r["survivors"]:
        print(f"  SURVIVED {s['path']}:{s['line']} {s['class']}")
    if b:
        print(f"barrier mutants (tools/mutate.py): {b.get('total', 0)}, rejected statically {b.get('static', 0)}, need racecheck {b.get('needs_racecheck', 0)}")
    if ns.json:
        Path(ns.json).write_text(json.dumps(rep, indent=1))
    return 0 if not r["survivors"] else 1


if __name__ == "__main__":
    sys.exit(main())
