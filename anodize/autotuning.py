"""Autotuning where every configuration is proven safe before it is timed.

    @az.autotune(configs=[az.Config(BM=128, BN=256, BK=64, num_warps=8, num_stages=3), ...],
                 key=["m", "n", "k"])
    @az.launch_contract(domain=2, ...)
    @az.tile_kernel(num_warps=8)
    def gemm(a: Slice2D[f16], b: Slice2D[f16], c: DisjointSlice2D[f16], m: i64, n: i64, k: i64,
             BM: az.Constant[int], BN: az.Constant[int], BK: az.Constant[int]) -> None: ...

    gemm[lambda cfg: az.LaunchConfig.for_tiles((m, n), (cfg.BM, cfg.BN))](a, b, c, m, n, k)

A configuration binds the kernel's `az.Constant` parameters and its compile options
(`num_warps`, `num_stages` for a tile kernel; `block` for a SIMT kernel whose contract leaves the
block open).  On the first launch for a new value of `key` (the named arguments' values: a
scalar's value, a slice's shape; and every slice's dtype), each configuration is specialised and
*checked* first -- a configuration the checker or the target refuses is skipped with its reason,
never run -- the rest are compiled in parallel and timed on the device (runtime/tuning.py), and
the fastest is kept in memory and in the persistent cache (runtime/tune_cache.py).  On the CPU
backend and the debug device the first valid configuration runs, untimed, so a program behaves
the same everywhere.  docs/autotune.md is the guide.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from anodize.language.errors import USER_ERRORS, ArgumentError

if TYPE_CHECKING:
    from anodize.kernel import Kernel
    from anodize.runtime.config import LaunchConfig
    from anodize.runtime.tuning import TuneReport

__all__ = ["Config", "Autotuned", "autotune"]

_K = TypeVar("_K")

# the options a configuration may set beside Constants, and the kernels they apply to
_OPTIONS = ("num_warps", "num_stages", "block")


class Config:
    """One autotuning configuration: `az.Config(BM=128, BN=256, BK=64, num_warps=8, num_stages=3)`.

    Keyword arguments other than the options bind the kernel's `az.Constant` parameters of those
    names; `cfg.BM` reads one back (in a grid function: `lambda cfg: ...for_tiles(..., (cfg.BM,
    cfg.BN))`).  Options: `num_warps` and `num_stages` (tile kernels: the block is `num_warps * 32`
    threads; `num_stages` the software-pipelining depth of loops that carry a matmul), `block`
    (SIMT kernels whose contract declares no block: the launch's block)."""

    __slots__ = ("constants", "num_warps", "num_stages", "block", "_key")

    def __init__(self, *, num_warps: int | None = None, num_stages: int | None = None,
                 block: int | tuple[int, ...] | None = None, **constants: Any):
        for name, v in (("num_warps", num_warps), ("num_stages", num_stages)):
            if v is not None and (type(v) is not int or v < 1):
                raise ArgumentError(f"az.Config: `{name}` must be a positive int, got {v!r}")
        if block is not None:
            dims = (block,) if isinstance(block, int) else tuple(block)
            if not dims or len(dims) > 3 or any(type(d) is not int or d < 1 for d in dims):
                raise ArgumentError(f"az.Config: `block` must be a positive int or a tuple of 1-3 of them, got {block!r}")
        for name, v in constants.items():
            if not isinstance(v, (bool, int, float)):
                raise ArgumentError(f"az.Config: `{name}` binds an `az.Constant`: an int, float or bool, got {v!r}")
        object.__setattr__(self, "constants", dict(sorted(constants.items())))
        object.__setattr__(self, "num_warps", num_warps)
        object.__setattr__(self, "num_stages", num_stages)
        object.__setattr__(self, "block", block)
        object.__setattr__(self, "_key", json.dumps(self.to_json(), sort_keys=True))

    def __getattr__(self, name: str) -> Any:
        constants = object.__getattribute__(self, "constants")
        if name in constants:
            return constants[name]
        raise AttributeError(f"az.Config has no constant or option `{name}` ({self!r})")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("az.Config is immutable")

    def to_json(self) -> dict[str, Any]:
        """The configuration as JSON-ready data (the persistent cache and seed files store this)."""
        out: dict[str, Any] = dict(self.constants)
        for name in _OPTIONS:
            v = getattr(self, name)
            if v is not None:
                out[name] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Config:
        """The configuration `to_json` wrote (raises on anything else)."""
        data = dict(data)
        block = data.pop("block", None)
        return cls(block=tuple(block) if isinstance(block, list) else block, **data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self.to_json().items()) + ")"


class Autotuned(Generic[_K]):
    """A kernel under `@az.autotune`: launch it as `k[grid](*args)`, where `grid` is a LaunchConfig
    or a function of the chosen `Config` giving one; omit the Constant parameters (each
    configuration binds them)."""

    def __init__(self, kernel: Any, configs: Sequence[Config], key: Sequence[str], *,
                 prune_configs_by: Any = None, restore: bool = True, rounds: int = 5,
                 inputs: Callable[..., Any] | None = None, seed: str | None = None, cache: bool = True):
        from anodize.kernel import Kernel

        if not isinstance(kernel, Kernel):
            raise TypeError("@az.autotune goes above a kernel's decorators (`@az.kernel` or `@az.tile_kernel`)")
        configs = list(configs)
        if not configs or not all(isinstance(c, Config) for c in configs):
            raise ArgumentError("@az.autotune needs `configs=[az.Config(...), ...]` (at least one)")
        if len(set(configs)) != len(configs):
            raise ArgumentError("@az.autotune: two configurations are equal", help="list each configuration once")
        self.kernel = kernel
        self.configs: tuple[Config, ...] = tuple(configs)
        self.key: tuple[str, ...] = tuple(key)
        self.prune_configs_by = prune_configs_by
        self.restore = restore
        self.rounds = rounds
        self.inputs = inputs
        self.seed = seed
        self.cache = cache
        self.__name__ = kernel.__name__
        self.__qualname__ = kernel.__qualname__
        self.__doc__ = kernel.__doc__
        self.__module__ = kernel.__module__
        self.__wrapped__ = kernel
        from anodize.runtime.tuning import Tuner

        self._tuner = Tuner(self)

    def __getitem__(self, grid: Any) -> Any:
        try:
            return self._tuner.launch_for(grid)
        except USER_ERRORS as e:  # a refused launch shows no anodize-internal frames
            __tracebackhide__ = True
            raise e.with_traceback(None)

    def variant(self, config: Config) -> Kernel[Any]:
        """The kernel object a configuration launches (its Constants still parameters; compiled
        once per specialisation, like any kernel)."""
        return self._tuner.variant(config)

    def tune(self, grid: Any, *args: Any) -> TuneReport:
        """Tune now for these arguments (as a launch would on a new key; nothing is launched for
        real) and return the report."""
        try:
            return self._tuner.tune(grid, args)
        except USER_ERRORS as e:
            __tracebackhide__ = True
            raise e.with_traceback(None)

    def best(self, *args: Any) -> Config | None:
        """The configuration chosen for these arguments' key, if one is known (None: not tuned yet)."""
        return self._tuner.known(args)

    @property
    def reports(self) -> dict[tuple[Any, ...], TuneReport]:
        """Every tuning this process did or loaded, by key: which configurations ran, their times,
        which were skipped and why, and the winner."""
        return dict(self._tuner.reports)

    def export(self, path: str) -> int:
        """Write the chosen configuration of every key this process knows to a seed file (JSON),
        for deployment: `@az.autotune(..., seed="file.json")` or `ANODIZE_TUNE_SEED`.  Returns how
        many entries it wrote."""
        return self._tuner.export(path)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"kernel `{self.__name__}` cannot be called directly; launch it with `{self.__name__}[grid](...)`")

    def __repr__(self) -> str:
        return f"<anodize autotuned kernel {self.__module__}.{self.__qualname__} ({len(self.configs)} configs)>"


