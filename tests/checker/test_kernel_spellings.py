"""`anodize check` reports what compile reports, for the fixtures of issue 27: every way of
making a kernel is checked as compile checks it:
`@alias` of `az.kernel` or of a contract, `Kernel(fn)`, `launch_contract(...)(kernel(fn))`;
and a module's own `thread` is not anodize's namespace (fixtures/reject/kernel_spellings.py,
shadowed_thread.py: the `# E:` lines are what both report); spin-waits (spin_wait*.py) and
constants (module_constants.py) likewise."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from anodize.checker.api import check_source
from anodize.kernel import Kernel
from anodize.language.diagnostics import CheckError
from anodize.runtime.compile import compile_for_cpu
from harness import FIXTURES, expectations

CASES = [
    "reject/kernel_spellings.py",
    "reject/shadowed_thread.py",
    "accept/kernel_spellings_run.py",
    "reject/spin_wait.py",
    "accept/spin_wait_unsafe.py",
    "reject/module_constants_refused.py",
    "accept/module_constants.py",
    "reject/one_error_per_cause.py",
]


def _compiled_diagnostics(path: Path) -> set[tuple[int, str]]:
    """What compiling each kernel object of the module reports (the module is run)."""
    name = f"spellings_{path.parent.name}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    got: set[tuple[int, str]] = set()
    kernels = 0
    try:
        spec.loader.exec_module(mod)
        for value in list(vars(mod).values()):
            if isinstance(value, Kernel):
                kernels += 1
                try:
                    compile_for_cpu(value)
                except CheckError as e:
                    got |= {(d.span.line, d.code) for d in e.diagnostics if d.severity == "error"}
    finally:
        sys.modules.pop(name, None)
    assert kernels >= 1
    return got


@pytest.mark.parametrize("case", CASES)
def test_check_reports_what_compile_reports(case: str) -> None:
    path = FIXTURES / case
    want = expectations(path)
    checked = {(d.span.line, d.code) for d in check_source(path.read_text(encoding="utf-8"), str(path)) if d.severity == "error"}
    assert checked == want
    assert _compiled_diagnostics(path) == want
