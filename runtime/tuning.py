"""The autotuner's engine (anodize/autotuning.py is the facade): variants, checking, parallel
compiles, timing, and the choice per key.

Order of work on a new key (`Tuner.choose`): the memory of this process, then a seed file, then
the persistent cache (runtime/tune_cache.py); only then `tune`:

1. every configuration is validated against the kernel (`static_problem`: Constants it names and
   the kernel lacks, Constants it leaves unbound, options the kernel kind does not take, a block
   the contract fixes otherwise) and skipped with its reason;
2. the user's `prune_configs_by` function runs;
3. each remaining configuration is specialised for the launch's arguments and *checked and
   compiled* (`compile_for_gpu` in a thread pool: ptxas is a subprocess, so the compiles overlap);
   one the checker or the target refuses is skipped with the error's first line, never run;
4. the built-in model drops compiled configurations that spill or cannot be resident, and keeps
   `top_k` of the rest when asked;
5. the outputs are saved, each configuration is warmed up and timed in interleaved rounds of
   event-timed batches, each queued behind a cushion that keeps the GPU busy while the host queues
   it (runtime/tune_timer.py: the kernels' time, not the host's launch rate; the median per
   configuration), the outputs are put back, and the fastest wins.

On the CPU backend and the debug device step 5 is replaced by "the first configuration that
passes 1-3 wins, untimed", so a program behaves the same everywhere.
"""

from __future__ import annotations

import inspect
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from anodize.language.errors import USER_ERRORS, ArgumentError, CheckError
from anodize.language.tile_vocab import (
    NUM_STAGES_CHOICES,
    NUM_WARPS_CHOICES,
    OPTION_NUM_STAGES,
    OPTION_NUM_WARPS,
)
from anodize.runtime import lazy, tune_cache, tune_timer
from anodize.runtime.compile import compile_for_device, compile_for_gpu
from anodize.runtime.config import LaunchConfig
from anodize.runtime.device import Device, device
from anodize.runtime.generic import bind_arguments, specialise
from anodize.runtime.tune_config import Config
from anodize.runtime.tune_launch import Choices, Hit, TunedLaunch
from anodize.runtime.tune_model import estimate

if TYPE_CHECKING:
    from anodize.runtime.kernel_store import RuntimeKernel as Kernel

__all__ = ["TuneRecord", "TuneReport", "Tuner"]

log = logging.getLogger("anodize.autotune")

_MEMO_MAX = 256  # (key, launch config) -> launcher, remembered per tuned kernel
_BATCH_MS = 0.5  # a timed batch runs at least this long (calls per batch from the warm-up's time)
_BATCH_MAX = 64


@dataclass
class TuneRecord:
    """What happened to one configuration: `status` is "ran" (timed: `time_ms` per call, the median
    of the rounds), "skipped" (refused by the checker, the target or a static rule: never run),
    "pruned" (by the user's function or the built-in model) or "untimed" (not run: the CPU
    backend and the debug device take the first valid configuration)."""

    config: Config
    status: str
    time_ms: float | None = None
    reason: str = ""


@dataclass
class TuneReport:
    key: tuple[Any, ...]
    winner: Config | None
    source: str  # "tuned", "first-valid" (CPU backend / debug device), "cache" or "seed"
    records: list[TuneRecord] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the tuning (compiles included)
    compile_seconds: float = 0.0  # of which checking and compiling, all configurations in parallel
    device: str = ""  # the GPU model (tune_cache.device_model) the choice holds for

    def table(self) -> str:
        """The report as text: one line per configuration, the winner marked."""
        lines = [f"key {self.key!r}: winner {self.winner!r} ({self.source}; {self.seconds * 1e3:.0f} ms, compiles {self.compile_seconds * 1e3:.0f} ms)"]
        for r in self.records:
            t = f"{r.time_ms:.4f} ms" if r.time_ms is not None else "-"
            mark = "*" if r.config == self.winner else " "
            lines.append(f" {mark} {r.config!r:<60} {r.status:<8} {t:>12}  {r.reason}")
        return "\n".join(lines)


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


