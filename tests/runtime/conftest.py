"""Runtime test fixtures: the CPU device, the GPU device, and the backend that compiles kernels.

`backend` runs a test twice: once with the fake CPU codegen (runtime logic in
isolation) and once with the real compiler (`anodize.codegen.driver`), the
second skipped only while that module does not exist yet.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from typing import Any
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import rt_fake_backend  # noqa: E402
import rt_kernels  # noqa: E402

from anodize.kernel import Kernel  # noqa: E402
from anodize.runtime.device import Device, cpu_device  # noqa: E402


def _kernels() -> list[Kernel]:
    return [v for v in vars(rt_kernels).values() if isinstance(v, Kernel)]


def _reset_kernels() -> None:
    for k in _kernels():
        k.store.clear()


# The real codegen's artifacts of rt_kernels, kept across the `cpu-real` tests (a test-only
# speedup: each kernel is checked and compiled once per session, not once per test).  Only
# the artifacts and the checker's verdict travel; launchers, plans and loaded kernels are
# made fresh in every test, as before.
_REAL_ARTIFACTS: dict[int, tuple[dict[tuple[object, ...], Any], str | None, str | None]] = {}


def _restore_real_artifacts() -> None:
    for k in _kernels():
        kept = _REAL_ARTIFACTS.get(id(k))
        if kept is not None:
            k.store.compiled.update(kept[0])
            k.store.checked, k.store.source_hash = kept[1], kept[2]


def _keep_real_artifacts() -> None:
    for k in _kernels():
        compiled, checked, digest = _REAL_ARTIFACTS.get(id(k), ({}, None, None))
        compiled.update(k.store.compiled)
        _REAL_ARTIFACTS[id(k)] = (compiled, k.store.checked or checked, k.store.source_hash or digest)


def real_codegen_present() -> bool:
    return importlib.util.find_spec("anodize.codegen.driver") is not None


def _checker_present() -> bool:
    return importlib.util.find_spec("anodize.checker.api") is not None


def _drain(dev: Device) -> Device:
    try:
        dev.check()
    except Exception:  # a fault left over from an earlier test
        pass
    return dev


@pytest.fixture(params=["cpu-fake", "cpu-real", pytest.param("gpu", marks=pytest.mark.gpu)])
def dev(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Device]:
    """The device under test: CPU with the fake codegen, CPU with the real one, and a GPU (real)."""
    _reset_kernels()
    if not _checker_present():  # transitional: until the checker's gate lands, compile unchecked
        from anodize.runtime import compile as rt_compile

        monkeypatch.setattr(rt_compile, "_enforce", lambda k: None)
    if request.param == "cpu-fake":
        rt_fake_backend.install(monkeypatch)
        d = cpu_device()
    elif not real_codegen_present():
        pytest.skip("anodize.codegen.driver is not there yet")
    elif request.param == "cpu-real":
        _restore_real_artifacts()
        d = cpu_device()
    else:
        from anodize.runtime.device import device

        d = device(0)
    yield _drain(d)
    _drain(d)
    if request.param == "cpu-real" and _checker_present():
        _keep_real_artifacts()
    _reset_kernels()


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    _reset_kernels()
    rt_fake_backend.install(monkeypatch)
    yield
    _reset_kernels()


@pytest.fixture
def cpu() -> Device:
    return _drain(cpu_device())


@pytest.fixture
def gpu() -> Iterator[Device]:
    from anodize.runtime.device import device

    _reset_kernels()
    yield _drain(device(0))
    _reset_kernels()


@pytest.fixture
def plan_runs(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Call it to start counting: it returns the list that gets the argument count of every
    launch from then on that takes a plan's full run (`_Plan.run`), not a launcher's memo or
    quick path."""
    from anodize.runtime import launch as rt_launch

    def start() -> list[int]:
        seen: list[int] = []
        real = rt_launch._Plan.run

        def spy(self: Any, args: tuple[Any, ...], record: Any = None) -> bool:
            seen.append(len(args))
            return real(self, args, record)

        monkeypatch.setattr(rt_launch._Plan, "run", spy)
        return seen

    return start


class _Pending:  # an in-flight submission that uses no memory of the launches under test
    marker = None

    def poll(self) -> bool:
        return False

    def describe(self) -> str:
        return "a pending op"


@pytest.fixture
def pending_op(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Call it to put a pending in-flight submission in place (undone after the test)."""
    from anodize.runtime import inflight

    return lambda: monkeypatch.setitem(inflight._ACTIVE, -1, (_Pending(), ()))
