"""Shared pytest setup: the `gpu` marker skips cleanly when no usable CUDA GPU is present."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from typing import Any

import pytest


def _gpu_available() -> bool:
    try:
        from anodize.runtime import gpu_available

        return gpu_available()
    except Exception:  # a broken install must not break collection
        return False


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped cleanly when none is present")
    # The session holds many long-lived objects (parsed modules, typed IR, compiled kernels):
    # with CPython's default thresholds (700, 10, 10) the cyclic collector rescans them over and
    # over (about a tenth of the CPU time of the codegen and checker tests).  Collect the young
    # generation less often and the old one rarely; tests that need garbage gone call gc.collect().
    gc.set_threshold(50_000, 20, 20)


# Folders whose test files run on one pytest-xdist worker (pyproject's `-n 2 --dist loadfile`
# gives each file to one worker): tests/mypy's files share the session's cold mypy run over
# every fixture (tests/mypy/conftest.py, `fixtures_run`, 5 s), which a second worker would redo.
ONE_WORKER_FOLDERS = ("tests/mypy/",)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FilesAndFolders(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            folder = next((f for f in ONE_WORKER_FOLDERS if nodeid.startswith(f)), None)
            return folder if folder is not None else super()._split_scope(nodeid)

    return FilesAndFolders(config, log)


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After each test file, what survives it (module-level kernels, the front's parsed
    modules, compiled artifacts) leaves the collector's reach (`gc.freeze`): later files do
    not rescan it.  Only cyclic garbage among those objects would stay; refcounting still
    frees the rest."""
    if nextitem is None or getattr(nextitem, "module", None) is not getattr(item, "module", None):
        gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    if _gpu_available():
        return
    skip = pytest.mark.skip(reason="no usable CUDA GPU (anodize.runtime.gpu_available() is False)")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_disk_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never read or write the user's compile cache; it is off unless a test turns it on
    (tests/test_disk_cache_compile.py does, in a folder of its own)."""
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "anodize-cache"))
    monkeypatch.setenv("ANODIZE_CACHE", "off")


@pytest.fixture(autouse=True, scope="session")
def _one_cpu_compile_per_source() -> Iterator[None]:
    """The runtime's CPU compile (`anodize.runtime.compile._codegen_cpu`) once per kernel source
    for the whole session: the examples and fixtures are loaded afresh by several test files
    (test_examples, test_accept_fixtures, test_debug_device, the sanitizer runner), each load a
    new `Kernel` whose own cache is empty.  The key is the runtime's own `source_hash` (module
    text, path, kernel, specialisation), the options and the codegen's environment knobs;
    the checker still runs for every kernel object.  A test that replaces `_codegen_cpu`
    (monkeypatch) replaces this too, for its duration."""
    from anodize.runtime import compile as rc

    real = rc._codegen_cpu
    memo: dict[tuple[object, ...], object] = {}

    def codegen(kernel: Any, **options: Any) -> Any:
        key = (rc.source_hash(kernel), tuple(sorted(options.items())), os.environ.get("ANODIZE_COARSEN_CHUNKS"), os.environ.get("ANODIZE_CPU_ISA"))
        hit = memo.get(key)
        if hit is None:
            hit = memo[key] = real(kernel, **options)
        return hit

    rc._codegen_cpu = codegen  # type: ignore[assignment]
    yield
    rc._codegen_cpu = real  # type: ignore[assignment]


@pytest.fixture(autouse=True, scope="session")
def _one_llvm_build_per_module() -> Iterator[None]:
    """LLVM's work on a module once per module text for the whole session: the CPU backend's JIT
    (`CpuModule`, `RegionModule`: parse, the O3 pipeline, machine code) and the GPU target's
    `emit_ptx` (parse, libdevice, the O3 pipeline, PTX).  Both are pure functions of their
    arguments (the JIT'd code keeps no state of its own: its globals are constants, shared
    memory and frames are passed in), and several files build the same kernels (a fixture run
    by its own test and by test_accept_fixtures, a kernel at two data sizes, the same tile
    kernel for two tests).  Our lowering still runs for every compile and produces the text
    that is the key; only LLVM's repeat of identical work is skipped (17 of its 94 CPU-seconds
    in the run this was measured on).  A cached JIT module is a new object sharing the first
    one's engine."""
    from anodize.codegen.cpu import engine as cpu
    from anodize.codegen.gpu import ptx

    patched: list[tuple[Any, str, Any]] = []

    def memo_init(cls: Any) -> None:
        real = cls.__init__
        built: dict[object, dict[str, Any]] = {}

        def init(self: Any, *args: Any, **kw: Any) -> None:
            try:
                key = (args, tuple(sorted(kw.items())))
                hit = built.get(key)
            except TypeError:  # an unhashable argument: no memo
                real(self, *args, **kw)
                return
            if hit is None:
                real(self, *args, **kw)
                built[key] = dict(self.__dict__)
            else:
                self.__dict__.update(hit)

        patched.append((cls, "__init__", real))
        cls.__init__ = init

    memo_init(cpu.CpuModule)
    memo_init(cpu.RegionModule)

    real_emit = ptx.emit_ptx
    emitted: dict[object, tuple[str, str]] = {}

    def emit_ptx(llvm_ir: str, entry: str, arch: str = ptx.DEFAULT_ARCH, opt: int = 3) -> tuple[str, str]:
        env = tuple(os.environ.get(v) for v in ("ANODIZE_LIBDEVICE", "CUDA_HOME", "CUDA_PATH"))
        key = (llvm_ir, entry, arch, opt, env)
        hit = emitted.get(key)
        if hit is None:
            hit = emitted[key] = real_emit(llvm_ir, entry, arch, opt)
        return hit

    patched.append((ptx, "emit_ptx", real_emit))
    ptx.emit_ptx = emit_ptx  # type: ignore[assignment]
    yield
    for owner, name, value in patched:
        setattr(owner, name, value)
