"""The compile path refuses every kernel that the fixtures expect an error in (and only those)."""

from __future__ import annotations

import importlib.util
import inspect
import re
import sys
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from anodize import CheckError, Func, Kernel
from anodize.checker.api import enforce_kernel
from harness import FIXTURES, expectations, fixture_files


def _load(path: Path) -> ModuleType:
    name = f"_az_fixture_{path.stem}_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.pop(0)
    return mod


def _lines(obj: object) -> range:
    src, start = inspect.getsourcelines(obj.fn)  # type: ignore[attr-defined]
    return range(start, start + len(src))


KERNEL_FILES = [p for p in fixture_files() if "host" not in p.parent.name]


@pytest.mark.parametrize("path", KERNEL_FILES, ids=[str(p.relative_to(FIXTURES)) for p in KERNEL_FILES])
def test_compile_refuses_exactly_the_rejected_kernels(path: Path) -> None:
    mod = _load(path)
    want = {line for line, _ in expectations(path)}
    own = {name: obj for name, obj in vars(mod).items() if isinstance(obj, (Kernel, Func)) and obj.__module__ == mod.__name__}
    kernels = {n: k for n, k in own.items() if isinstance(k, Kernel)}
    helpers = {n: f for n, f in own.items() if isinstance(f, Func)}
    defined = set().union(*(set(_lines(o)) for o in own.values())) if own else set()
    module_level = {ln for ln in want if ln not in defined}  # e.g. `from anodize import *`
    for name, k in kernels.items():
        region = set(_lines(k))
        body = inspect.getsource(k.fn)
        for hname, h in helpers.items():
            if re.search(rf"\b{hname}\(", body):
                region |= set(_lines(h))
        should_fail = bool(want & region) or bool(module_level)
        if should_fail:
            with pytest.raises(CheckError) as info:
                enforce_kernel(k)
            text = str(info.value)
            assert text.startswith("error[az-"), text
            assert "Traceback" not in text and "kernel_model.py" not in text and "rules/" not in text
            assert info.value.__cause__ is None and info.value.__suppress_context__
        else:
            enforce_kernel(k)  # must not raise


def test_rejected_fixtures_are_refused_somewhere() -> None:
    """Every fixture with an error in kernel code has at least one kernel that does not compile."""
    refused = 0
    for path in KERNEL_FILES:
        if not expectations(path):
            continue
        mod = _load(path)
        for obj in vars(mod).values():
            if isinstance(obj, Kernel) and obj.__module__ == mod.__name__:
                try:
                    enforce_kernel(obj)
                except CheckError:
                    refused += 1
                    break
        else:
            if not any(isinstance(o, Kernel) for o in vars(mod).values()):
                continue
    assert refused >= 30


def test_kernel_compile_raises_check_error() -> None:
    pytest.importorskip("anodize.runtime.compile")
    mod = _load(FIXTURES / "reject" / "neighbour_write.py")
    with pytest.raises(CheckError) as info:
        mod.shift.compile(arch="sm_90")
    assert "az-disjoint-index" in str(info.value)
    assert "c[i + 1] = a[i]" in str(info.value)


def test_enforce_uses_the_current_file(tmp_path: Path) -> None:
    p = tmp_path / "k_mod.py"
    good = (
        "from anodize import DisjointSlice, f32, kernel, thread\n\n@kernel\n"
        "def k(c: DisjointSlice[f32]) -> None:\n    i = thread.index_1d()\n    c[i] = 1.0\n"
    )
    p.write_text(good)
    enforce_kernel(_load(p).k)
    p.write_text(good.replace("c[i] = 1.0", "c[0] = 1.0  # now racy"))
    import os
    os.utime(p, (1, 1))  # a different mtime even on coarse clocks
    with pytest.raises(CheckError):
        enforce_kernel(_load(p).k)
