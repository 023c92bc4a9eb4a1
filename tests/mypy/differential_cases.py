"""The editor's differential test: random edit sequences over a two-module project, after each
step the az errors of dmypy, of incremental mypy and of `anodize check` (a cold run's).

The project (`Project`): `kmod.py` holds a module constant, an `@az.func` helper and a kernel
whose contract and body the edits change; `host.py` launches the kernel.  An edit inserts,
deletes or replaces a kernel-body line (from `BODY_LINES`, lines the fixtures use, racy and
read-only writes among them), rewrites the helper's body, the constant, the kernel's contract,
or the host's second argument.  `Runner` runs the three tools over the same files."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from incremental_cases import config, errors_in_text, seeded

# kernel-body lines (8 spaces in: under `if i in out:`), each a line the fixtures write
BODY_LINES = (
    "out[i] = x[i]",
    "x[i] = 1.0",  # az-shared-write (and mypy's own [index])
    "out[i] = scale(x[i])",
    "out[0] = x[i]",  # a write every thread makes to one element
    "v = x[i] + 1.0",
    "out[i] = v",  # v may be unbound
    "out[i] = x[i + 1]",
    "out[i] = x[i] * BLOCK",
    "pass",
)
HELPER_BODIES = ("return v * 2.0", "return v + 1.0", "return w", "return v * BLOCK")
CONSTANTS = ("256", "128", "2048", "0")
CONTRACTS = (
    "@launch_contract(domain=1, block=BLOCK)\n",
    "@launch_contract(domain=1, block=256)\n",
    "",
    "@launch_contract(domain=2, block=(16, 16))\n",
)
SECOND_ARGS = ("out", "x")

KERNEL_MODULE = """\
import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread

BLOCK = {block}


@az.func
def scale(v: f32) -> f32:
    {helper}


{contract}@kernel
def copy(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in out:
{body}
"""

HOST_MODULE = textwrap.dedent(
    """\
    import anodize as az
    from kmod import copy


    def go() -> None:
        dev = az.device()
        x = dev.empty(10, az.f32)
        out = dev.empty(10, az.f32)
        cfg = az.LaunchConfig.for_num_elems(10)
        copy[cfg](x, out)
        copy[cfg]({second}, out)
    """
)


@dataclass(frozen=True)
class Project:
    body: tuple[str, ...] = ("out[i] = x[i]",)
    helper: str = HELPER_BODIES[0]
    block: str = CONSTANTS[0]
    contract: str = CONTRACTS[0]
    second: str = SECOND_ARGS[0]

    def write(self, root: Path) -> None:
        body = "\n".join(" " * 8 + line for line in self.body)
        kmod = KERNEL_MODULE.format(block=self.block, helper=self.helper, contract=self.contract, body=body)
        host = HOST_MODULE.format(second=self.second)
        for name, text in (("kmod.py", kmod), ("host.py", host)):
            path = root / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
                _advance_mtime(path)


_LAST_MTIME = [0]


def _advance_mtime(path: Path) -> None:
    """Give a rewritten file a modification time a whole second past the last one written, as an
    editor's saves a second or more apart have: mypy and dmypy take a file whose size and mtime
    (whole seconds) are unchanged as unchanged, so two saves of equal length within one second
    leave both on the first's results, their own errors too (sequence 65 of the full run:
    `out[i] = v` replaced by `x[i] = 1.0`, ten characters each, kept `[name-defined]` and
    `az-type`).  That is mypy's cache contract, not a stale plugin result."""
    t = max(int(os.stat(path).st_mtime), _LAST_MTIME[0] + 1)
    _LAST_MTIME[0] = t
    os.utime(path, (t, t))


def random_project(rng: random.Random) -> Project:
    return Project(
        body=tuple(rng.choice(BODY_LINES) for _ in range(rng.randint(1, 3))),
        helper=rng.choice(HELPER_BODIES),
        block=rng.choice(CONSTANTS),
        contract=rng.choice(CONTRACTS),
        second=rng.choice(SECOND_ARGS),
    )


def edit(p: Project, rng: random.Random) -> tuple[str, Project]:
    """One random edit of `p`: (what it did, the new project)."""
    kind = rng.choice(("insert", "delete", "replace", "replace", "helper", "constant", "contract", "host"))
    body = list(p.body)
    if kind == "insert" or (kind == "delete" and len(body) == 1):
        at = rng.randint(0, len(body))
        body.insert(at, rng.choice(BODY_LINES))
        return f"insert line {at}", replace(p, body=tuple(body))
    if kind == "delete":
        at = rng.randrange(len(body))
        del body[at]
        return f"delete line {at}", replace(p, body=tuple(body))
    if kind == "replace":
        at = rng.randrange(len(body))
        body[at] = rng.choice(BODY_LINES)
        return f"replace line {at}", replace(p, body=tuple(body))
    if kind == "helper":
        return "helper", replace(p, helper=rng.choice(HELPER_BODIES))
    if kind == "constant":
        return "constant", replace(p, block=rng.choice(CONSTANTS))
    if kind == "contract":
        return "contract", replace(p, contract=rng.choice(CONTRACTS))
    return "host", replace(p, second=rng.choice(SECOND_ARGS))


