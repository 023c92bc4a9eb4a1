"""The cached load stays light: a warm disk-cache hit in a fresh interpreter imports neither the
checker's engine, the codegen, llvmlite's binding nor cuda.bindings, and the contract it
launches with is the one the source parse gives (the contract is always read from the source,
`anodize.language.contract_schema`; the entry's copy only confirms it: issue 34)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anodize.language.contract import parse_requires
from anodize.language.contract_schema import _expr_from_json, decode_contract, encode_contract
from anodize.runtime import artifact_store

ROOT = Path(__file__).resolve().parent.parent

HEAVY = ("anodize.checker.kernel_model", "llvmlite.binding", "anodize.language.typer",
         "anodize.codegen.gpu.ptx", "anodize.checker.engine", "cuda.bindings")

_PROBE = """
import sys, time
sys.path.insert(0, {examples!r})
import anodize, vecadd
t = time.perf_counter()
k = vecadd.vecadd.compile(arch="sm_90")
ms = (time.perf_counter() - t) * 1e3
heavy = [m for m in {heavy!r} if m in sys.modules]
print(repr((ms, heavy, k.contract == vecadd.vecadd.contract, len(k.ptx))))
"""


def _run(env: dict[str, str]) -> tuple[float, list[str], bool, int]:
    code = _PROBE.format(examples=str(ROOT / "examples"), heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_cached_load_imports_nothing_heavy(tmp_path: Path) -> None:
    env = dict(os.environ, ANODIZE_CACHE="on", ANODIZE_CACHE_DIR=str(tmp_path / "cache"))
    ms, heavy, _, n = _run(env)  # fills the cache (checker + codegen + PTX)
    assert n > 0 and "anodize.checker.engine" in heavy
    ms, heavy, same_contract, n = _run(env)
    assert heavy == [] and n > 0, heavy
    # the contract the load returns is the source parse
    assert same_contract


_REQUIRES = [
    "lambda a, b, c: len(a) == len(c) and len(b) == len(c)",
    "lambda out, value, rows, cols: rows * cols == len(out)",
    "lambda m, out, n: m.shape[0] == out.shape[0] and 0 <= -n + m.shape[1] // 2 < 7",
]


@pytest.mark.parametrize("source", _REQUIRES)
def test_contract_round_trips_through_json(source: str) -> None:
    from anodize.language.contract import Contract

    lam = ast.parse(source, mode="eval").body
    assert isinstance(lam, ast.Lambda)
    for contract in (
        Contract(1, (256,), parse_requires(lam, source), (8, 0)),
        Contract(2, (16, 16), parse_requires(lam, source)),
        Contract(1, None, None),
    ):
        text = json.dumps(encode_contract(contract))
        assert decode_contract(json.loads(text)) == contract
    assert decode_contract(None) is None


def test_unknown_requires_node_is_rejected() -> None:
    """`load` turns this ValueError into a miss (the entry is evicted and rebuilt)."""
    with pytest.raises(ValueError):
        _expr_from_json(["call", "os.system"])


# A kernel with a fault site (the read at i + 1 is bounds-checked), for the content-addressed key.
SHIFT = '''from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256)
@kernel
def shift(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = x[i + 1]
'''

_BLOCK_LLVMLITE = """
class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "llvmlite" or name.startswith("llvmlite."):
            raise ImportError("blocked for this test: " + name)
sys.meta_path.insert(0, _Block())
"""

_SHIFT_PROBE = """
import sys
{block}
sys.path.insert(0, {folder!r})
import shiftmod
k = shiftmod.shift.compile(arch="sm_90")
heavy = [m for m in {heavy!r} + ("llvmlite",) if m in sys.modules]
print(repr((k.from_cache, k.source_path, sorted({{s.path for s in k.fault_sites}}), heavy)))
"""


def _shift(folder: Path, env: dict[str, str], block: bool = False) -> tuple[bool, str, list[str], list[str]]:
    code = _SHIFT_PROBE.format(block=_BLOCK_LLVMLITE if block else "", folder=str(folder), heavy=HEAVY)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=folder)
    assert out.returncode == 0, out.stderr
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_byte_identical_copy_elsewhere_hits_and_names_its_own_file(tmp_path: Path) -> None:
    """The key is the module's content, not its path: a copy in another folder loads the entry
    the first one wrote, and its fault sites and source path name the copy, the file that runs."""
    env = dict(os.environ, ANODIZE_CACHE="on", ANODIZE_CACHE_DIR=str(tmp_path / "cache"))
    first, copy = tmp_path / "a", tmp_path / "elsewhere" / "b"
    for folder in (first, copy):
        folder.mkdir(parents=True)
        (folder / "shiftmod.py").write_text(SHIFT)
    hit, path, sites, _ = _shift(first, env)
    assert not hit and path == str(first / "shiftmod.py") and sites == [path]  # (a site to rewrite)
    hit, path, sites, heavy = _shift(copy, env)
    assert hit and heavy == [], heavy
    assert path == str(copy / "shiftmod.py") and sites == [path]
    (copy / "shiftmod.py").write_text(SHIFT.replace("i + 1", "i + 2"))
    assert not _shift(copy, env)[0]  # other content, another entry


def test_a_warm_hit_loads_with_llvmlite_not_importable(tmp_path: Path) -> None:
    """llvmlite's version in the key is read from its installed metadata, not by importing it:
    with llvmlite refused by the import system, a warm entry still loads."""
    env = dict(os.environ, ANODIZE_CACHE="on", ANODIZE_CACHE_DIR=str(tmp_path / "cache"))
    (tmp_path / "shiftmod.py").write_text(SHIFT)
    assert not _shift(tmp_path, env)[0]
    hit, _, _, heavy = _shift(tmp_path, env, block=True)
    assert hit and heavy == [], heavy
    assert artifact_store.llvmlite_version() == __import__("llvmlite").__version__
