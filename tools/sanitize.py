"""Run every accepted fixture and example kernel under compute-sanitizer; write a markdown report.

    python tools/sanitize.py [--out DIR] [--tools memcheck,racecheck,synccheck] [--mutants DIR] [--timeout S]
                             [--jobs N] [--each-member] [--safe-shared] [--dry-run] [MODULE.py ...]

One compute-sanitizer process per tool drives tools/sanitize_runner.py over all
modules (fixtures/accept/*.py and examples/*.py):
  memcheck   `--tool memcheck --padding 64` (catches an off-by-one into the next allocation)
  racecheck  `--tool racecheck`, kernels built with line_info=True, opt=0 (-G equivalent)
  synccheck  `--tool synccheck`
memcheck also runs each module's `main()`; racecheck and synccheck the derived
launches (small inputs: the instrumented -G builds are slow) and the `main()` of
modules that set `SANITIZE_KWARGS` (small sizes), with those arguments.  The
derived launches cover generic kernels (the first member of each type variable's
constraint, `--each-member` for every member; the first small `az.Constant` value the
compile path accepts), `shared_mem=` contracts (the bytes the contract asks for) and
3-D contracts (tools/sanitize_runner.py, `derive_launches`).  The tools run at the
same time, one process each on the one GPU (`--jobs 1` runs them one after another).
`--safe-shared` runs only the safe-tier shared-memory modules (shared memory,
barriers or block collectives, no `unsafe`): `python tools/sanitize.py --safe-shared`.
`--mutants DIR` also runs racecheck over the barrier mutants that tools/mutate.py
wrote (those the checker cannot reject); each should show hazards.

The runner prints `@@AZ-BEGIN module::kernel` before each launch and syncs after
it, so every sanitizer line is attributed to the kernel launched last.  The
report (`sanitize.md`, `sanitize.json` under `--out`) lists errors and hazards per
kernel and tool.  `--dry-run` runs the runner on the CPU backend without the
sanitizer (what CI can test).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "sanitize_runner.py"
TOOLS: dict[str, list[str]] = {
    "memcheck": ["--tool", "memcheck", "--padding", "64", "--leak-check", "no"],
    "racecheck": ["--tool", "racecheck"],
    "synccheck": ["--tool", "synccheck"],
}
_BEGIN = re.compile(r"^@@AZ-BEGIN (\S+)")
_END = re.compile(r"^@@AZ-END (\S+) (.*)$")
_SAN = re.compile(r"^========= (.*)$")
_ERR_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error")
_RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


def find_sanitizer() -> str | None:
    for cand in (shutil.which("compute-sanitizer"), "/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer"):
        if cand and Path(cand).exists():
            return cand
    return None


def default_modules() -> list[Path]:
    return sorted((ROOT / "fixtures" / "accept").glob("*.py")) + sorted((ROOT / "examples").glob("*.py"))


def safe_shared_modules() -> list[Path]:
    """The safe-tier shared-memory modules: examples and accepted fixtures that use shared
    memory, barriers or block collectives with no `unsafe` block."""
    out = []
    for p in default_modules():
        text = p.read_text()
        uses = any(k in text for k in ("az.shared.", "az.syncthreads()", "az.block."))
        if uses and "az.unsafe()" not in text:
            out.append(p)
    return out


def parse(output: str) -> dict[str, Any]:
    """Per-kernel sanitizer findings and launch statuses from one run's combined output."""
    current = "<startup>"
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"errors": 0, "hazards": 0, "messages": [], "status": "not run"})
    totals: dict[str, int] = {"errors": 0, "hazards": 0, "race_errors": 0, "race_warnings": 0}
    for line in output.splitlines():
        m = _BEGIN.match(line)
        if m:
            current = m.group(1)
            per[current]["status"] = "started (no end marker: crashed or timed out)"
            continue
        m = _END.match(line)
        if m:
            per[m.group(1)]["status"] = m.group(2)
            continue
        m = _SAN.match(line)
        if not m:
            continue
        text = m.group(1)
        if text[:1].isspace():  # a continuation line (stack frame, address) of the last report
            continue
        s = _ERR_SUMMARY.search(text)
        if s:
            totals["errors"] = int(s.group(1))
            continue
        s = _RACE_SUMMARY.search(text)
        if s:
            totals["hazards"] = int(s.group(1))
            totals["race_errors"], totals["race_warnings"] = int(s.group(2)), int(s.group(3))
            continue
        low = text.lower()
        if low.startswith(("invalid", "program hit", "error", "warning", "barrier error", "divergent", "race", "uninitialized", "leaked")):
            key = "hazards" if ("race" in low or "hazard" in low) else "errors"
            per[current][key] += 1
            if len(per[current]["messages"]) < 5:
                per[current]["messages"].append(text.strip())
    return {"kernels": dict(per), "totals": totals}


