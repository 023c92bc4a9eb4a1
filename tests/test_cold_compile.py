"""A first compile's critical path stays short (docs/performance.md "Cold compile"): importing the
codegen does not load LLVM (llvmlite's binding loads on a background thread from the first
compile on, while the kernel is typed and lowered), and with ptxas installed the checker's
engine is imported and run only after ptxas has started (the checker runs beside it)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anodize.codegen.toolchain import find_ptxas

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str, **env: str) -> object:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "ANODIZE_CACHE": "off", **env})
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_importing_the_codegen_does_not_load_llvm() -> None:
    loaded = _run("import sys, anodize.codegen.driver, anodize.codegen.gpu.ptx, anodize.runtime.compile\n"
                  "print(repr(sorted(m for m in ('llvmlite.binding', 'anodize.checker.engine') if m in sys.modules)))")
    assert loaded == []


def test_import_anodize_loads_no_compiler() -> None:
    heavy = ("llvmlite", "anodize.language.ir", "anodize.language.typer", "anodize.checker.engine", "anodize.codegen.driver",
             "numpy", "cuda.bindings")
    loaded = _run(f"import sys, anodize\nprint(repr([m for m in {heavy!r} if m in sys.modules]))")
    assert loaded == []


_ORDER = r"""
import sys, importlib.abc, importlib.util
sys.path.insert(0, "examples")
import anodize, vecadd
events = []

class Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "anodize.checker.engine":
            events.append("checker engine imported")
        if name != "anodize.codegen.gpu.ptx":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        run = spec.loader.exec_module

        def exec_module(mod):
            run(mod)
            start = mod.PtxasJob.__init__

            def init(self, *a, **k):
                events.append("ptxas started")
                start(self, *a, **k)

            mod.PtxasJob.__init__ = init

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Hook())
k = vecadd.vecadd.compile("sm_90")
print(repr((events, k.resources is not None and k.resources.registers > 0)))
"""


@pytest.mark.skipif(find_ptxas() is None, reason="ptxas is not installed")
def test_the_checker_runs_beside_ptxas_on_a_first_compile() -> None:
    events, assembled = _run(_ORDER)  # type: ignore[misc]
    assert events == ["ptxas started", "checker engine imported"] and assembled
    events, assembled = _run(_ORDER, ANODIZE_COMPILE_OVERLAP="0")  # type: ignore[misc]
    assert events == ["checker engine imported", "ptxas started"] and assembled