Errors = list[tuple[str, int, str]]  # (file, line, code) of every az error, sorted, repeats kept


def az_errors_in_text(out: str) -> Errors:
    """The az errors in mypy's output, repeats kept (a repeat is a bug the test reports)."""
    found: Errors = []
    for line in out.splitlines():
        one = errors_in_text(line)
        found.extend(e for e in one if e[2].startswith("az-"))
    return sorted(found)


def check_errors(root: Path) -> Errors:
    """`anodize check kmod.py host.py`: a cold run (a new Project: nothing kept)."""
    from anodize.checker.api import check_source
    from anodize.checker.engine import Project as EngineProject

    found: Errors = []
    project = EngineProject()
    for name in ("kmod.py", "host.py"):
        path = root / name
        for d in check_source(path.read_text(), str(path), project):
            if d.severity == "error":
                found.append((name, d.span.line, d.code))
    return sorted(found)


@dataclass
class Runner:
    """dmypy (one daemon for every step; `run`, `check` and `recheck` in turn) and incremental
    mypy (one cache for every step, a new process each time) over `root`."""

    root: Path
    tmp: Path
    calls: int = 0
    status: Path = field(init=False)
    cache: Path = field(init=False)

    def __post_init__(self) -> None:
        self.status = self.tmp / "dmypy.json"
        self.cache = seeded(self.tmp / "cache")
        config(self.root)

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", *args], cwd=self.root, capture_output=True, text=True, timeout=300,
            env={**os.environ, "ANODIZE_MYPY_WORKERS": os.environ.get("ANODIZE_MYPY_WORKERS", "")},
        )
        out = done.stdout + done.stderr
        assert "INTERNAL ERROR" not in out and "Traceback" not in out, out
        return done.stdout

    def dmypy(self) -> Errors:
        how = ("run", "check", "recheck")[self.calls % 3] if self.calls else "run"
        self.calls += 1
        base = ("mypy.dmypy", "--status-file", str(self.status))
        if how == "run":
            out = self._run(*base, "run", "--", "--config-file", "mypy.ini", "kmod.py", "host.py")
        elif how == "check":
            out = self._run(*base, "check", "kmod.py", "host.py")
        else:
            out = self._run(*base, "recheck")
        return az_errors_in_text(out)

    def mypy(self) -> Errors:
        return az_errors_in_text(self._run("mypy", "--config-file", "mypy.ini", "--cache-dir", str(self.cache), "kmod.py", "host.py"))

    def stop(self) -> None:
        done = subprocess.run([sys.executable, "-m", "mypy.dmypy", "--status-file", str(self.status), "stop"], cwd=self.root, capture_output=True, timeout=60)
        if done.returncode != 0:
            subprocess.run([sys.executable, "-m", "mypy.dmypy", "--status-file", str(self.status), "kill"], cwd=self.root, capture_output=True, timeout=60)


@dataclass
class Figures:
    sequences: int = 0
    steps: int = 0
    mismatches: list[str] = field(default_factory=list)
    codes: Counter[str] = field(default_factory=Counter)


# the issue's sequence: a write to the read-only input, then the edit undone
ISSUE_SEQUENCE = (Project(), Project(body=("x[i] = 1.0",)), Project())


def differential(root: Path, tmp: Path, sequences: int, steps: int, seed: int = 0) -> Figures:
    """`ISSUE_SEQUENCE`, then `sequences` random sequences of `steps` edits each (a sequence
    starts from a random project: itself an edit of the last one); after each step, the three
    tools compared."""
    rng = random.Random(seed)
    runner = Runner(root, tmp)
    figures = Figures()
    try:
        for s in range(-1, sequences):
            project = random_project(rng) if s >= 0 else ISSUE_SEQUENCE[0]
            history = ["start"]
            for step in range(steps + 1 if s >= 0 else len(ISSUE_SEQUENCE)):
                if step and s < 0:
                    project = ISSUE_SEQUENCE[step]
                    history.append(f"issue step {step}")
                elif step:
                    what, project = edit(project, rng)
                    history.append(what)
                project.write(root)
                want = check_errors(root)
                figures.codes.update(code for _, _, code in want)
                got = {"dmypy": runner.dmypy(), "mypy": runner.mypy()}
                figures.steps += 1
                for tool, errors in got.items():
                    if errors != want:
                        figures.mismatches.append(
                            f"sequence {s} step {step} ({', '.join(history)}): {tool} {errors} != check {want}\n{project}"
                        )
            figures.sequences += s >= 0
    finally:
        runner.stop()
    return figures
