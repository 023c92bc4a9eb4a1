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

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from anodize.kernel import Kernel
from anodize.language.errors import USER_ERRORS, ArgumentError
from anodize.runtime.tune_config import Config
from anodize.runtime.tune_launch import TunedLaunch
from anodize.runtime.tuning import Tuner

if TYPE_CHECKING:
    from anodize.kernel import Kernel
    from anodize.runtime.tuning import TuneReport

__all__ = ["Config", "Autotuned", "autotune"]

_K = TypeVar("_K")

class Autotuned(Generic[_K]):
    """A kernel under `@az.autotune`: launch it as `k[grid](*args)`, where `grid` is a LaunchConfig
    or a function of the chosen `Config` giving one; omit the Constant parameters (each
    configuration binds them)."""

    def __init__(self, kernel: Any, configs: Sequence[Config], key: Sequence[str], *,
                 prune_configs_by: Any = None, restore: bool = True, rounds: int = 5,
                 inputs: Callable[..., Any] | None = None, seed: str | None = None, cache: bool = True):
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

        self._tuner = Tuner(self)

    def __getitem__(self, grid: Any) -> Any:
        t = self._tuner
        last = t.last_launch
        if last is None or last.grid is not grid:  # (`k[grid](...)` in a loop: the same grid object)
            last = t.last_launch = TunedLaunch(t, grid)  # (an inline lambda: a new one every launch)
        return last

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
