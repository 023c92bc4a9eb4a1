"""The checker gates codegen (runtime/compile.py).  By default a first GPU compile runs codegen
to the PTX and starts ptxas before the checker's verdict (the checker then runs while ptxas
assembles); that work is speculative: a kernel the checker rejects yields no artifact --
none returned, cached in memory or on disk, or loaded -- and the checker's error, the same
as with `ANODIZE_COMPILE_OVERLAP=0`, is what the caller sees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rt_kernels import vecadd
from rt_race_kernels import racy_sum

from anodize.codegen.gpu import ptx as ptx_mod
from anodize.codegen import toolchain
from anodize.language.diagnostics import CheckError
from anodize.runtime import compile as rc


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    monkeypatch.delenv("ANODIZE_COMPILE_OVERLAP", raising=False)
    for k in (vecadd, racy_sum):
        k.store.clear()
    yield
    for k in (vecadd, racy_sum):
        k.store.clear()


class FakeJob:
    """Stands in for ptxas (`ptx.PtxasJob`): records what it was given and whether it was stopped."""

    made: list[FakeJob] = []

    def __init__(self, ptx: str, arch: str, **kw: Any):
        self.ptx, self.arch, self.cancelled, self.waited = ptx, arch, False, False
        FakeJob.made.append(self)

    def result(self) -> Any:
        from anodize.codegen.artifact import Resources

        self.waited = True
        return b"cubin", Resources()

    def cancel(self) -> None:
        self.cancelled = True


@pytest.fixture
def fake_ptxas(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> type[FakeJob]:
    """A ptxas that is "installed" (so the overlap is on) but never runs."""
    FakeJob.made = []
    exe = tmp_path_factory.mktemp("bin") / "ptxas"
    exe.write_text("#!/bin/sh\nexit 1\n")
    monkeypatch.setattr(toolchain, "find_ptxas", lambda: str(exe))
    monkeypatch.setattr(ptx_mod, "find_ptxas", lambda: str(exe))
    monkeypatch.setattr(ptx_mod, "PtxasJob", FakeJob)
    return FakeJob


def _check_error() -> CheckError:
    try:
        from anodize.language import messages
        from anodize.language.diagnostics import Span

        raise CheckError([messages.unsupported(Span.point("k.py", 1, 0), "tuple-unpacking")])
    except CheckError as e:
        return e


def _no_artifact(kernel: Any) -> bool:
    return not kernel.store.compiled and not kernel.store.loaded and kernel.store.checked is None


def test_the_overlap_is_the_default_where_ptxas_is(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(toolchain, "find_ptxas", lambda: "/fake/ptxas")
    assert rc.overlap_enabled()
    for off in ("0", "off", "false"):
        monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", off)
        assert not rc.overlap_enabled()
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", "1")
    monkeypatch.setattr(toolchain, "find_ptxas", lambda: None)
    assert not rc.overlap_enabled()  # nothing to overlap without ptxas


def test_a_rejected_kernel_yields_no_artifact_with_the_overlap(fake_ptxas: type[FakeJob], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    returned: list[Any] = []
    from anodize.codegen import driver

    real_start = driver.start_gpu

    def start(*a: Any, **kw: Any) -> Any:
        p = real_start(*a, **kw)
        returned.append(p)
        return p

    monkeypatch.setattr(driver, "start_gpu", start)
    for _ in range(2):  # and again: nothing of the first attempt was kept
        with pytest.raises(CheckError) as e:
            rc.compile_for_gpu(racy_sum, "sm_90")
        assert "az-shared-race" in str(e.value)
    # the speculation did run (codegen to the PTX, ptxas started) and was dropped
    assert len(fake_ptxas.made) == 2 and all(j.cancelled and not j.waited for j in fake_ptxas.made)
    assert ".entry racy_sum" in fake_ptxas.made[0].ptx
    assert all(p.cancelled and p.out is None for p in returned)
    with pytest.raises(RuntimeError, match="cancelled"):
        returned[0].result()
    assert _no_artifact(racy_sum)
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(p.is_file() for p in cache.rglob("*"))


def test_the_overlap_raises_the_same_error_as_checking_first(fake_ptxas: type[FakeJob], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(CheckError) as overlapped:
        rc.compile_for_gpu(racy_sum, "sm_90")
    assert fake_ptxas.made, "the overlap did not run"
    racy_sum.store.clear()
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", "0")
    fake_ptxas.made.clear()
    with pytest.raises(CheckError) as first:
        rc.compile_for_gpu(racy_sum, "sm_90")
    assert not fake_ptxas.made  # checker first: codegen never started
    assert str(overlapped.value) == str(first.value)
    assert [(d.code, d.span) for d in overlapped.value.diagnostics] == [(d.code, d.span) for d in first.value.diagnostics]


def test_a_rejected_kernel_is_never_loaded(fake_ptxas: type[FakeJob]) -> None:
    loaded: list[Any] = []

    class Gpu:
        kind, arch = "cuda", "sm_90"

        def load(self, compiled: Any) -> Any:
            loaded.append(compiled)

    with pytest.raises(CheckError):
        rc.compile_for_device(racy_sum, Gpu())  # type: ignore[arg-type]
    assert fake_ptxas.made and loaded == [] and _no_artifact(racy_sum)


def test_the_artifact_leaves_only_after_the_checker_passed(fake_ptxas: type[FakeJob], monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_enforce = rc._enforce

    def enforce(k: Any) -> None:
        events.append("check start")
        real_enforce(k)
        events.append("check passed")

    def started(ptx: str, arch: str, **kw: Any) -> FakeJob:
        events.append("ptxas start")
        return FakeJob(ptx, arch, **kw)

    monkeypatch.setattr(rc, "_enforce", enforce)
    monkeypatch.setattr(ptx_mod, "PtxasJob", started)
    out = rc.compile_for_gpu(vecadd, "sm_90")
    assert events == ["ptxas start", "check start", "check passed"]
    assert out.cubin == b"cubin" and fake_ptxas.made[0].waited


@pytest.mark.parametrize("overlap", ["1", "0"])
def test_the_checkers_error_wins_over_codegens(overlap: str, fake_ptxas: type[FakeJob], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", overlap)
    err = _check_error()

    def enforce(k: Any) -> None:
        raise err

    def codegen(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("codegen crashed on a kernel the checker rejects")

    from anodize.codegen import driver

    monkeypatch.setattr(rc, "_enforce", enforce)
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    monkeypatch.setattr(driver, "start_gpu", codegen)
    with pytest.raises(CheckError) as e:
        rc.compile_for_gpu(vecadd, "sm_90")
    assert e.value is err
    assert _no_artifact(vecadd)


def test_checking_first_never_reaches_codegen_for_a_rejected_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", "0")
    err = _check_error()
    built: list[int] = []

    def codegen(*a: Any, **kw: Any) -> Any:
        built.append(1)
        raise AssertionError("codegen ran for a kernel the checker rejected")

    from anodize.codegen import driver

    monkeypatch.setattr(rc, "_enforce", lambda k: (_ for _ in ()).throw(err))
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    monkeypatch.setattr(driver, "start_gpu", codegen)
    with pytest.raises(CheckError):
        rc.compile_for_gpu(vecadd, "sm_90")
    assert built == []
    assert _no_artifact(vecadd)


@pytest.mark.parametrize("overlap", ["1", "0"])
def test_codegen_errors_surface_once_the_checker_passed(overlap: str, fake_ptxas: type[FakeJob], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", overlap)

    def codegen(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("codegen failure")

    from anodize.codegen import driver

    monkeypatch.setattr(rc, "_enforce", lambda k: None)
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    monkeypatch.setattr(driver, "start_gpu", codegen)
    with pytest.raises(RuntimeError, match="codegen failure"):
        rc.compile_for_gpu(vecadd, "sm_90")


@pytest.mark.skipif(toolchain.find_ptxas() is None, reason="ptxas is not installed")
def test_a_rejected_kernels_ptxas_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the real ptxas: the speculative child process is gone once CheckError is raised."""
    jobs: list[Any] = []
    real = ptx_mod.PtxasJob

    def job(*a: Any, **kw: Any) -> Any:
        j = real(*a, **kw)
        jobs.append(j)
        return j

    monkeypatch.setattr(ptx_mod, "PtxasJob", job)
    with pytest.raises(CheckError):
        rc.compile_for_gpu(racy_sum, "sm_90")
    assert len(jobs) == 1 and jobs[0]._proc.poll() is not None
    assert not Path(jobs[0]._dir.name).exists()  # its PTX and any cubin are deleted
    assert _no_artifact(racy_sum)