class TunedKernel(Protocol):
    """What a `Tuner` reads of the autotuned kernel it serves (anodize/autotuning.py `Autotuned`,
    the facade's, implements it: the runtime does not import the facade)."""

    kernel: Kernel
    configs: tuple[Config, ...]
    key: tuple[str, ...]
    prune_configs_by: Any
    restore: bool
    rounds: int
    inputs: Callable[..., Any] | None
    seed: str | None
    cache: bool
    __name__: str


class Tuner:
    """The state of one autotuned kernel: its variants, the chosen configuration per key, reports."""

    timed_on_cpu = False  # tests: time on the CPU backend too (wall clock), to exercise the choice

    def __init__(self, at: TunedKernel):
        self.at = at
        base = at.kernel
        self.base = base
        self.tile = getattr(base, "num_warps", None) is not None  # a tile kernel
        self.sig = base.generic
        kernel_consts: dict[str, str] = dict(self.sig.constants) if self.sig is not None else {}
        self.kernel_constants = kernel_consts
        # the Constants the configurations bind (the others are the launch's arguments, and key it)
        self.constants = {c: kernel_consts[c] for cfg in at.configs for c in cfg.constants if c in kernel_consts}
        self.params = [p for p in inspect.signature(base.fn).parameters]
        self.launch_params = [p for p in self.params if p not in self.constants]
        self.const_pos = [i for i, p in enumerate(self.params) if p in self.constants]
        for name in at.key:
            if name not in self.params:
                raise ArgumentError(f"@az.autotune: `key` names `{name}`, which is not a parameter of kernel `{base.__name__}`",
                                    help=f"its parameters: {', '.join(self.params)}")
            if name in self.constants:
                raise ArgumentError(f"@az.autotune: `key` names `{name}`, an `az.Constant` the configurations bind",
                                    help="key on the launch's arguments (sizes), not on what is tuned")
        # a Constant the launch passes changes the program: it keys the choice too
        keyed = list(at.key) + [c for c in kernel_consts if c not in self.constants and c not in at.key]
        self.key_pos = [self.launch_params.index(n) for n in keyed]
        # the launch's Constants are baked into the specialisation: its launcher takes the rest
        kept = [i for i, p in enumerate(self.launch_params) if p not in kernel_consts]
        self.strips = len(kept) != len(self.launch_params)  # (False: the launcher takes the arguments as they are)
        self.strip: Callable[[tuple[Any, ...]], tuple[Any, ...]] = (
            (lambda a: tuple(a[i] for i in kept)) if self.strips else (lambda a: a))
        self.n_launch = len(self.launch_params)
        self.static: dict[Config, str] = {c: self.static_problem(c) for c in at.configs}
        self._variants: dict[tuple[Any, ...], Kernel] = {}
        self.best: dict[tuple[Any, ...], Config] = Choices(self.forget_hit)
        self.reports: dict[tuple[Any, ...], TuneReport] = {}
        self._memo: dict[tuple[Any, ...], Any] = {}
        self._arrays: list[int] | None = None  # positions of the array arguments (their dtypes key too)
        # the last launcher given out, (key, config, launch config, launcher): a warm launch that
        # repeats it (the same config and LaunchConfig objects, an equal key) skips the memo's hashing
        self._last: tuple[tuple[Any, ...], Config, Any, Any] | None = None
        self.last_launch: TunedLaunch | None = None  # what `k[grid]` gave for the last grid (anodize/autotuning.py)
        # the last launch (runtime/tune_launch.py `Hit`); a launch with the same objects skips the key
        self.hit: Hit | None = None
        self.hit2: Hit | None = None  # the one before (a launch alternating two argument sets matches it)
        self.changes = 0  # changes of `best` so far (a launch records no hit across one)
        self._warned: set[tuple[Config, str]] = set()

    def forget_hit(self) -> None:
        """Forget the last launch (a choice changed: `Choices`), and count the change."""
        self.hit = self.hit2 = None
        self.changes += 1

    # -- configurations ---------------------------------------------------------------------
    def static_problem(self, c: Config) -> str:
        """Why `c` cannot apply to this kernel at all ("" when it can)."""
        name = self.base.__name__
        extra = [k for k in c.constants if k not in self.kernel_constants]
        if extra:
            return f"kernel `{name}` has no `az.Constant` parameter `{extra[0]}`"
        missing = [k for k in self.constants if k not in c.constants]
        if missing:
            return f"binds no value for the `az.Constant` `{missing[0]}` of kernel `{name}`"
        if self.tile:
            if c.block is not None:
                return "`block` is a SIMT kernel's option: a tile kernel's block is `num_warps * 32`"
            if c.num_warps is not None and c.num_warps not in NUM_WARPS_CHOICES:
                return f"`num_warps` must be one of {NUM_WARPS_CHOICES}"
            if c.num_stages is not None and c.num_stages not in NUM_STAGES_CHOICES:
                return f"`num_stages` must be one of {NUM_STAGES_CHOICES}"
            return ""
        if c.num_warps is not None or c.num_stages is not None:
            return "`num_warps`/`num_stages` are tile kernels' options: a SIMT kernel's is `block`"
        if c.block is not None:
            try:
                fixed = self.base.contract.block if self.base.contract is not None else None
            except CheckError as e:
                return _first_line(e)
            want = (c.block,) if isinstance(c.block, int) else tuple(c.block)
            if fixed is not None and _dims3(fixed) != _dims3(want):
                return f"the contract fixes block={fixed}; this configuration asks for block={c.block}"
        return ""

    def variant(self, c: Config) -> Kernel:
        """The kernel a configuration launches: the base kernel with the configuration's compile
        options (its Constants stay parameters, bound at launch)."""
        options: list[tuple[str, Any]] = []
        if self.tile and c.num_warps is not None:
            options.append((OPTION_NUM_WARPS, c.num_warps))
        if self.tile and c.num_stages is not None:
            options.append((OPTION_NUM_STAGES, c.num_stages))
        vk = tuple(options)
        hit = self._variants.get(vk)
        if hit is not None:
            return hit
        base = self.base
        v: Kernel = base if not options else base.with_options(vk, num_warps=c.num_warps)
        self._variants[vk] = v
        return v

    def _specialised(self, c: Config, args: tuple[Any, ...]) -> tuple[Kernel, tuple[Any, ...]]:
        """The specialised kernel `c` runs for `args` (the launch's, Constants omitted)."""
        v = self.variant(c)
        if v.generic is None:
            return v, args

        full = list(args)
        for i in self.const_pos:
            full.insert(i, c.constants[self.params[i]])
        return specialise(v, v.generic, tuple(full), {})

    # -- keys -------------------------------------------------------------------------------
    def key_of(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        """The tuning key of a launch's arguments: each key argument's shape (an array's) or value,
        then every array argument's dtype name.  Computed on every launch: shapes and dtypes change
        between launches."""
        arrays = self._arrays
        if arrays is None:
            arrays = self._arrays = [i for i, a in enumerate(args) if hasattr(a, "dtype") and hasattr(a, "shape") and getattr(a, "shape", ()) != ()]
        parts: list[Any] = []
        for i in self.key_pos:
            a = args[i]
            shape = getattr(a, "shape", None)
            parts.append(tuple(shape) if shape is not None and shape != () else a)
        names = _DTYPE_NAMES
        for i in arrays:
            dt = args[i].dtype
            try:
                name = names[dt]
            except (KeyError, TypeError):  # (str of a NumPy dtype costs microseconds: once per dtype)
                name = str(dt)
                if len(names) < 256:
                    try:
                        names[dt] = name
                    except TypeError:
                        pass
            parts.append(name)
        return tuple(parts)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        name = self.base.__name__
        for k in kwargs:
            if k in self.constants:
                raise ArgumentError(f"kernel `{name}`: `{k}` is bound by each autotuning configuration; do not pass it",
                                    help="the configurations (`az.Config(...)`) give every `az.Constant`")
        if not kwargs:
            if len(args) != len(self.launch_params):
                raise ArgumentError(f"autotuned kernel `{name}` takes {len(self.launch_params)} arguments "
                                    f"({', '.join(self.launch_params)}; the Constants come from the configurations), got {len(args)}")
            return args

        bound = bind_arguments(name, self.launch_params, args, kwargs)
        return tuple(bound[p] for p in self.launch_params)

    # -- launching --------------------------------------------------------------------------
    def config_for(self, grid: Any, c: Config) -> Any:
        if callable(grid) and not isinstance(grid, LaunchConfig):
            lc = grid(c)
            if not isinstance(lc, LaunchConfig):
                self.not_a_launch_config(lc)
            return lc
        if not isinstance(grid, LaunchConfig):
            raise ArgumentError(f"launch autotuned kernel `{self.base.__name__}` with `k[grid]`: an az.LaunchConfig or a function of the az.Config giving one",
                                help="`k[lambda cfg: az.LaunchConfig.for_tiles((m, n), (cfg.BM, cfg.BN))](...)`")
        if c.block is not None:
            raise ArgumentError(f"the configurations of kernel `{self.base.__name__}` set `block`: pass a grid function",
                                help="`k[lambda cfg: az.LaunchConfig.for_num_elems(n, block=cfg.block)](...)`")
        return grid

    def not_a_launch_config(self, lc: Any) -> None:
        raise ArgumentError(f"the grid function of autotuned kernel `{self.base.__name__}` returned {type(lc).__name__}, not an az.LaunchConfig")

    def launcher(self, key: tuple[Any, ...] | None, c: Config, grid: Any, args: tuple[Any, ...]) -> Any:
        return self.held(key, c, self.config_for(grid, c), args)

    def held(self, key: tuple[Any, ...] | None, c: Config, lc: Any, args: tuple[Any, ...]) -> Any:
        """The launcher of configuration `c` under launch config `lc` (checked by `config_for`)
        for arguments of key `key`: the last one given out when it is that one, else memoised."""
        last = self._last
        if last is not None and last[1] is c and last[2] is lc and last[0] == key:
            return last[3]
        mk = (key, c, lc)
        try:
            hit = self._memo.get(mk)
        except TypeError:
            hit = None
        if hit is None:
            k, _ = self._specialised(c, args)
            hit = k[lc]
            if len(self._memo) >= _MEMO_MAX:
                self._memo.clear()
            try:
                self._memo[mk] = hit
            except TypeError:
                return hit
        if key is not None:
            self._last = (key, c, lc, hit)
        return hit

    def export(self, path: str) -> int:
        return tune_cache.export(self, path)

    def known(self, args: tuple[Any, ...]) -> Config | None:
        return self.best.get(self.key_of(args))

    def choose(self, key: tuple[Any, ...], grid: Any, args: tuple[Any, ...]) -> Config:
        dev = _device_of(args)
        for source, found in (("seed", tune_cache.seeded(self, key, dev)), ("cache", tune_cache.load(self, key, dev))):
            if found is not None and found in self.static and not self.static[found]:
                self.best[key] = found
                self.reports[key] = TuneReport(key, found, source, device=tune_cache.device_model(dev))
                return found
        report = self.tune(grid, args, key=key, device=dev)
        if report.winner is None:
            reasons = "; ".join(f"{r.config!r}: {r.reason}" for r in report.records)
            raise ArgumentError(f"no configuration of autotuned kernel `{self.base.__name__}` is valid for key {key!r}",
                                help=f"each was refused: {reasons}")
        return report.winner

    # -- tuning -----------------------------------------------------------------------------
    def tune(self, grid: Any, args: tuple[Any, ...], *, key: tuple[Any, ...] | None = None, device: Any = None) -> TuneReport:
        t0 = time.perf_counter()
        args = self._bind(args, {})
        key = self.key_of(args) if key is None else key
        dev = device if device is not None else _device_of(args)
        records: dict[Config, TuneRecord] = {}
        cands: list[Config] = []
        for c in self.at.configs:
            reason = self.static[c]
            if reason:
                records[c] = self._skip(c, reason)
            else:
                cands.append(c)
        cands = self._prune_early(cands, args, records)
        timed = dev.kind == "cuda" or (self.timed_on_cpu and dev.kind == "cpu")
        tc = time.perf_counter()
        compiled: dict[Config, Any] = {}
        prepared = self._prepare(cands, key, grid, args, dev, records, compiled, first_only=not timed)
        compile_s = time.perf_counter() - tc
        if timed:
            prepared = self._prune_model(prepared, compiled, dev, records)
            winner = self._time(prepared, key, args, dev, records)
            source = "tuned"
        else:
            winner = prepared[0][0] if prepared else None
            for c in cands:
                if c not in records:
                    records[c] = TuneRecord(c, "untimed", reason=f"{dev.kind} device: the first valid configuration runs, untimed")
            source = "first-valid"
        report = TuneReport(key, winner, source, [records[c] for c in self.at.configs if c in records],
                            time.perf_counter() - t0, compile_s, tune_cache.device_model(dev))
        self.reports[key] = report
        if winner is not None:
            self.best[key] = winner
            if timed and dev.kind == "cuda":
                tune_cache.store(self, key, dev, report)
        log.info("autotuned %s for key %r:\n%s", self.base.__name__, key, report.table())
        if os.environ.get("ANODIZE_TUNE_VERBOSE"):
            print(f"anodize: autotuned `{self.base.__name__}`\n{report.table()}", file=sys.stderr)
        return report

    def _skip(self, c: Config, reason: str, status: str = "skipped") -> TuneRecord:
        if status == "skipped" and (c, reason) not in self._warned:  # shown once a process
            self._warned.add((c, reason))
            log.warning("autotune `%s`: %r skipped: %s", self.base.__name__, c, reason)
        return TuneRecord(c, status, reason=reason)

    def _prune_early(self, cands: list[Config], args: tuple[Any, ...], records: dict[Config, TuneRecord]) -> list[Config]:
        prune = self.at.prune_configs_by
        fn = prune.get("early_config_prune") if isinstance(prune, dict) else prune
        if fn is None or not cands:
            return cands
        kept = list(fn(list(cands), dict(zip(self.launch_params, args, strict=True))))
        for c in cands:
            if c not in kept:
                records[c] = TuneRecord(c, "pruned", reason="dropped by prune_configs_by")
        return [c for c in cands if c in kept]

    def _prepare(self, cands: list[Config], key: tuple[Any, ...], grid: Any, args: tuple[Any, ...], dev: Any,
                 records: dict[Config, TuneRecord], compiled: dict[Config, Any], first_only: bool) -> list[tuple[Config, Any]]:
        """(config, launcher) for every configuration that checks, compiles and loads; the others
        get their refusal as a "skipped" record.  The launchers are memoised under `key` (its
        element types: another key's launcher is another specialisation)."""
        specs: dict[Config, Any] = {}
        for c in cands:
            try:
                specs[c] = self._specialised(c, args)[0]
                self.config_for(grid, c)
            except USER_ERRORS as e:
                records[c] = self._skip(c, _first_line(e))
        ready = [c for c in cands if c in specs]
        if dev.kind == "cuda" and len(ready) > 1:  # check and compile in parallel (ptxas is a subprocess)
            arch = getattr(dev, "arch", None)

            def build(c: Config) -> str:
                try:
                    compile_for_gpu(specs[c], arch)
                    return ""
                except USER_ERRORS as e:
                    return _first_line(e)

            with ThreadPoolExecutor(max_workers=min(len(ready), max(2, os.cpu_count() or 2))) as pool:
                for c, reason in zip(ready, pool.map(build, ready), strict=True):
                    if reason:
                        records[c] = self._skip(c, reason)
            ready = [c for c in ready if c not in records]
        out: list[tuple[Config, Any]] = []
        for c in ready:
            try:
                compiled[c] = compile_for_device(specs[c], dev).compiled  # checks (the gate) and loads; a cache hit after `build`
                out.append((c, self.launcher(key, c, grid, args)))
            except USER_ERRORS as e:
                records[c] = self._skip(c, _first_line(e))
                continue
            if first_only:
                break
        return out

    def _prune_model(self, prepared: list[tuple[Config, Any]], compiled: dict[Config, Any], dev: Any,
                     records: dict[Config, TuneRecord]) -> list[tuple[Config, Any]]:
        """The built-in model: drop what spills or cannot be resident; keep `top_k` by estimated
        occupancy (resident warps a multiprocessor) when the user asked for it."""
        prune = self.at.prune_configs_by
        top_k = prune.get("top_k") if isinstance(prune, dict) else None
        scored: list[tuple[float, Config, Any]] = []
        for c, launch in prepared:
            est = estimate(compiled[c], dev)
            if est.problem:
                records[c] = TuneRecord(c, "pruned", reason=est.problem)
                continue
            scored.append((est.score, c, launch))
        if top_k:
            scored.sort(key=lambda t: -t[0])
            for _, c, _ in scored[int(top_k):]:
                records[c] = TuneRecord(c, "pruned", reason=f"not among the model's top {top_k}")
            scored = scored[: int(top_k)]
        keep = {c for _, c, _ in scored}
        return [(c, launch) for c, launch in prepared if c in keep]

    def _time(self, prepared: list[tuple[Config, Any]], key: tuple[Any, ...], args: tuple[Any, ...], dev: Any,
              records: dict[Config, TuneRecord]) -> Config | None:
        if not prepared:
            return None
        saved = _save_outputs(self, prepared[0][0], args) if self.at.restore else []
        try:
            timer = tune_timer.timer(dev)
            calls: dict[Config, int] = {}
            alive: list[tuple[Config, Any]] = []
            for c, launch in prepared:  # warm-up: the first launch also loads and checks the arguments
                try:
                    ms = timer(_calls(launch, self.strip(args)), 1)
                except USER_ERRORS as e:
                    records[c] = self._skip(c, _first_line(e))
                    continue
                calls[c] = max(1, min(_BATCH_MAX, int(_BATCH_MS / max(ms, 1e-4)) + 1))
                alive.append((c, launch))
            times: dict[Config, list[float]] = {c: [] for c, _ in alive}
            for r in range(max(1, self.at.rounds)):
                order = alive if r % 2 == 0 else alive[::-1]
                for c, launch in order:
                    n = calls[c]
                    times[c].append(timer(_calls(launch, self.strip(args)), n) / n)
        finally:
            _restore_outputs(saved)
        best: Config | None = None
        for c, _ in alive:
            med = statistics.median(times[c])
            records[c] = TuneRecord(c, "ran", med)
            if best is None or med < records[best].time_ms:  # type: ignore[operator]
                best = c
        return best


_DTYPE_NAMES: dict[Any, str] = {}  # an array dtype -> its name in tuning keys


# -- devices, timing, outputs ---------------------------------------------------------------


def _calls(launch: Any, args: tuple[Any, ...]) -> Callable[[], None]:
    def call() -> None:
        launch(*args)

    return call


def _dims3(b: Any) -> tuple[int, ...]:
    dims = (b,) if isinstance(b, int) else tuple(b)
    return dims + (1,) * (3 - len(dims))


def _device_of(args: tuple[Any, ...]) -> Any:
    for a in args:
        d = getattr(a, "device", None)
        if isinstance(d, Device):
            return d
    return device()


def _save_outputs(t: Tuner, c: Config, args: tuple[Any, ...]) -> list[tuple[Any, Any]]:
    """Copies of the arguments the kernel may write (its output slices), to put back after timing."""
    k, rest = t._specialised(c, args)
    saved: list[tuple[Any, Any]] = []
    for p, a in zip(lazy.typer().build_ir(k).params, rest, strict=True):
        if p.slice_kind is None or not p.slice_kind.output:
            continue
        if hasattr(a, "copy_from") and hasattr(a, "copy"):  # an anodize Buffer
            saved.append((a, a.copy()))
        elif hasattr(a, "clone") and hasattr(a, "copy_"):  # a PyTorch tensor
            saved.append((a, a.clone()))
        elif hasattr(a, "copy") and hasattr(a, "__setitem__"):  # CuPy / NumPy
            saved.append((a, a.copy()))
        else:
            raise ArgumentError(f"autotune cannot save output `{p.name}` ({type(a).__name__}) to restore it after timing",
                                help="pass an anodize buffer, a PyTorch tensor or a CuPy array, or `@az.autotune(..., restore=False)`")
    return saved


def _restore_outputs(saved: list[tuple[Any, Any]]) -> None:
    for dst, src in saved:
        if hasattr(dst, "copy_from"):
            dst.copy_from(src)
        elif hasattr(dst, "copy_"):
            dst.copy_(src)
        else:
            dst[...] = src
