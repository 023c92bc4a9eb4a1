"""Two small modules for the incremental and dmypy tests: a kernel, and a host that launches it."""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path

CONTRACT = "@launch_contract(domain=1, block=256)\n"

KERNEL_MODULE = textwrap.dedent(
    """\
    from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


    {contract}@kernel
    def copy(x: Slice[f32], out: DisjointSlice[f32]) -> None:
        i = thread.index_1d()
        if i in out:
            out[i] = x[i]
    """
)

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

LAUNCH_LINES = (10, 11)  # the two launches in HOST_MODULE

_LINE = re.compile(r"^(?P<file>[^:\s]+\.py):(?P<line>\d+):(?:\d+:)? (?P<sev>error|note): .*\[(?P<code>[a-z0-9-]+)\]$")


def write(root: Path, *, contract: bool, second: str) -> None:
    (root / "kmod.py").write_text(KERNEL_MODULE.format(contract=CONTRACT if contract else ""))
    (root / "host.py").write_text(HOST_MODULE.format(second=second))


def errors_in_text(out: str) -> set[tuple[str, int, str]]:
    """(file, line, code) of every error in mypy's plain-text output."""
    found = set()
    for line in out.splitlines():
        m = _LINE.match(line.strip())
        if m and m["sev"] == "error":
            found.add((Path(m["file"]).name, int(m["line"]), m["code"]))
    return found


def config(root: Path) -> Path:
    cfg = root / "mypy.ini"
    cfg.write_text("[mypy]\nplugins = anodize.checker.mypy_plugin\nstrict = True\n")
    return cfg


_BASE: list[Path] = []


def use_warm_base(cache: Path) -> None:
    """Start the tests' caches (`seeded`) from `cache`: tests/mypy/conftest.py gives the cache of
    the session's cold run over every fixture (`fixtures_run`), which holds what kmod.py and
    host.py import (anodize, the standard library, NumPy): a cold run over the two modules
    checks all of it again (3 of its 3.2 s)."""
    _BASE[:] = [cache]


def seeded(cache: Path) -> Path:
    """`cache`, started (when it does not exist yet) from a copy of the warm base: a test's
    first run is cold for its own modules (kmod.py, host.py, and the plugin's engine on them)
    and reads anodize and the standard library from the cache, as a project's run does once
    any other project was checked.  The fixtures' run stays cold throughout."""
    if _BASE and not cache.exists():
        shutil.copytree(_BASE[0], cache)
    return cache


def run_mypy(root: Path, cache: Path, *files: str) -> str:
    """mypy's output (the plugin, `config(root)`) over `files` in `root` (kmod.py and host.py by
    default), on the cache `seeded(cache)`; a run must never end in an internal error."""
    import mypy.api

    old = os.getcwd()
    os.chdir(root)
    try:
        out, err, _ = mypy.api.run(["--config-file", str(config(root)), "--cache-dir", str(seeded(cache)), *(files or ("kmod.py", "host.py"))])
    finally:
        os.chdir(old)
    assert "INTERNAL ERROR" not in out + err, out + err
    return out


def fresh_pool_state() -> None:
    """The plugin's engine as in a new mypy process: no worker, no results kept."""
    from anodize.checker.mypy import engine_results

    engine_results._disable_pool()
    engine_results._pool = None
    engine_results._pool_broken = False
    engine_results._results.clear()
    engine_results._pending.clear()
    engine_results._last.clear()