def run_tool(
    san: str | None, tool: str, modules: list[Path], out: Path, timeout: float, device: str, label: str = "", each_member: bool = False
) -> dict[str, Any]:
    cmd = [sys.executable, str(RUNNER), "--device", device]
    if each_member:
        cmd.append("--each-member")
    if tool == "racecheck":
        cmd.append("--debug-build")
    if tool != "memcheck":  # racecheck/synccheck: the derived launches, and the mains that have small sizes
        cmd.append("--small-main")
    cmd += [str(m) for m in modules]
    if san is not None:
        cmd = [san, *TOOLS[tool], "--print-limit", "200", *cmd]
    t0 = time.time()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        text, rc = proc.stdout + "\n" + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        text += "\n@@AZ-TIMEOUT\n"
        rc = -1
    (out / f"{label or tool}.log").write_text(text)
    res = parse(text)
    res["returncode"], res["seconds"] = rc, round(time.time() - t0, 1)
    return res


def render(results: dict[str, dict[str, Any]], sanitizer: str | None) -> str:
    md = ["# compute-sanitizer report", "", f"sanitizer: `{sanitizer or 'none (dry run on the CPU backend)'}`", ""]
    md += ["| run | kernels | launched ok | errors | hazards | seconds | exit |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        ks = r["kernels"]
        ok = sum(1 for k, v in ks.items() if str(v["status"]).startswith("ok"))
        errs = sum(v["errors"] for v in ks.values())
        haz = sum(v["hazards"] for v in ks.values())
        md.append(f"| {name} | {len([k for k in ks if k != '<startup>'])} | {ok} | {max(errs, r['totals']['errors'])} | {max(haz, r['totals']['hazards'])} | {r['seconds']} | {r['returncode']} |")
    for name, r in results.items():
        md += ["", f"## {name}", "", "| kernel | status | errors | hazards | first message |", "|---|---|---|---|---|"]
        for k, v in sorted(r["kernels"].items()):
            msg = (v["messages"][0] if v["messages"] else "").replace("|", "\\|")[:160]
            md.append(f"| {k} | {v['status']} | {v['errors']} | {v['hazards']} | {msg} |")
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> int:
    head, _, rest = __doc__.partition("\n")
    ap = argparse.ArgumentParser(description=head, epilog=rest.strip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="/tmp/anodize-sanitize", help="folder for sanitize.md, sanitize.json and one log per tool (default: %(default)s)")
    ap.add_argument("--tools", default="memcheck,racecheck,synccheck", help="comma-separated compute-sanitizer tools (default: %(default)s)")
    ap.add_argument("--mutants", default=None, help="folder of barrier mutants (tools/mutate.py) for an extra racecheck run; each should show hazards")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per tool run before it is stopped and reported as timed out (default: %(default)s)")
    ap.add_argument("--jobs", type=int, default=0, help="tool runs at the same time (default 0: all of them; 1: one after another)")
    ap.add_argument("--each-member", action="store_true", help="launch a generic kernel once per member of each type variable's constraint (default: the first member)")
    ap.add_argument("--dry-run", action="store_true", help="no sanitizer; run the runner on the CPU backend")
    ap.add_argument("--safe-shared", action="store_true", help="only the safe-tier shared-memory examples and fixtures")
    ap.add_argument("modules", nargs="*", help="modules to run (default: fixtures/accept/*.py and examples/*.py)")
    ns = ap.parse_args(argv)
    out = Path(ns.out)
    out.mkdir(parents=True, exist_ok=True)
    san = None if ns.dry_run else find_sanitizer()
    if san is None and not ns.dry_run:
        print("sanitize: compute-sanitizer not found (use --dry-run to test the runner on the CPU)", file=sys.stderr)
        return 2
    device = "cpu" if ns.dry_run else "gpu"
    modules = [Path(m).resolve() for m in ns.modules] or (safe_shared_modules() if ns.safe_shared else default_modules())
    runs: dict[str, tuple[str, list[Path]]] = {t: (t, modules) for t in ns.tools.split(",") if t}
    if ns.mutants:
        muts = sorted(Path(ns.mutants).glob("*.py"))
        if muts:
            runs["racecheck-barrier-mutants"] = ("racecheck", muts)
    jobs = ns.jobs if ns.jobs > 0 else max(1, len(runs))
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:  # each run is its own process
        futures = {
            name: pool.submit(run_tool, san, tool, mods, out, ns.timeout, device, "" if name == tool else name, ns.each_member)
            for name, (tool, mods) in runs.items()
        }
        results: dict[str, dict[str, Any]] = {name: f.result() for name, f in futures.items()}
    print(f"sanitize: {len(runs)} run(s), {jobs} at a time, {time.time() - t0:.1f} s", file=sys.stderr)
    (out / "sanitize.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "sanitize.md").write_text(render(results, san))
    print((out / "sanitize.md").read_text())
    bad = 0
    for name, r in results.items():
        if name.startswith("racecheck-barrier"):
            continue
        bad += sum(v["errors"] + v["hazards"] for v in r["kernels"].values()) + r["totals"]["errors"] + r["totals"]["hazards"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
