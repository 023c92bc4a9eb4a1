"""The checker gates codegen even though codegen runs beside it (runtime/compile.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from rt_kernels import vecadd

from anodize.language.diagnostics import CheckError
from anodize.runtime import compile as rc


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    vecadd._cache.clear()
    yield
    vecadd._cache.clear()


def _check_error() -> CheckError:
    try:
        from anodize.language import messages
        from anodize.language.diagnostics import Span

        raise CheckError([messages.unsupported(Span.point("k.py", 1, 0), "tuple-unpacking")])
    except CheckError as e:
        return e


def test_the_checkers_error_wins_over_codegens(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _check_error()

    def enforce(k: Any) -> None:
        raise err

    def codegen(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("codegen crashed on a kernel the checker rejects")

    monkeypatch.setattr(rc, "_enforce", enforce)
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    with pytest.raises(CheckError) as e:
        rc.compile_for_gpu(vecadd, "sm_90")
    assert e.value is err
    assert not any(isinstance(v, rc.CompiledKernel) for v in vecadd._cache.values())


def test_a_rejected_kernel_gets_no_artifact_even_when_codegen_succeeds(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _check_error()
    built: list[int] = []
    real = rc._codegen_gpu

    def codegen(*a: Any, **kw: Any) -> Any:
        built.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(rc, "_enforce", lambda k: (_ for _ in ()).throw(err))
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    with pytest.raises(CheckError):
        rc.compile_for_gpu(vecadd, "sm_90")
    assert built == [1]  # it ran, and its artifact was dropped
    assert not any(isinstance(v, rc.CompiledKernel) for v in vecadd._cache.values())


def test_codegen_errors_surface_once_the_checker_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    def codegen(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("codegen failure")

    monkeypatch.setattr(rc, "_enforce", lambda k: None)
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    with pytest.raises(RuntimeError, match="codegen failure"):
        rc.compile_for_gpu(vecadd, "sm_90")


def test_checker_and_codegen_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    def enforce(k: Any) -> None:
        time.sleep(0.3)

    def codegen(*a: Any, **kw: Any) -> Any:
        time.sleep(0.3)
        return rc.CompiledKernel("vecadd", "vecadd", (), None, 1, "sm_90", "")

    monkeypatch.setattr(rc, "_enforce", enforce)
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    t = time.perf_counter()
    out = rc.compile_for_gpu(vecadd, "sm_90")
    assert out.name == "vecadd"
    assert time.perf_counter() - t < 0.55  # one after the other would take 0.6 s
