"""Mutation testing of the checker: every mutant of a write index must be rejected.

    python tools/mutate.py [--out DIR] [--json FILE] [--mutants-dir DIR] [PATH...]

1. Write-index mutants.  For every accepted fixture (fixtures/accept) and example
   (examples/), each write to a `DisjointSlice`/`DisjointSlice2D` parameter
   (`c[i] = v`, `c[i] op= v`, in kernels and `@az.func` helpers) is mutated, one
   mutant per site and operator:
     plus1  `i` -> `i + 1`          (2-D: `(ij.row + 1, ij.col)`)
     zero   `i` -> `0`              (2-D: `(0, 0)`)
     rev    `i` -> `len(c) - 1 - i` (2-D: `(c.shape[0] - 1 - ij.row, ij.col)`)
     int    `i` -> `i.get()`        (2-D: `(ij.row, ij.col)`): the same value, but a plain int
   The checker must reject every one (`check_source` returns an error).
   `write_unchecked` (the unsafe tier) and atomics take any index by design and are
   not mutated, nor are lines that carry `# anodize: ignore[...]` (silenced on purpose).

2. Barrier mutants.  In the shared-memory examples (transpose, reduce_sum_unsafe, sgemm,
   softmax_unsafe, scan), each `az.syncthreads()` is deleted, moved one statement up,
   moved one statement down, and moved under `if thread.tid_x() == 0:`.  A mutant
   the checker rejects is "static"; one it accepts can only be caught by racecheck
   and is written under `--mutants-dir` (default tests/reliability/barrier_mutants)
   for tools/sanitize.py.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BARRIER_EXAMPLES = ("transpose", "reduce_sum_unsafe", "sgemm", "softmax_unsafe", "scan")
OPERATORS = ("plus1", "zero", "rev", "int")


@dataclass
class Mutant:
    path: str
    line: int
    op: str
    source: str
    rejected: bool | None = None
    codes: tuple[str, ...] = ()


def _errors(src: str, path: str) -> list[Any]:
    from anodize.checker.api import check_source

    return [d for d in check_source(src, path) if d.severity == "error"]


def _outputs(fn: ast.FunctionDef) -> dict[str, int]:
    """Output parameters of a function: name -> rank."""
    out: dict[str, int] = {}
    for a in fn.args.args:
        ann = ast.unparse(a.annotation) if a.annotation else ""
        if "DisjointSlice2D" in ann:
            out[a.arg] = 2
        elif "DisjointSlice" in ann:
            out[a.arg] = 1
    return out


def _replace(src: str, node: ast.AST, text: str) -> str:
    lines = src.splitlines(keepends=True)
    l0, c0 = node.lineno - 1, node.col_offset  # type: ignore[attr-defined]
    l1, c1 = node.end_lineno - 1, node.end_col_offset  # type: ignore[attr-defined]
    # ast offsets are UTF-8 byte offsets
    b0 = lines[l0].encode()[:c0].decode()
    b1 = lines[l1].encode()[c1:].decode()
    return "".join(lines[:l0]) + b0 + text + b1 + "".join(lines[l1 + 1 :])


def _index_mutation(op: str, c: str, idx: str, rank: int) -> str:
    if rank == 1:
        return {"plus1": f"{idx} + 1", "zero": "0", "rev": f"len({c}) - 1 - {idx}", "int": f"{idx}.get()"}[op]
    return {
        "plus1": f"({idx}.row + 1, {idx}.col)",
        "zero": "(0, 0)",
        "rev": f"({c}.shape[0] - 1 - {idx}.row, {idx}.col)",
        "int": f"({idx}.row, {idx}.col)",
    }[op]


def write_mutants(path: Path) -> list[Mutant]:
    src = path.read_text()
    tree = ast.parse(src)
    out: list[Mutant] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        outs = _outputs(fn)
        if not outs:
            continue
        for node in ast.walk(fn):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in outs:
                    if "anodize: ignore" in src.splitlines()[t.lineno - 1] or "type: ignore[az-" in src.splitlines()[t.lineno - 1]:
                        continue  # the author silenced this line on purpose: not a mutation target
                    idx = ast.unparse(t.slice)
                    for op in OPERATORS:
                        text = _index_mutation(op, t.value.id, idx, outs[t.value.id])
                        out.append(Mutant(str(path.relative_to(ROOT)), t.lineno, op, _replace(src, t.slice, text)))
    return out


def _barrier_stmts(tree: ast.AST) -> list[tuple[list[ast.stmt], int]]:
    """(parent body, index) of each `az.syncthreads()` statement."""
    found: list[tuple[list[ast.stmt], int]] = []
    for node in ast.walk(tree):
        for field in ("body", "orelse"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            for k, s in enumerate(body):
                if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and ast.unparse(s.value.func).endswith("syncthreads"):
                    found.append((body, k))
    return found


def _lines(s: ast.stmt) -> tuple[int, int]:
    first = min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])])
    return first - 1, s.end_lineno  # type: ignore[return-value]


def barrier_mutants(path: Path) -> list[Mutant]:
    src = path.read_text()
    lines = src.splitlines(keepends=True)
    tree = ast.parse(src)
    rel = str(path.relative_to(ROOT))
    out: list[Mutant] = []
    for body, k in _barrier_stmts(tree):
        s = body[k]
        a, b = _lines(s)
        indent = lines[a][: len(lines[a]) - len(lines[a].lstrip())]
        only = len(body) == 1
        deleted = lines[:a] + [indent + "pass\n" if only else ""] + lines[b:]
        out.append(Mutant(rel, s.lineno, "delete", "".join(deleted)))
        if k > 0:
            pa, pb = _lines(body[k - 1])
            moved = lines[:pa] + lines[a:b] + lines[pa:pb] + lines[b:]
            out.append(Mutant(rel, s.lineno, "move_up", "".join(moved)))
        if k + 1 < len(body):
            na, nb = _lines(body[k + 1])
            moved = lines[:a] + lines[na:nb] + lines[a:b] + lines[nb:]
            out.append(Mutant(rel, s.lineno, "move_down", "".join(moved)))
        guarded = lines[:a] + [indent + "if thread.tid_x() == 0:\n", "    " + lines[a]] + lines[b:]
        out.append(Mutant(rel, s.lineno, "under_tid0", "".join(guarded)))
    return out


def default_paths() -> list[Path]:
    return sorted((ROOT / "fixtures" / "accept").glob("*.py")) + sorted((ROOT / "examples").glob("*.py"))


def run(paths: list[Path], mutants_dir: Path | None) -> dict[str, Any]:
    report: dict[str, Any] = {"files": 0, "files_skipped_not_accepted": [], "write": {}, "barrier": {}}
    tally: Counter[str] = Counter()
    survivors: list[dict[str, Any]] = []
    for p in paths:
        src = p.read_text()
        if _errors(src, str(p)):
            report["files_skipped_not_accepted"].append(str(p.relative_to(ROOT)))
            continue
        report["files"] += 1
        for m in write_mutants(p):
            errs = _errors(m.source, str(p))
            m.rejected, m.codes = bool(errs), tuple(sorted({d.code for d in errs}))
            tally["total"] += 1
            tally["rejected" if m.rejected else "survived"] += 1
            tally[f"{m.op}:{'rejected' if m.rejected else 'survived'}"] += 1
            if not m.rejected:
                survivors.append({"path": m.path, "line": m.line, "op": m.op})
    report["write"] = {**dict(sorted(tally.items())), "rate": (tally["rejected"] / tally["total"]) if tally["total"] else None, "survivors": survivors}
    btally: Counter[str] = Counter()
    rows: list[dict[str, Any]] = []
    if mutants_dir is not None:
        mutants_dir.mkdir(parents=True, exist_ok=True)
        for old in mutants_dir.glob("*.py"):
            old.unlink()
    for name in BARRIER_EXAMPLES:
        p = ROOT / "examples" / f"{name}.py"
        if p not in paths and paths != default_paths():
            continue
        for k, m in enumerate(barrier_mutants(p)):
            errs = _errors(m.source, str(p))
            static = bool(errs)
            btally["total"] += 1
            btally["static" if static else "needs_racecheck"] += 1
            row = {"example": name, "line": m.line, "op": m.op, "static": static, "codes": sorted({d.code for d in errs})}
            if not static and mutants_dir is not None:
                fname = f"{name}_{m.op}_L{m.line}.py"
                (mutants_dir / fname).write_text(f"# barrier mutant of examples/{name}.py: {m.op} of the barrier on line {m.line}\n" + m.source)
                row["file"] = fname
            rows.append(row)
    report["barrier"] = {**dict(btally), "mutants": rows}
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--json", default=None)
    ap.add_argument("--mutants-dir", default=str(ROOT / "tests" / "reliability" / "barrier_mutants"))
    ns = ap.parse_args(argv)
    paths = [Path(p).resolve() for p in ns.paths] or default_paths()
    rep = run(paths, Path(ns.mutants_dir) if ns.mutants_dir else None)
    w, b = rep["write"], rep["barrier"]
    print(f"files: {rep['files']} (skipped, not accepted: {len(rep['files_skipped_not_accepted'])})")
    print(f"write-index mutants: {w.get('total', 0)}, rejected {w.get('rejected', 0)}, survived {w.get('survived', 0)}, rate {w['rate']}")
    for s in w["survivors"]:
        print(f"  SURVIVED {s['path']}:{s['line']} {s['op']}")
    print(f"barrier mutants: {b.get('total', 0)}, rejected statically {b.get('static', 0)}, need racecheck {b.get('needs_racecheck', 0)}")
    for r in b["mutants"]:
        print(f"  {r['example']}:{r['line']} {r['op']}: {'static ' + ','.join(r['codes']) if r['static'] else 'racecheck -> ' + r.get('file', '')}")
    if ns.json:
        Path(ns.json).write_text(json.dumps(rep, indent=1))
    return 0 if not w["survivors"] else 1


if __name__ == "__main__":
    sys.exit(main())
