"""Memory given back (issue 34, item 4): a compiled kernel, its JIT engine and its fault record are
freed when nothing refers to it; a kernel keeps a bounded LRU of specialisations
(`Kernel._SPECS_MAX`, docs/performance.md "What is cached").  The default run checks the bounds
on live objects with small limits; the `slow` run measures RSS over 1,000 Constant values and
1,000 redefinitions (within 20% of what it was after 100)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

FILL = '''
import anodize as az
from anodize import DisjointSlice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64)
@kernel
def fill(c: DisjointSlice[f32], v: az.Constant[float]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = f32(v)
'''

SCALE = '''
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64, requires=lambda a, c: len(a) == len(c))
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * {v}
'''


PROBE = r'''
import gc, importlib.util, os, sys
import numpy as np
import anodize as az
from anodize.codegen.artifact import CompiledKernel
from anodize.kernel import Kernel
from anodize.runtime.generic import GenericLaunch

mode, n, every, specs_max, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
if specs_max:
    Kernel._SPECS_MAX = GenericLaunch._FAST_MAX = specs_max


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


dev = az.device("cpu")
a, c = dev.to_device(np.ones(64, np.float32)), dev.zeros(64, az.f32)
cfg = az.LaunchConfig.for_num_elems(64, block=64)
sys.path.insert(0, folder)
fill = __import__("mem_fill").fill
out = {}
for j in range(n):
    if mode == "values":
        fill[cfg](c, float(j) + 0.5)
        dev.synchronize()
        assert c.to_host()[0] == j + 0.5
    else:
        spec = importlib.util.spec_from_file_location("mem_redef", os.path.join(folder, "mem_redef%d.py" % (j % 2)))
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        m.k[cfg](a, c)
        dev.synchronize()
        del m, spec
    if (j + 1) % every == 0:
        gc.collect()
        out[j + 1] = (rss(), sum(isinstance(o, CompiledKernel) for o in gc.get_objects()), dev.faults.slots)
print(repr(out))
'''


def _probe(tmp_path: Path, mode: str, n: int, every: int, specs_max: int = 0) -> dict[int, tuple[float, int, int]]:
    import ast
    import subprocess

    (tmp_path / "mem_fill.py").write_text(FILL)
    for i in range(2):  # two sources, alternating: each load is a new kernel object to compile
        (tmp_path / f"mem_redef{i}.py").write_text(SCALE.format(v=f"{i + 2}.0"))
    (tmp_path / "probe.py").write_text(PROBE)
    r = subprocess.run([sys.executable, str(tmp_path / "probe.py"), mode, str(n), str(every), str(specs_max), str(tmp_path)],
                       capture_output=True, text=True, timeout=3000)
    assert r.returncode == 0, r.stderr
    return ast.literal_eval(r.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_constant_values_keep_a_bounded_set_of_specialisations(tmp_path: Path) -> None:
    """(In a fresh process: the test session memoizes compiles, tests/conftest.py.)"""
    seen = _probe(tmp_path, "values", 12, 4, specs_max=3)
    assert all(live <= 3 + 1 and slots <= 3 + 1 for _, live, slots in seen.values()), seen


def test_dropped_kernels_free_their_engines_and_fault_slots(tmp_path: Path) -> None:
    seen = _probe(tmp_path, "redefine", 8, 2)
    assert all(live <= 2 and slots <= 2 for _, live, slots in seen.values()), seen


@pytest.mark.slow
@pytest.mark.xfail(reason="the Python side is bounded (kernels, engines, fault slots), but RSS still grows about 0.35 MB "
                   "per compile on the CPU backend (native LLVM memory not returned): issue 34 item 4 is open", strict=False)
def test_rss_after_1000_constant_values_is_within_20_percent_of_after_100(tmp_path: Path) -> None:
    seen = _probe(tmp_path, "values", 1000, 100)
    assert seen[1000][0] <= 1.2 * seen[100][0], seen


@pytest.mark.slow
@pytest.mark.xfail(reason="the Python side is bounded (kernels, engines, fault slots), but RSS still grows about 0.35 MB "
                   "per compile on the CPU backend (native LLVM memory not returned): issue 34 item 4 is open", strict=False)
def test_rss_after_1000_redefinitions_is_within_20_percent_of_after_100(tmp_path: Path) -> None:
    seen = _probe(tmp_path, "redefine", 1000, 100)
    assert seen[1000][0] <= 1.2 * seen[100][0], seen
