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