def test_a_passing_kernel_is_cached_once_the_checker_passed(fake_ptxas: type[FakeJob], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The overlap's artifact is the one cached, in memory and on disk, and served from there."""
    from anodize.kernel import Kernel
    from anodize.runtime import diskcache

    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    first = rc.compile_for_gpu(vecadd, "sm_90")
    assert rc.compile_for_gpu(vecadd, "sm_90") is first and vecadd.store.checked
    assert len(fake_ptxas.made) == 1 and diskcache.info()["entries"] == 1
    again = rc.compile_for_gpu(Kernel(vecadd.fn, vecadd.contract_spec), "sm_90")  # a new process's kernel object
    assert len(fake_ptxas.made) == 1 and again.ptx == first.ptx and again.cubin == b"cubin"


def test_ptxas_starts_as_soon_as_the_ptx_is_there(fake_ptxas: type[FakeJob], monkeypatch: pytest.MonkeyPatch) -> None:
    """The artifact (and a tile kernel's matmul report) is made while ptxas runs, not before it starts."""
    from anodize.codegen import driver

    started_before: list[int] = []
    artifact = driver._artifact

    def noting(*a: Any, **kw: Any) -> Any:
        started_before.append(len(fake_ptxas.made))
        return artifact(*a, **kw)

    monkeypatch.setattr(driver, "_artifact", noting)
    pending = driver.start_gpu(vecadd, "sm_90")
    assert started_before == [1] and pending.job is fake_ptxas.made[0]
    assert pending.result().cubin == b"cubin"


def test_a_compile_failing_after_ptxas_started_stops_it(fake_ptxas: type[FakeJob], monkeypatch: pytest.MonkeyPatch) -> None:
    from anodize.codegen import driver

    def fail(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("no such foreign function")

    monkeypatch.setattr(driver, "foreign_links", fail)
    with pytest.raises(RuntimeError, match="no such foreign"):
        driver.start_gpu(vecadd, "sm_90")
    assert len(fake_ptxas.made) == 1 and fake_ptxas.made[0].cancelled
