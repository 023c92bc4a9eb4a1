"""The rule engine's results for each module, reported through mypy.

`anodize check` and the plugin share one engine (`anodize.checker.api.check_source`):
kernel bodies, contracts, and the launch sites it can resolve.  The plugin reports
that module's diagnostics at their own lines, columns, codes and messages whenever
one of its hooks fires in the module (mypy drops the repeats), so an editor shows
exactly what `anodize check` prints.

The engine runs once per module content, by default (Linux, two or more usable CPUs) in one
forked worker process: when mypy has parsed a module that imports anodize
(`get_additional_deps`), the module goes to the worker, which checks it while mypy
type-checks the standard library and NumPy, so a cold run pays the engine on another core.
`ANODIZE_MYPY_WORKERS=N` sets the number of workers; 0 runs the engine in mypy's process.
A run on a warm cache parses no module, so it starts no worker.  A module whose errors
mypy drops (an installed package, `ignore_errors`, a file-level `# type: ignore`) is
not checked at all: mypy would show none of its diagnostics.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import hashlib
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from anodize.language.records import dataclass

from mypy.errors import ErrorWatcher
from mypy.nodes import Context, Import, ImportAll, ImportFrom, MypyFile
from mypy.plugin import CheckerPluginInterface
from mypy.util import decode_python_encoding

from anodize.language.diagnostics import Diagnostic

from .codes import report

if TYPE_CHECKING:
    from concurrent.futures import Future


@dataclass(frozen=True)
class ModuleResult:
    digest: str
    diagnostics: tuple[Diagnostic, ...]
    failure: str | None  # the engine could not run: why, in one line
    started_ns: int  # when the engine read the module (and the modules it imports)
    # the `requires=` texts by the lambda's (line, column), read in the worker (`kernels.requires_texts`);
    # None when the engine ran in this process (its front is cached here)
    requires: Mapping[tuple[int, int], str | None] | None = None


_results: dict[str, ModuleResult] = {}  # by absolute path; the process lives on under dmypy
# by absolute path: (the tree mypy parsed, the digest of the source read right after, when, the future)
_pending: dict[str, tuple[MypyFile, str, int, Future[_WorkerResult]]] = {}
_pool: ProcessPoolExecutor | None = None  # type: ignore[no-any-unimported,unused-ignore]
_pool_broken = False
# the module mypy is checking now: its tree, the tree's statements, its result and the files it
# imports (one entry).  The statements list tells one parse from the next: dmypy's fine-grained
# update parses an edited module again and merges the new tree into the old MypyFile object
# (mypy.server.astmerge), so the tree alone stays the same object across edits.
_last: dict[str, tuple[MypyFile, object, ModuleResult, tuple[str, ...]]] = {}


# ---- the engine itself (runs in a worker or in-process) -------------------------------------


_project: object | None = None  # the engine's import resolver, shared by a process's modules


def run_engine(source: str, path: str) -> tuple[tuple[Diagnostic, ...], str | None]:
    global _project
    collecting = gc.isenabled()
    gc.disable()  # the engine's first import builds hundreds of classes and functions: the
    try:  # collector's passes over them cost 5-10% of a worker's CPU and free nothing
        from anodize.checker.api import check_source
        from anodize.checker.engine import Project
    except ImportError as exc:  # the engine is not installed: typing still works
        return (), f"the anodize rule engine is unavailable ({exc})"
    finally:
        if collecting:
            gc.enable()
    try:
        if _project is None:
            _project = Project()
        return tuple(check_source(source, path, _project)), None  # type: ignore[arg-type]
    except Exception as exc:  # an engine bug must not crash the user's mypy run
        return (), f"the anodize checker failed on this module: {type(exc).__name__}: {exc}"


_WorkerResult = tuple[tuple[Diagnostic, ...], str | None, dict[tuple[int, int], str | None]]


def _worker_run(source: str, path: str) -> _WorkerResult:
    """`run_engine` in a worker (sent by name, so that the call in mypy's process is the only
    one `run_engine` sees there), and the module's `requires=` texts, which mypy's process
    would otherwise read from a second parse of the module (`kernels.requires_text`)."""
    diags, failure = run_engine(source, path)
    texts: dict[tuple[int, int], str | None] = {}
    if failure is None and "lambda" in source:
        try:
            from anodize.language.front import front_for_source

            from .kernels import requires_texts

            texts = requires_texts(front_for_source(source, path))  # the engine's front: cached
        except Exception:  # mypy's process reads them itself
            texts = {}
    return diags, failure, texts


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def read_source(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return decode_python_encoding(fh.read())
    except OSError:
        return None


# ---- starting early ---------------------------------------------------------------------------


def _workers() -> int:
    """Worker processes for the engine: `ANODIZE_MYPY_WORKERS` if set, else 1 when this
    process may run on two or more CPUs (mypy itself uses one), else 0 (in mypy's process).
    Workers start with `fork` (mypy's parser threads have ended by then), so Linux only."""
    if sys.platform != "linux":
        return 0
    env = os.environ.get("ANODIZE_MYPY_WORKERS", "").strip()
    if env:
        return int(env) if env.isdigit() else 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return 1 if cpus >= 2 else 0


def _worker_init(parent: int) -> None:
    """Workers end with mypy: mypy leaves with `os._exit`, which skips the pool's shutdown."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(0)
    gc.freeze()  # mypy's heap, inherited: never traversed (nor copied page by page) by the collector here
    devnull = os.open(os.devnull, os.O_RDWR)  # never hold mypy's output pipes open
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)


def _get_pool() -> ProcessPoolExecutor | None:
    global _pool, _pool_broken
    if _pool is None and not _pool_broken:
        n = _workers()
        if n == 0:
            _pool_broken = True
            return None
        try:
            _pool = ProcessPoolExecutor(
                max_workers=n,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_worker_init,
                initargs=(os.getpid(),),
            )
            atexit.register(_disable_pool)  # a process that exits normally (not mypy's os._exit) ends it first
        except (OSError, ValueError):
            _pool_broken = True
    return _pool


def imports_anodize(tree: MypyFile) -> bool:
    for imp in tree.imports:
        ids = [i for i, _ in imp.ids] if isinstance(imp, Import) else [imp.id] if isinstance(imp, (ImportFrom, ImportAll)) else []
        if any(i == "anodize" or i.startswith("anodize.") for i in ids):
            return True
    return False


def is_user_module(tree: MypyFile) -> bool:
    path = tree.path or ""
    return (
        not tree.is_stub
        and path.endswith(".py")
        and not tree.fullname.startswith("anodize.")
        and tree.fullname != "anodize"
        and "site-packages" not in path
        and "dist-packages" not in path
    )


def prefetch(tree: MypyFile) -> None:
    """Start the engine on a module mypy has just parsed, if it uses anodize."""
    if not is_user_module(tree) or not imports_anodize(tree):
        return
    pool = _get_pool()
    if pool is None:
        return
    source = read_source(tree.path)
    if source is None:
        return
    digest = _digest(source)
    key = os.path.abspath(tree.path)
    cached = _results.get(key)
    if cached is not None and cached.digest == digest:
        return
    try:
        fut = pool.submit(_worker_run, source, tree.path)
    except Exception:  # a broken pool: fall back to in-process checks
        _disable_pool()
        return
    _pending[key] = (tree, digest, time.time_ns(), fut)


def _disable_pool() -> None:
    global _pool, _pool_broken
    _pool_broken = True
    if _pool is not None:
        _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None


# ---- results --------------------------------------------------------------------------------


def _dep_paths(api: CheckerPluginInterface, tree: MypyFile) -> tuple[str, ...]:
    """The files of the user modules that `tree` imports (the engine reads their kernels)."""
    modules = getattr(api, "modules", {})
    paths: list[str] = []
    for imp in tree.imports:
        names: list[str] = []
        if isinstance(imp, Import):
            names = [i for i, _ in imp.ids]
        elif isinstance(imp, ImportFrom):
            names = [imp.id] + [f"{imp.id}.{n}" for n, _ in imp.names]
        elif isinstance(imp, ImportAll):
            names = [imp.id]
        for name in names:
            dep = modules.get(name)
            if dep is not None and dep.path and is_user_module(dep):
                paths.append(dep.path)
    return tuple(paths)


# File systems stamp writes with a coarse clock (a jiffy, some milliseconds, behind
# `time.time_ns()`): a file written just after the engine started may carry an earlier time.
_CLOCK_SLACK_NS = 50_000_000


def _unchanged_since(paths: tuple[str, ...], since_ns: int) -> bool:
    """Whether none of `paths` was written after `since_ns` (dmypy reuses results); a write
    within the file system clock's slack before it counts as after (the engine runs again)."""
    for path in paths:
        try:
            if os.stat(path).st_mtime_ns > since_ns - _CLOCK_SLACK_NS:
                return False
        except OSError:
            return False
    return True


def _errors_dropped(api: CheckerPluginInterface, path: str) -> bool:
    """Whether mypy drops every error of the module being checked (an installed package
    such as anodize's own runtime, `ignore_errors`, a file-level `# type: ignore`): the
    engine's results there would never show, so the engine does not run."""
    skip = getattr(api, "can_skip_diagnostics", None)  # mypy's own test for the same thing
    if isinstance(skip, bool):
        return skip
    options = getattr(api, "options", None)
    errors = getattr(getattr(api, "msg", None), "errors", None)
    return bool(getattr(options, "ignore_errors", False)) or path in getattr(errors, "ignored_files", ())


def module_result(api: CheckerPluginInterface) -> ModuleResult | None:
    """The engine's result for the module mypy is checking now (computed once per content)."""
    tree: MypyFile | None = getattr(api, "tree", None)
    path: str = getattr(api, "path", "") or ""
    if tree is None or not path or _errors_dropped(api, path):
        return None
    last = _last.get(path)
    if last is not None and last[0] is tree and last[1] is tree.defs and _unchanged_since(last[3], last[2].started_ns):
        return last[2]  # a further hook in the same parse of the module: no second read of its file
    key = os.path.abspath(path)
    deps = _dep_paths(api, tree)
    pending = _pending.pop(key, None)
    result: ModuleResult | None = None
    if pending is not None and pending[0] is tree and _unchanged_since(deps, pending[2]):
        # the tree mypy checks is the one it parsed when the module went to the worker, whose
        # source was read right then: no second read (a new parse would be a new tree)
        try:
            diags, failure, texts = pending[3].result()
            result = ModuleResult(pending[1], diags, failure, pending[2], texts)
        except Exception:  # the worker died: run it here instead
            _disable_pool()
    if result is None:
        source = read_source(path)
        if source is None:
            return None
        digest = _digest(source)
        cached = _results.get(key)
        if cached is not None and cached.digest == digest and _unchanged_since(deps, cached.started_ns):
            _remember(path, tree, cached, deps)
            return cached
        if pending is not None and pending[1] == digest and pending[0] is not tree and _unchanged_since(deps, pending[2]):
            try:  # (the same text parsed again: the worker's result holds)
                diags, failure, texts = pending[3].result()
                result = ModuleResult(digest, diags, failure, pending[2], texts)
            except Exception:
                _disable_pool()
    if result is None:
        started = time.time_ns()
        diags, failure = run_engine(source, path)
        result = ModuleResult(digest, diags, failure, started)
    _results[key] = result
    _remember(path, tree, result, deps)
    return result


def _remember(path: str, tree: MypyFile, result: ModuleResult, deps: tuple[str, ...]) -> None:
    _last.clear()
    _last[path] = (tree, tree.defs, result, deps)
    _error_lines[path] = frozenset(d.span.line for d in result.diagnostics if d.severity == "error")


def report_module(api: CheckerPluginInterface) -> ModuleResult | None:
    """Report every diagnostic the engine gives the current module (mypy drops repeats)."""
    result = module_result(api)
    if result is None:
        return None
    filter_doubles(api)
    if result.failure is not None:
        api.msg.note(f"anodize: {result.failure}", Context(1, 0))
        return result
    for diag in result.diagnostics:
        report(api, diag, final=True)
    return result


# ---- one report per root cause ---------------------------------------------------------------

# by mypy's path of a module: the lines where the engine reports an error (the module's latest result)
_error_lines: dict[str, frozenset[int]] = {}


def _is_double(file: str, info: Any) -> bool:
    """Whether mypy's own error `info` stands on a line where the engine reports an error: an
    `[index]` beside `az-shared-write` for a write to a `Slice` (once per member of a
    constrained TypeVar), an `[arg-type]` beside `az-launch-rank`.  `anodize check` shows
    the one error; so does mypy.  The engine's errors themselves, and blockers, stay."""
    if info.blocker or (info.code is not None and str(info.code.code).startswith("az-")):
        return False
    lines = _error_lines.get(file)
    return lines is not None and info.line in lines


def filter_doubles(api: CheckerPluginInterface) -> None:
    """Put `_is_double` at the bottom of mypy's error-watcher stack (once per `Errors` state:
    dmypy resets it on each update).  mypy checks function bodies after the module's top level,
    so a filter in place before the body is checked is the only way to keep its repeats out."""
    errors = getattr(api.msg, "errors", None)
    watchers = getattr(errors, "_watchers", None)
    if not isinstance(watchers, list) or any(w is _installed[0] for w in watchers[:1] if _installed):
        return
    try:
        watcher = ErrorWatcher(errors, filter_errors=_is_double)
    except Exception:  # a mypy without this API: the repeats stay
        return
    watchers.insert(0, watcher)
    _installed[:] = [watcher]


_installed: list[object] = []  # the watcher put in place last


def engine_reported(api: CheckerPluginInterface, code: str, first_line: int, last_line: int) -> bool:
    """Whether the engine already reports `code` on one of these lines of the current module."""
    result = module_result(api)
    if result is None or result.failure is not None:
        return False
    return any(d.code == code and first_line <= d.span.line <= last_line for d in result.diagnostics)


__all__ = ["ModuleResult", "engine_reported", "filter_doubles", "module_result", "prefetch", "report_module", "run_engine"]
