"""The persistent compile cache on the real compile path: hit, miss, invalidation, corruption."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anodize.runtime import artifact_store, compile as rc, diskcache

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def vecadd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    src = (ROOT / "examples" / "vecadd.py").read_text()
    mod_path = tmp_path / "vecadd_cached.py"
    mod_path.write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("vecadd_cached", None)
    import vecadd_cached

    return vecadd_cached


def _fresh(mod):
    """A new Kernel object over the same function, i.e. what a new process would hold."""
    from anodize.kernel import Kernel

    return Kernel(mod.vecadd.fn, mod.vecadd.contract_spec)


def _count_calls(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"check": 0, "codegen": 0}
    real_enforce, real_codegen = rc._enforce, rc._codegen_gpu

    def enforce(k):
        calls["check"] += 1
        return real_enforce(k)

    def codegen(*a, **kw):
        calls["codegen"] += 1
        return real_codegen(*a, **kw)

    monkeypatch.setattr(rc, "_enforce", enforce)
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", "0")  # `_codegen_gpu` is the checker-first path's codegen
    return calls


def test_miss_then_hit_skips_checker_and_codegen(vecadd, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_calls(monkeypatch)
    first = _fresh(vecadd).compile("sm_90")
    assert calls == {"check": 1, "codegen": 1}
    assert diskcache.info()["entries"] == 1
    second = _fresh(vecadd).compile("sm_90")
    assert calls == {"check": 1, "codegen": 1}  # served from disk
    assert second.ptx == first.ptx and second.cubin == first.cubin
    assert second.fault_sites == first.fault_sites and second.params == first.params
    assert second.contract == first.contract


def test_other_arch_and_options_miss(vecadd, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_calls(monkeypatch)
    _fresh(vecadd).compile("sm_90")
    _fresh(vecadd).compile("sm_80")
    _fresh(vecadd).compile("sm_90", bounds_checks=False)
    assert calls["codegen"] == 3
    assert diskcache.info()["entries"] == 3


def test_version_change_invalidates(vecadd, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_calls(monkeypatch)
    _fresh(vecadd).compile("sm_90")
    tool = dict(artifact_store._toolchain())
    monkeypatch.setattr(artifact_store, "_toolchain", lambda: {**tool, "anodize": "999.0"})
    _fresh(vecadd).compile("sm_90")
    assert calls["codegen"] == 2


def test_source_change_invalidates(vecadd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_calls(monkeypatch)
    k = _fresh(vecadd)
    key1 = artifact_store.cache_key(k, "sm_90", {"x": 1})
    path = tmp_path / "vecadd_cached.py"
    path.write_text(path.read_text() + "\n# edited\n")
    import linecache

    linecache.checkcache(str(path))
    assert artifact_store.cache_key(k, "sm_90", {"x": 1}) != key1


def test_compiler_digest_covers_the_compiler_sources() -> None:
    names = {n for n, _ in artifact_store.compiler_files()}
    for must in ("anodize.language/typer.py", "anodize.language/front.py", "anodize.checker/engine.py",
                 "anodize.checker.rules/disjoint_index.py", "anodize.codegen/llvm/lower.py", "anodize.codegen/gpu/ptx.py", "anodize.codegen/tile/mma.py",
                 "anodize.runtime/compile.py", "anodize.runtime/generic.py", "anodize.runtime/artifact_store.py"):
        assert must in names, must
    assert not any(n.startswith("anodize.checker.mypy") for n in names)  # the editor plugin
    assert "anodize.runtime/launch.py" not in names  # the launch path does not shape the binary
    assert all(os.path.isfile(p) for _, p in artifact_store.compiler_files())
    assert artifact_store._toolchain()["compiler"] == artifact_store.compiler_digest()


def test_a_changed_compiler_source_misses(vecadd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Edit one input of the compiler digest (a copy of codegen/gpu/ptx.py stands in for it): the next
    compile misses the disk cache and runs the checker and codegen again; the old entry stays."""
    calls = _count_calls(monkeypatch)
    real = artifact_store.compiler_files()
    (name, path) = next((n, p) for n, p in real if n == "anodize.codegen/gpu/ptx.py")
    copy = tmp_path / "ptx_copy.py"
    copy.write_bytes(Path(path).read_bytes())
    monkeypatch.setattr(artifact_store, "compiler_files", lambda: [(n, str(copy) if n == name else p) for n, p in real])

    def fresh_process() -> None:  # the digest is computed once per process
        artifact_store.compiler_digest.cache_clear()
        artifact_store._toolchain.cache_clear()

    fresh_process()
    _fresh(vecadd).compile("sm_90")
    assert calls == {"check": 1, "codegen": 1}
    fresh_process()
    _fresh(vecadd).compile("sm_90")
    assert calls == {"check": 1, "codegen": 1}  # same sources: a hit
    copy.write_bytes(copy.read_bytes() + b"\n# a changed compiler\n")
    fresh_process()
    _fresh(vecadd).compile("sm_90")
    assert calls == {"check": 2, "codegen": 2}  # a miss: built again
    assert diskcache.info()["entries"] == 2
    monkeypatch.undo()
    fresh_process()


def test_the_compiler_digest_is_computed_once_and_not_at_import() -> None:
    code = (
        "import sys, anodize\n"
        "from anodize.runtime import artifact_store as a\n"
        "print(a.compiler_digest.cache_info().currsize)\n"
        "a.compiler_digest(); a.compiler_digest(); a._toolchain()\n"
        "i = a.compiler_digest.cache_info(); print(i.misses, i.hits)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["0", "1", "2"], out.stdout + out.stderr


def test_corrupted_entry_is_rebuilt(vecadd, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_calls(monkeypatch)
    _fresh(vecadd).compile("sm_90")
    (entry,) = list(diskcache.cache_dir().glob("*/*/meta.json"))
    ptx = entry.parent / "kernel.ptx"
    ptx.write_bytes(ptx.read_bytes()[:100])  # truncated
    again = _fresh(vecadd).compile("sm_90")
    assert calls["codegen"] == 2
    assert ".entry" in again.ptx
    (entry2,) = list(diskcache.cache_dir().glob("*/*/meta.json"))
    meta = json.loads(entry2.read_text())
    assert meta["name"] == "vecadd"
    assert _fresh(vecadd).compile("sm_90").ptx == again.ptx
    assert calls["codegen"] == 2


def test_rejected_kernel_is_never_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import anodize as az

    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    bad = tmp_path / "bad_cached.py"
    bad.write_text(
        "from anodize import kernel, launch_contract, thread, Slice, DisjointSlice, f32\n"
        "@launch_contract(domain=1, block=256)\n"
        "@kernel\n"
        "def bad(a: Slice[f32], c: DisjointSlice[f32]) -> None:\n"
        "    i = thread.index_1d()\n"
        "    if i in c:\n"
        "        c[i] = a[i]\n"
        "        a[i] = 1.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import bad_cached

    for _ in range(2):
        with pytest.raises(az.CheckError):
            bad_cached.bad.compile("sm_90")
    assert diskcache.info()["entries"] == 0
