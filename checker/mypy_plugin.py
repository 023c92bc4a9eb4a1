"""anodize's mypy plugin: kernel safety errors in the editor, and typed launches.

Enable it with

    [tool.mypy]
    plugins = ["anodize.checker.mypy_plugin"]

This module only dispatches (as pydantic's and django-stubs' plugins do); each hook
lives in a transformer module under `anodize.checker.mypy`, and every rule, code
and message comes from `anodize.checker` itself:

- every module that uses anodize: its `anodize check` results, at the same
  lines, columns, codes and messages (`mypy.engine_results`), started in a worker
  process as soon as mypy has parsed the module;
- `@kernel`: the kernel's type carries its name and contract (`mypy.kernels`);
- `k[config]`, `k[config](...)`: host-side parameter types and the launch-site
  rules az-no-contract, az-launch-rank, az-alias and az-requires (`mypy.launches`);
- `dev.empty/zeros/to_device`, `LaunchConfig(...)`, `for_num_elems`, `for_shape`:
  the buffer dtypes/shapes and config ranks/blocks those rules read (`mypy.hostvalues`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

from mypy.nodes import MypyFile
from mypy.plugin import FunctionContext, MethodContext, MethodSigContext, Plugin, ReportConfigContext
from mypy.types import FunctionLike, Type

import anodize

from .mypy import engine_results, hostvalues, kernels, launches
from .mypy.codes import ERROR_CODES

__all__ = ["AnodizePlugin", "plugin", "ERROR_CODES"]

KERNEL_CLASS = "anodize.kernel.Kernel"
LAUNCH_CLASS = "anodize.kernel.Launch"
FUNC_CALL = "anodize.kernel.Func.__call__"
RUNTIME_PREFIX = "anodize.runtime."
# Calls after which the module's engine results are reported (kernel modules, host modules).
REPORTING_CALLS = {kernels.FUNC_FULLNAME, kernels.CONTRACT_FULLNAME, "anodize.runtime.device.device"}


@cache
def _rules_digest() -> str:
    """A digest of the checker's own sources, so that mypy's cache drops stale results
    whenever a rule or message changes (not only on a version bump)."""
    h = hashlib.sha256()
    try:
        root = resources.files("anodize.checker")
        for entry in sorted(_walk(root), key=str):
            h.update(str(entry).encode())
            h.update(entry.read_bytes())
    except (OSError, ModuleNotFoundError, TypeError):
        return "unknown"
    return h.hexdigest()[:16]


def _walk(root: Any) -> list[Any]:
    out = []
    for entry in root.iterdir():
        if entry.is_dir() and entry.name != "__pycache__":
            out.extend(_walk(entry))
        elif entry.name.endswith(".py"):
            out.append(entry)
    return out


class AnodizePlugin(Plugin):
    def get_additional_deps(self, file: MypyFile) -> list[tuple[int, str, int]]:
        """No extra dependencies; mypy calls this right after parsing a module, which is when
        the engine starts on it in a worker."""
        engine_results.prefetch(file)
        return []

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        if fullname == kernels.KERNEL_FULLNAME:
            return kernels.on_kernel
        if fullname in REPORTING_CALLS:
            return kernels.on_anodize_call
        if fullname == hostvalues.CONFIG_FULLNAME:
            return hostvalues.on_config_new
        return None

    def get_method_signature_hook(self, fullname: str) -> Callable[[MethodSigContext], FunctionLike] | None:
        if fullname in (f"{LAUNCH_CLASS}.__call__", f"{LAUNCH_CLASS}.op"):
            return launches.launcher_signature
        if fullname == f"{KERNEL_CLASS}.unsafe_launch":
            return launches.unsafe_launch_signature
        if fullname == FUNC_CALL:
            return kernels.helper_signature
        return None

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if fullname == f"{KERNEL_CLASS}.__getitem__":
            return launches.on_getitem
        if fullname in (f"{LAUNCH_CLASS}.__call__", f"{LAUNCH_CLASS}.op"):
            return launches.on_launch
        if fullname == f"{KERNEL_CLASS}.unsafe_launch":
            return launches.on_unsafe_launch
        if fullname == f"{hostvalues.CONFIG_FULLNAME}.for_num_elems":
            return hostvalues.on_for_num_elems
        if fullname == f"{hostvalues.CONFIG_FULLNAME}.for_shape":
            return hostvalues.on_for_shape
        if fullname.startswith(RUNTIME_PREFIX):
            owner, _, method = fullname.rpartition(".")
            if owner.endswith(".Device"):
                if method in ("empty", "zeros"):
                    return hostvalues.on_empty
                if method == "to_device":
                    return hostvalues.on_to_device
            if owner.endswith(".Buffer") and method in ("__getitem__", "view"):
                return hostvalues.on_view
        return None

    def report_config_data(self, ctx: ReportConfigContext) -> dict[str, Any]:
        """Part of mypy's cache key: a new plugin version or rule set re-checks every module."""
        return {
            "plugin": "anodize.checker.mypy_plugin",
            "version": anodize.__version__,
            "rules": _rules_digest(),
            "settings": {"codes": sorted(ERROR_CODES), "kernel_bodies": True, "launch_rules": True},
        }


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: any mypy that has the plugin API this module uses."""
    return AnodizePlugin
