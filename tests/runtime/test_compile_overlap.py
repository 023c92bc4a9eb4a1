"""The checker gates codegen (runtime/compile.py): codegen lowers the typed model the checker
passed, so it runs after the checker and never for a rejected kernel."""

from __future__ import annotations

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


def test_a_rejected_kernel_never_reaches_codegen(monkeypatch: pytest.MonkeyPatch) -> None:
    err = _check_error()
    built: list[int] = []

    def codegen(*a: Any, **kw: Any) -> Any:
        built.append(1)
        raise AssertionError("codegen ran for a kernel the checker rejected")

    monkeypatch.setattr(rc, "_enforce", lambda k: (_ for _ in ()).throw(err))
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    with pytest.raises(CheckError):
        rc.compile_for_gpu(vecadd, "sm_90")
    assert built == []
    assert not any(isinstance(v, rc.CompiledKernel) for v in vecadd._cache.values())


def test_codegen_errors_surface_once_the_checker_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    def codegen(*a: Any, **kw: Any) -> Any:
        raise RuntimeError("codegen failure")

    monkeypatch.setattr(rc, "_enforce", lambda k: None)
    monkeypatch.setattr(rc, "_codegen_gpu", codegen)
    with pytest.raises(RuntimeError, match="codegen failure"):
        rc.compile_for_gpu(vecadd, "sm_90")
