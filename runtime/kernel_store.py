"""The interface between a kernel object and the runtime.

The facade's `Kernel` (anodize/kernel.py) sits above the runtime, so the runtime never
imports it: it reads a kernel through `RuntimeKernel`, the few attributes and methods it
needs, and keeps what it computes for one kernel in that kernel's `KernelStore`, one typed
field per kind of entry (instead of a dictionary keyed by strings and tuples).

    kernel.store.compiled[("gpu", source_hash, arch, ...)]   -> CompiledKernel
    kernel.store.loaded[("loaded", id(device), ...)]         -> LoadedKernel
    kernel.store.launchers[(config, safe)]                   -> Launcher

`KernelStore.clear()` forgets everything (a new contract makes all of it stale).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import inspect

    from anodize.codegen.artifact import CompiledKernel
    from anodize.language.contract import Contract
    from anodize.runtime.compile import LoadedKernel
    from anodize.runtime.config import LaunchConfig
    from anodize.runtime.launch import Launcher

__all__ = ["KernelStore", "RuntimeKernel"]

Key = tuple[object, ...]


class KernelStore:
    """What the runtime remembers of one kernel object (memory policy: docs/performance.md
    "What is cached")."""

    __slots__ = ("source_hash", "checked", "compiled", "loaded", "launchers", "launches", "last_launcher", "specs")

    def __init__(self) -> None:
        self.source_hash: str | None = None  # runtime/compile.py source_hash
        self.checked: str | None = None  # the source hash the checker last passed
        self.compiled: dict[Key, CompiledKernel] = {}  # artifacts, by target and options
        self.loaded: dict[Key, LoadedKernel] = {}  # artifacts loaded on a device
        self.launchers: dict[tuple[object, bool], Launcher] = {}  # runtime/launch.py prepare, by (config, safe)
        self.launches: dict[object, Any] = {}  # the facade's launch objects, by config
        self.last_launcher: tuple[object, Any] | None = None  # (config, launch object) of the last `k[config]`
        self.specs: OrderedDict[Key, RuntimeKernel] = OrderedDict()  # a generic kernel's specialisations (an LRU)

    def clear(self) -> None:
        """Forget everything (a new contract: what was made under the old one is stale)."""
        self.source_hash = self.checked = self.last_launcher = None
        self.compiled.clear()
        self.loaded.clear()
        self.launchers.clear()
        self.launches.clear()
        self.specs.clear()

    def is_empty(self) -> bool:
        """Nothing compiled, checked, loaded or launched."""
        return (self.checked is None and not self.compiled and not self.loaded and not self.launchers
                and not self.launches and self.last_launcher is None and not self.specs)


class RuntimeKernel(Protocol):
    """A kernel as the runtime reads it (anodize/kernel.py `Kernel` implements it)."""

    fn: Callable[..., None]
    __name__: str
    __qualname__: str
    spec: tuple[tuple[str, Any], ...] | None  # a specialisation's bindings; None for a kernel as written
    options: tuple[tuple[str, Any], ...]  # compile options baked into every specialisation
    contract_spec: Any  # the raw `@launch_contract` arguments, None without one
    store: KernelStore

    @property
    def contract(self) -> Contract | None: ...

    @property
    def generic(self) -> Any: ...

    @property
    def signature(self) -> inspect.Signature: ...

    def specialize(self, **bindings: Any) -> RuntimeKernel: ...

    def _specialization(self, key: tuple[tuple[str, Any], ...]) -> RuntimeKernel: ...

    def with_options(self, options: tuple[tuple[str, Any], ...], num_warps: int | None = None) -> RuntimeKernel: ...

    def unsafe_launch(self, config: LaunchConfig[Any], *args: Any, **kwargs: Any) -> None: ...

    def __getitem__(self, config: LaunchConfig[Any]) -> Any: ...