def autotune(configs: Iterable[Config], key: Sequence[str] = (), *, prune_configs_by: Any = None,
             restore: bool = True, rounds: int = 5, inputs: Callable[..., Any] | None = None,
             seed: str | None = None, cache: bool = True) -> Callable[[_K], Autotuned[_K]]:
    """Autotune a kernel over `configs`, once per value of the `key` arguments.

    `prune_configs_by`: a function `(configs, args) -> configs` run before compiling (`args` maps
    parameter names to the launch's arguments), or a dict with `"early_config_prune"` (that
    function) and/or `"top_k"` (keep the k configurations the built-in model ranks best from
    their compiled registers, shared memory and occupancy; it always drops configurations that
    spill or cannot be resident).  `restore`: the outputs are saved before timing and put back
    after, so tuning leaves no trace (the chosen configuration then runs once for real).
    `rounds`: interleaved timing rounds.  `inputs`: `(device, **shape) -> (grid, args)`, what
    `anodize tune MODULE:KERNEL --shape ...` launches.  `seed`: a JSON file of chosen
    configurations (`Autotuned.export`) consulted before tuning.  `cache`: keep winners in the
    persistent cache (`ANODIZE_CACHE_DIR`/tune)."""
    cfgs = list(configs)

    def apply(k: Any) -> Autotuned[Any]:
        return Autotuned(k, cfgs, key, prune_configs_by=prune_configs_by, restore=restore, rounds=rounds,
                         inputs=inputs, seed=seed, cache=cache)

    return apply
