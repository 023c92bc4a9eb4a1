"""anodize's mypy plugin: kernel safety errors in the editor, and typed launches.

Enable it with

    [tool.mypy]
    plugins = ["anodize.checker.mypy_plugin"]

This module only dispatches (as pydantic's and django-stubs' plugins do); each hook
lives in a transformer module under `anodize.checker.mypy`, imported when mypy first
asks for one of its hooks, and every rule, code and message comes from
`anodize.checker` itself:

- every module that uses anodize: its `anodize check` results, at the same
  lines, columns, codes and messages (`mypy.engine_results`);
- `@kernel`: the kernel's type carries its name and contract (`mypy.kernels`);
- `k[config]`, `k[config](...)`: host-side parameter types and the launch-site
  rules az-no-contract, az-launch-rank, az-alias and az-requires (`mypy.launches`);
- `dev.empty/zeros/to_device`, `LaunchConfig(...)`, `for_num_elems`, `for_shape`:
  the buffer dtypes/shapes and config ranks/blocks those rules read (`mypy.hostvalues`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import cache
from typing import Any

import mypy
from mypy.nodes import MypyFile
from mypy.plugin import AnalyzeTypeContext, ClassDefContext, FunctionContext, FunctionSigContext, MethodContext, MethodSigContext, Plugin, ReportConfigContext
from mypy.types import FunctionLike, Type

import anodize.language
from anodize.language import VERSION

from .mypy.codes import ERROR_CODES
from .mypy.no_type_check import report_hidden_kernels  # (mypy's nodes only: light)
from .mypy.fullnames import (
    ARRAY_FULLNAME,
    BUNDLE_FULLNAME,
    CONFIG_FULLNAME,
    ELEMENTWISE_CALLS,
    RECORD_FULLNAME,
    FUNC_CALL,
    KERNEL_CLASS,
    TILE_KERNEL_CLASS,
    KERNEL_FULLNAME,
    LAUNCH_CLASS,
    REPORTING_CALLS,
    RUNTIME_PREFIX,
)

__all__ = ["AnodizePlugin", "plugin", "ERROR_CODES"]


@cache
def _rules_digest() -> str:
    """A digest of the checker's and the language's sources, so that mypy's cache drops stale
    results whenever a rule, a typing rule or a message changes (not only on a version bump).

    Each source file counts by its path, size and modification time (ns), the test Python's own
    bytecode cache trusts, so an edit, a reinstall or a checkout changes the digest; reading and
    hashing every source instead cost 3-4 ms of every mypy run, warm ones included."""
    h = hashlib.sha256()
    # the installed anodize.checker package, and the language package whose typer reports
    # the type errors the plugin shows
    roots = (os.path.dirname(os.path.realpath(__file__)), os.path.dirname(os.path.realpath(anodize.language.__file__)))
    try:
        for root in roots:
            h.update(f"{root}\0".encode())
            for rel, size, mtime in _py_stats(root, ""):
                h.update(f"{rel}\0{size}\0{mtime}\0".encode())
    except OSError:
        return "unknown"
    return h.hexdigest()[:16]


def _py_stats(folder: str, rel: str) -> list[tuple[str, int, int]]:
    """(path relative to the root, size, mtime in ns) of every `.py` file under `folder`, sorted."""
    out: list[tuple[str, int, int]] = []
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            name = f"{rel}/{entry.name}" if rel else entry.name
            if entry.name.endswith(".py") and entry.is_file():
                st = entry.stat()
                out.append((name, st.st_size, st.st_mtime_ns))
            elif entry.is_dir() and entry.name != "__pycache__" and not entry.name.startswith("."):
                out.extend(_py_stats(entry.path, name))
    return out


# The hook modules load on the first hook mypy asks for: a run on a warm cache asks for none.
@cache
def _kernels() -> Any:
    from .mypy import kernels

    return kernels


@cache
def _launches() -> Any:
    from .mypy import launches

    return launches


@cache
def _records() -> Any:
    from .mypy import records

    return records


@cache
def _hostvalues() -> Any:
    from .mypy import hostvalues

    return hostvalues


class AnodizePlugin(Plugin):
    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        """No extra dependencies; mypy calls this right after parsing a module, which is when
        the engine starts on it in a worker (`engine_results`: none with one CPU or
        `ANODIZE_MYPY_WORKERS=0`).  A run on a warm cache parses nothing and calls none."""
        from .mypy import engine_results

        engine_results.prefetch(file)
        if not engine_results.is_user_module(file) or not engine_results.imports_anodize(file):
            return []
        return report_hidden_kernels(file)

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        if not fullname.startswith("anodize."):  # (mypy asks for every call it checks)
            if fullname in ELEMENTWISE_CALLS:
                return _kernels().on_elementwise  # type: ignore[no-any-return]
            return None
        if fullname == KERNEL_FULLNAME:
            return _kernels().on_kernel  # type: ignore[no-any-return]
        if fullname in REPORTING_CALLS:
            return _kernels().on_anodize_call  # type: ignore[no-any-return]
        if fullname == CONFIG_FULLNAME:
            return _hostvalues().on_config_new  # type: ignore[no-any-return]
        # any other call of anodize (`thread.index_1d()` in a kernel body, which dmypy may check
        # again on its own): the filter of mypy's repeats of the engine's errors is in place
        return _kernels().on_other_call  # type: ignore[no-any-return]

    def get_type_analyze_hook(self, fullname: str) -> Callable[[AnalyzeTypeContext], Type] | None:
        if fullname == ARRAY_FULLNAME:  # `az.Array[T, n]` in a record (mypy/records.py)
            return _records().on_array  # type: ignore[no-any-return]
        return None

    def get_class_decorator_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        if fullname == RECORD_FULLNAME:
            return _records().on_record_class  # type: ignore[no-any-return]
        return None

    def get_function_signature_hook(self, fullname: str) -> Callable[[FunctionSigContext], FunctionLike] | None:
        # a record's constructor (the classes this process saw decorated: mypy/records.py)
        if _records.cache_info().currsize:
            if fullname in _records().RECORD_CLASSES:
                return _records().record_signature  # type: ignore[no-any-return]
            if fullname in _records().BUNDLE_CLASSES:
                return _records().bundle_signature  # type: ignore[no-any-return]
        return None

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        if fullname == BUNDLE_FULLNAME:  # `class State(az.Bundle)`: its host constructor
            return _records().on_bundle_class  # type: ignore[no-any-return]
        return None

    def get_method_signature_hook(self, fullname: str) -> Callable[[MethodSigContext], FunctionLike] | None:
        if not fullname.startswith("anodize."):  # (mypy asks for every call it checks)
            return None
        if fullname in (f"{LAUNCH_CLASS}.__call__", f"{LAUNCH_CLASS}.op"):
            return _launches().launcher_signature  # type: ignore[no-any-return]
        if fullname in (f"{KERNEL_CLASS}.unsafe_launch", f"{TILE_KERNEL_CLASS}.unsafe_launch"):
            return _launches().unsafe_launch_signature  # type: ignore[no-any-return]
        if fullname == FUNC_CALL:
            return _kernels().helper_signature  # type: ignore[no-any-return]
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if not fullname.startswith("anodize."):  # (mypy asks for every call it checks)
            return None
        if fullname in (f"{KERNEL_CLASS}.__getitem__", f"{TILE_KERNEL_CLASS}.__getitem__"):
            return _launches().on_getitem  # type: ignore[no-any-return]
        if fullname in (f"{LAUNCH_CLASS}.__call__", f"{LAUNCH_CLASS}.op"):
            return _launches().on_launch  # type: ignore[no-any-return]
        if fullname in (f"{KERNEL_CLASS}.unsafe_launch", f"{TILE_KERNEL_CLASS}.unsafe_launch"):
            return _launches().on_unsafe_launch  # type: ignore[no-any-return]
        if fullname == f"{CONFIG_FULLNAME}.for_num_elems":
            return _hostvalues().on_for_num_elems  # type: ignore[no-any-return]
        if fullname == f"{CONFIG_FULLNAME}.for_shape":
            return _hostvalues().on_for_shape  # type: ignore[no-any-return]
        if fullname.startswith(RUNTIME_PREFIX):
            owner, _, method = fullname.rpartition(".")
            if owner.endswith(".Device"):
                if method in ("empty", "zeros"):
                    return _hostvalues().on_empty  # type: ignore[no-any-return]
                if method == "to_device":
                    return _hostvalues().on_to_device  # type: ignore[no-any-return]
            if owner.endswith(".Buffer") and method in ("__getitem__", "view"):
                return _hostvalues().on_view  # type: ignore[no-any-return]
        return None

    def report_config_data(self, ctx: ReportConfigContext) -> str | None:
        """Part of mypy's cache key: a new plugin version or rule set re-checks every module.

        mypy asks once per module, on a warm cache too, and round-trips the answer through JSON
        before it compares it with the cached one: one short string keeps that cheap (the codes,
        settings and rules are folded into it).  Typeshed's stubs get None, as without the
        plugin: they never import anodize, so no hook of the plugin can fire in them."""
        path = ctx.path
        if path and path.startswith(_TYPESHED):
            return None
        return _config_data()


_TYPESHED = os.path.join(os.path.dirname(os.path.realpath(mypy.__file__)), "typeshed") + os.sep


@cache
def _config_data() -> str:
    """`anodize.checker.mypy_plugin <version> <digest>`: the digest covers the rule sources
    (`_rules_digest`) and the settings the plugin reports with (its codes, its two rule groups)."""
    settings = {"codes": sorted(ERROR_CODES), "kernel_bodies": True, "launch_rules": True}
    h = hashlib.sha256(json.dumps(settings, sort_keys=True).encode())
    h.update(_rules_digest().encode())
    return f"anodize.checker.mypy_plugin {VERSION} {h.hexdigest()[:16]}"


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: any mypy that has the plugin API this module uses."""
    return AnodizePlugin
