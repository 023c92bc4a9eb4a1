"""The CPU backend's machine code in the disk cache: hit and miss, the host and ISA in the key,
tampered and foreign objects refused, `ANODIZE_CACHE=off` honoured, a fresh process served."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import anodize as az
from anodize.codegen.cpu import machine_code
from anodize.runtime import artifact_store, compile as rc, diskcache

ROOT = Path(__file__).resolve().parent.parent


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, example: str, name: str):
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ANODIZE_CPU_ISA", raising=False)
    (tmp_path / f"{name}.py").write_text((ROOT / "examples" / f"{example}.py").read_text())
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop(name, None)
    return __import__(name)


@pytest.fixture()
def vecadd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    return _module(tmp_path, monkeypatch, "vecadd", "vecadd_cpu_cached")


def _fresh(kernel):
    """The kernel with nothing remembered in memory: what a new process would hold."""
    kernel.store.clear()
    return kernel


def _count(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"check": 0, "codegen": 0}
    real_enforce, real_codegen = rc._enforce, rc._codegen_cpu

    def enforce(k):
        calls["check"] += 1
        return real_enforce(k)

    def codegen(*a, **kw):
        calls["codegen"] += 1
        return real_codegen(*a, **kw)

    monkeypatch.setattr(rc, "_enforce", enforce)
    monkeypatch.setattr(rc, "_codegen_cpu", codegen)
    return calls


def _run_vecadd(ck, n: int = 1000) -> np.ndarray:
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 2.0, np.float32)
    c = np.zeros(n, np.float32)
    fault = np.zeros(64, np.uint8)
    ck.cpu_entry(((n + 255) // 256, 1, 1), (256, 1, 1), [a, n, b, n, c, n], fault.ctypes.data, 0)
    return c - a


def _entry_dir(key: str) -> Path:
    return Path(diskcache._root()) / key[:2] / key


def test_miss_then_hit_skips_checker_codegen_and_llvm(vecadd, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch)
    first = rc.compile_for_cpu(_fresh(vecadd.vecadd))
    assert calls == {"check": 1, "codegen": 1} and not first.from_cache
    assert diskcache.info()["entries"] == 1
    second = rc.compile_for_cpu(_fresh(vecadd.vecadd))
    assert calls == {"check": 1, "codegen": 1}  # served from disk
    assert second.from_cache and second.llvm_ir_optimized == ""  # loaded, not optimised again
    assert second.params == first.params and second.fault_sites == first.fault_sites
    assert second.cpu_entry.recipe == first.cpu_entry.recipe
    np.testing.assert_array_equal(_run_vecadd(second), 2.0)


def test_off_switch_writes_and_reads_nothing(vecadd, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch)
    rc.compile_for_cpu(_fresh(vecadd.vecadd))
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    again = rc.compile_for_cpu(_fresh(vecadd.vecadd))  # an entry exists, but the cache is off
    assert calls["codegen"] == 2 and not again.from_cache
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(Path(diskcache._root()).parent / "other"))
    rc.compile_for_cpu(_fresh(vecadd.vecadd))
    assert not os.path.exists(diskcache._root())


def test_isa_and_host_are_in_the_key(vecadd, monkeypatch: pytest.MonkeyPatch) -> None:
    k = _fresh(vecadd.vecadd)
    plain = artifact_store.cpu_cache_inputs(k, True)
    assert plain["host"]["isa"] == "host" and plain["host"]["features"] and plain["host"]["cpu"]
    keys = {diskcache.make_key(plain)}
    for isa in ("sse4.2", "avx2", "avx512"):
        monkeypatch.setenv("ANODIZE_CPU_ISA", isa)
        inputs = artifact_store.cpu_cache_inputs(k, True)
        assert inputs["host"]["isa"] == isa
        keys.add(diskcache.make_key(inputs))
    monkeypatch.delenv("ANODIZE_CPU_ISA")
    # the same kernel on a host without AVX-512 (or another CPU): another key, never this object
    real = machine_code.host_id
    monkeypatch.setattr(machine_code, "host_id", lambda isa: {**real(isa), "features": "+sse2,-avx512f"})
    keys.add(diskcache.make_key(artifact_store.cpu_cache_inputs(k, True)))
    monkeypatch.setattr(machine_code, "host_id", lambda isa: {**real(isa), "cpu": "some-other-cpu"})
    keys.add(diskcache.make_key(artifact_store.cpu_cache_inputs(k, True)))
    keys.add(diskcache.make_key(artifact_store.cpu_cache_inputs(k, False)))  # bounds checks off
    assert len(keys) == 7


def test_forced_isa_entry_is_its_own(vecadd, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count(monkeypatch)
    rc.compile_for_cpu(_fresh(vecadd.vecadd))
    monkeypatch.setenv("ANODIZE_CPU_ISA", "sse4.2")
    ck = rc.compile_for_cpu(_fresh(vecadd.vecadd))
    assert calls["codegen"] == 2 and ck.cpu_entry.recipe["isa"] == "sse4.2"
    hit = rc.compile_for_cpu(_fresh(vecadd.vecadd))
    assert calls["codegen"] == 2 and hit.from_cache and hit.cpu_entry.recipe["isa"] == "sse4.2"
    np.testing.assert_array_equal(_run_vecadd(hit), 2.0)


def _tamper(path: Path, edit) -> None:
    path.chmod(0o600)
    path.write_bytes(edit(path.read_bytes()))


# each tampering as-is (caught by the payload's hash) and with every hash recomputed by an attacker
# who knows the format (caught by the object's own checks); a bit flip inside the code with every
# hash recomputed is another valid entry: the cache directory is the user's own (RELIABILITY.md)
@pytest.mark.parametrize(("how", "recompute"), [
    ("bitflip", False), ("truncated", False), ("truncated", True), ("not-an-object", False), ("not-an-object", True),
    ("other-symbol", False), ("other-symbol", True), ("recipe", False), ("recipe", True)])
def test_tampered_entry_is_ignored_and_rebuilt(vecadd, monkeypatch: pytest.MonkeyPatch, how: str, recompute: bool) -> None:
    calls = _count(monkeypatch)
    k = _fresh(vecadd.vecadd)
    rc.compile_for_cpu(k)
    key = diskcache.make_key(artifact_store.cpu_cache_inputs(k, True))
    folder = _entry_dir(key)
    obj = folder / "kernel.o"
    if how == "bitflip":
        _tamper(obj, lambda b: b[:100] + bytes([b[100] ^ 0xFF]) + b[101:])
    elif how == "truncated":
        _tamper(obj, lambda b: b[: len(b) // 3])
    elif how == "not-an-object":
        _tamper(obj, lambda b: b"#!/bin/sh\necho planted\n" + b)
    elif how == "other-symbol":
        _tamper(obj, lambda b: b.replace(b"__az_launch", b"__az_lunch_"))
    meta_path = folder / "meta.json"
    meta = json.loads(meta_path.read_text())
    if how == "recipe":
        meta["cpu"]["module"] = "threaded"  # the wrong entry point for this object
    if recompute:  # an attacker who knows the format rewrites every hash
        import hashlib

        meta["files"]["kernel.o"] = hashlib.sha256(obj.read_bytes()).hexdigest()
        meta["content"] = diskcache.content_hash(meta)
    meta_path.chmod(0o600)
    meta_path.write_bytes(diskcache._canonical(meta))
    again = rc.compile_for_cpu(_fresh(vecadd.vecadd))
    assert not again.from_cache and calls["codegen"] == 2  # ignored, rebuilt
    np.testing.assert_array_equal(_run_vecadd(again), 2.0)
    served = rc.compile_for_cpu(_fresh(vecadd.vecadd))  # the rebuilt entry serves the next process
    assert served.from_cache and calls["codegen"] == 2


def test_tile_and_barrier_kernels_load_from_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    soft = _module(tmp_path, monkeypatch, "tile_softmax", "tile_softmax_cpu_cached")
    calls = _count(monkeypatch)
    soft.main()
    red = _module(tmp_path, monkeypatch, "reduce_sum", "reduce_sum_cpu_cached")
    red.main(1 << 12)
    assert calls["codegen"] == 2
    tile_ck = rc.compile_for_cpu(_fresh(soft.softmax.specialize(cols=1000)))  # the specialisation main() ran
    red_ck = rc.compile_for_cpu(_fresh(red.reduce_sum))
    assert calls["codegen"] == 2 and tile_ck.from_cache and red_ck.from_cache
    assert isinstance(tile_ck.cpu_entry, machine_code.ProgramsOnHost) and tile_ck.cpu_entry.recipe["module"] == "regions"
    assert red_ck.cpu_entry.recipe["module"] == "regions"
    soft.main()  # launched again, from the loaded objects
    red.main(1 << 12)
    assert calls["codegen"] == 2


def test_fresh_process_hits(tmp_path: Path) -> None:
    """Two processes: the second loads the object (no checker, no codegen) and is right."""
    env = dict(os.environ, ANODIZE_CACHE="on", ANODIZE_CACHE_DIR=str(tmp_path / "cache"), ANODIZE_DEVICE="cpu")
    code = ("import sys; sys.path.insert(0, 'examples'); import vecadd, anodize as az\n"
            "from anodize.runtime import compile as rc\n"
            "vecadd.main(4096)\n"
            "ck = next(iter(vecadd.vecadd.store.compiled.values()))\n"
            "print('FROM_CACHE', ck.from_cache, 'checker' in str(sorted(sys.modules)) and 'anodize.checker.api' in sys.modules)\n")
    outs = [subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300) for _ in range(2)]
    for o in outs:
        assert o.returncode == 0, o.stderr
    assert "FROM_CACHE False True" in outs[0].stdout
    assert "FROM_CACHE True False" in outs[1].stdout  # served from disk: the checker never imported


def test_every_truncation_of_an_object_is_refused_before_llvm(vecadd) -> None:
    """LLVM's loader trusts an object's layout (a truncated one crashes the process): every
    prefix of a real object is refused by `check_object` first."""
    first = rc.compile_for_cpu(_fresh(vecadd.vecadd))
    recipe, obj = machine_code.recipe_of(first.cpu_entry)
    machine_code.check_object(obj)
    for cut in range(len(obj)):
        with pytest.raises(ValueError):
            machine_code.entry_from_object(recipe, first.params, obj[:cut])
