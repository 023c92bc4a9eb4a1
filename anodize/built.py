"""Kernels built ahead of time: what the package `anodize build` writes imports.

    import vecadd_kernels as K                 # needs anodize's runtime, cuda-python and NumPy
    K.vecadd[az.LaunchConfig.for_num_elems(n)](a, b, c)

A `BuiltKernel` is a `Kernel` whose artifacts were compiled by `anodize build`: its
contract, parameters and roles come from the package's manifest (runtime/prebuilt.py),
and its launches take the same path as any kernel's (runtime/launch.py), so every
run-time check applies: the contract's rank, block and unused dimensions, each
argument's kind, dtype and device, aliasing of outputs, `requires`, and faults reported
at the next synchronisation with the kernel's source location.  Loading picks the cubin
built for the GPU's architecture, else the PTX of the newest target (JIT-compiled by the
driver).  Nothing here imports llvmlite or the checker or reads the kernel's source; a
built kernel has no CPU code, so a launch on the CPU backend is refused with a LaunchError
that says so.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from types import ModuleType
from typing import TYPE_CHECKING, Any, NoReturn

from anodize.kernel import Kernel, P, TileKernel
from anodize.language.errors import ArgumentError, LaunchError
from anodize.runtime import probe

if TYPE_CHECKING:
    from anodize.codegen.artifact import CompiledKernel
    from anodize.language.contract import Contract
    from anodize.language.ir import ParamSpec
    from anodize.runtime.compile import LoadedKernel
    from anodize.runtime.config import LaunchConfig
    from anodize.runtime.device import Device

__all__ = ["BuiltKernel", "load_package"]


def _stub(*args: Any, **kwargs: Any) -> None:
    raise TypeError("a built kernel has no Python body")


def _prebuilt() -> ModuleType:
    """runtime/prebuilt.py (and the runtime with it), loaded by a built kernel's first use: importing
    a built package loads neither NumPy nor the runtime."""
    from anodize.runtime import prebuilt

    return prebuilt


class BuiltKernel(Kernel[P]):
    """A kernel loaded from a package `anodize build` wrote; launch it as any kernel."""

    def __init__(self, folder: str, manifest: dict[str, Any], name: str, module: str):
        entry = manifest["kernels"][name]
        super().__init__(_stub, None, spec=None)
        self.__name__ = self.__qualname__ = name
        self.__module__ = module
        self.__doc__ = entry.get("doc")
        self.folder = folder
        self.manifest = manifest
        self.num_warps = entry.get("num_warps")  # a tile kernel's threads per program / 32
        # a non-None spec marks "has a contract" for the launch path (runtime/launch.py `prepare`);
        # the Contract itself is read from the manifest on first use (importing the package stays light)
        self.contract_spec = None if entry["contract"] is None else _BUILT_CONTRACT
        self.built_spec = tuple(tuple(x) for x in entry.get("spec") or ())

    @functools.cached_property
    def params(self) -> tuple[ParamSpec, ...]:
        params: tuple[ParamSpec, ...] = _prebuilt().params_from_json(self.manifest["kernels"][self.__name__]["params"])
        return params

    @property
    def contract(self) -> Contract | None:
        if not self._contract_parsed:
            self._contract = _prebuilt().contract_from_json(self.manifest["kernels"][self.__name__]["contract"])
            self._contract_parsed = True
        return self._contract

    @property
    def generic(self) -> Any:
        return None

    @property
    def signature(self) -> inspect.Signature:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature([inspect.Parameter(p.name, kind) for p in self.params])

    @property
    def targets(self) -> tuple[str, ...]:
        """The architectures this kernel was built for."""
        return tuple(sorted(self.manifest["kernels"][self.__name__]["targets"]))

    def _bind_config(self, config: LaunchConfig[Any]) -> LaunchConfig[Any]:
        if self.num_warps is None:
            return config
        return TileKernel.tile_config(self, config)  # type: ignore[arg-type]

    def unsafe_launch(self, config: LaunchConfig[Any], *args: Any, **kwargs: Any) -> None:
        super().unsafe_launch(self._bind_config(config), *args, **kwargs)

    def specialize(self, **bindings: Any) -> NoReturn:
        raise ArgumentError(
            f"built kernel `{self.__name__}` is one specialisation ({_spec_text(self.built_spec)}); a built package cannot specialise again",
            help="name the specialisation at build time: `anodize build MODULE.py --specialize T=f32 ...`",
        )

    def compile(self, arch: str | None = None, **_options: Any) -> CompiledKernel:
        """The artifact built for `arch` (default: the current GPU's), read from the package;
        nothing is compiled."""
        arch = arch or _prebuilt().default_arch()
        key = ("built", arch)
        hit = self.store.compiled.get(key)
        if hit is None:
            hit = self.store.compiled[key] = _prebuilt().compiled_from_manifest(self.folder, self.manifest, self.__name__, arch)
        return hit

    def load_prebuilt(self, device: Device) -> LoadedKernel:
        """The kernel loaded on `device` (runtime/compile.py `compile_for_device` asks this of a
        built kernel instead of compiling it)."""
        key = ("loaded-built", id(device))
        hit = self.store.loaded.get(key)
        if hit is not None:
            return hit
        if device.kind != "cuda":
            raise LaunchError(
                f"kernel `{self.__name__}` was built ahead of time for {', '.join(self.targets)} and has no code "
                f"for {device.describe()}",
                help="launch it with arrays on a CUDA GPU (`az.device(0)`); the CPU backend compiles kernels from "
                "their source: import the kernel's module itself (needs llvmlite)",
            )
        compiled = self.compile(str(getattr(device, "arch", "")))
        handle = device.load(compiled)  # type: ignore[attr-defined]
        loaded: LoadedKernel = _prebuilt().LoadedKernel(compiled, device, handle, device.faults.register(compiled))
        self.store.loaded[key] = loaded
        return loaded

    def __repr__(self) -> str:
        return f"<anodize built kernel {self.__module__}.{self.__name__} ({', '.join(self.targets)})>"


_MANIFEST, _FORMAT = "anodize_build.json", 1  # runtime/prebuilt.py's MANIFEST and FORMAT (not imported: see load_package)
_BUILT_CONTRACT = object()  # the contract_spec of a built kernel with a contract (its Contract is read from the manifest)


def _spec_text(spec: tuple[tuple[Any, ...], ...]) -> str:
    return ", ".join(f"{n}={v!r}" for n, v in spec) or "not generic"


def load_package(init_file: str) -> dict[str, BuiltKernel[Any]]:
    """The kernels of the built package whose `__init__.py` is `init_file`, by name."""
    folder = os.path.dirname(os.path.abspath(init_file))
    with open(os.path.join(folder, _MANIFEST), encoding="utf-8") as f:
        manifest = json.load(f)
    if manifest.get("format") != _FORMAT:
        raise LaunchError(
            f"{folder} was built in package format {manifest.get('format')!r}; this anodize reads format {_FORMAT}",
            help="rebuild the package with this anodize's `anodize build`",
        )
    module = os.path.basename(folder)
    if os.environ.get("ANODIZE_EARLY_INIT"):  # the GPU starts while the program imports the rest
        probe.start_early()
    return {name: BuiltKernel(folder, manifest, name, module) for name in manifest["kernels"]}
