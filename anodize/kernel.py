"""`@kernel`, `@func` and `@launch_contract`: the decorators of the kernel language.

A `Kernel` wraps the Python function; its body never runs on the host.  The
compiler reads its source, the checker proves its ownership rules, and the
runtime launches it:

    vecadd[az.LaunchConfig.for_num_elems(n)](a, b, c)      # safe launch
    vecadd.unsafe_launch(config, a, b, c)                  # contract-less kernels
    vecadd.compile(arch="sm_90").ptx                       # the artifact
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Generic, NoReturn, ParamSpec, Protocol, TypeVar, cast, overload

from anodize.language.sources import spec_key

if TYPE_CHECKING:
    from typing import Unpack

    from pathlib import Path

    from anodize.codegen.artifact import CompiledKernel
    from anodize.language.contract import Contract
    from anodize.language.contract_schema import LaunchContractArgs
    from anodize.runtime.config import LaunchConfig
    from anodize.runtime.kernel_store import KernelStore
    from anodize.runtime.ops import Op


def _user_errors() -> tuple[type[Exception], ...]:
    """The user errors the entry points re-raise without anodize's frames (an `except` clause
    evaluates this only when an exception reaches it: `import anodize` loads no error class)."""
    from anodize.language.errors import USER_ERRORS

    return USER_ERRORS


def _kernel_store() -> KernelStore:
    """A new kernel's runtime state (runtime/kernel_store.py): the runtime package loads with the
    first kernel object, not with `import anodize` (the mypy plugin imports it)."""
    from anodize.runtime.kernel_store import KernelStore

    return KernelStore()


def _runtime() -> ModuleType:
    """anodize/kernel_runtime.py, and the runtime with it: loaded by a kernel's first launch,
    specialisation or compile, never by `import anodize`."""
    from anodize import kernel_runtime

    return kernel_runtime


def _generic() -> ModuleType:
    """runtime/generic.py (generic kernels: their signature, bindings, specialisations), loaded by
    the first question whether a kernel is generic (a compile asks it too: no NumPy, no launch path)."""
    from anodize.runtime import generic

    return generic


def _compiler() -> ModuleType:
    """runtime/compile.py (the checker, then codegen, cached), loaded by the first `compile()`:
    no NumPy, no launch path."""
    from anodize.runtime import compile

    return compile


def _front() -> ModuleType:
    """The front end (anodize/language/front.py: `ast` only, no runtime), loaded by the first read
    of a kernel's contract."""
    from anodize.language import front

    return front


P = ParamSpec("P")
R = TypeVar("R")
_K = TypeVar("_K")

__all__ = ["kernel", "func", "launch_contract", "tile_kernel", "TileKernel", "Kernel", "Func", "Launch", "unsafe", "syncthreads", "threadfence", "ContractSpec"]


class ContractSpec:
    """The raw arguments of `@launch_contract`, before the source-level parse: by the contract's
    field names (language/contract_schema.py `FIELDS`); `spec.requires` reads one (None when
    not given)."""

    __slots__ = ("args",)

    def __init__(self, args: dict[str, Any]):
        self.args = args

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.args.get(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ContractSpec) and other.args == self.args

    def __hash__(self) -> int:
        return hash(tuple(sorted((k, id(v)) for k, v in self.args.items())))

    def __repr__(self) -> str:
        return f"ContractSpec({', '.join(f'{k}={v!r}' for k, v in self.args.items())})"


class Func(Generic[P, R]):
    """A device helper (`@az.func`), callable from kernels and other helpers."""

    def __init__(self, fn: Callable[P, R]):
        self.fn = fn
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        raise TypeError(f"device helper `{self.__name__}` can only be called from an anodize kernel")

    def __repr__(self) -> str:
        return f"<anodize func {self.fn.__module__}.{self.fn.__qualname__}>"


class Launch(Protocol[P]):
    """What `kernel[config]` returns: call it with the kernel's arguments.

    Typing only.  `P` records the kernel's parameters so that the mypy plugin
    (`anodize.checker.mypy_plugin`) can check a call against their host-side types
    (a `Buffer` or CUDA array for a slice, a Python number for a scalar); without
    the plugin any arguments are accepted here and the runtime checks them.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> None: ...

    def op(self, *args: Any, **kwargs: Any) -> Op:
        """A lazy launch: validated now, run later (`.run()`, `await`, `.submit(pool)`)."""
        ...

    def call(self, *args: Any, **kwargs: Any) -> Any:
        """Launch with the inputs only: the contract's `outputs=` allocates the outputs, which
        are returned (a tuple when several)."""
        ...

    def call_op(self, *args: Any, **kwargs: Any) -> Op:
        """The lazy `call`: an op whose result is the allocated outputs."""
        ...


class Kernel(Generic[P]):
    """A kernel: launch with `k[config](*args)` (needs a contract) or `k.unsafe_launch`."""

    def __init__(self, fn: Callable[P, None], contract: ContractSpec | None = None, spec: tuple[tuple[str, Any], ...] | None = None,
                 options: tuple[tuple[str, Any], ...] = ()):
        self.fn = fn
        # a specialisation of a generic kernel: type variable -> scalar name, Constant -> value
        # (and the compile options below, which every specialisation carries)
        self.spec = spec
        # compile options baked into every specialisation (`num_warps=`, `num_stages=`: an autotuning
        # configuration's, language/tile_vocab.py COMPILE_OPTIONS); () for a kernel as written
        self.options = options
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn
        self.contract_spec = contract or getattr(fn, "__az_contract__", None)
        self._contract: Contract | None = None
        self._contract_parsed = False
        self.store: KernelStore = _kernel_store()  # runtime-owned: compiled artifacts and launch plans (runtime/kernel_store.py)

    # -- the contract, parsed from source once --------------------------------------------
    @property
    def contract(self) -> Contract | None:
        """The contract as the front end reads it from source (raises CheckError if it is
        malformed); None when there is none."""
        if not self._contract_parsed:
            self._contract = _front().kernel_contract(self)
            self._contract_parsed = True
        return self._contract

    @functools.cached_property
    def _bundled(self) -> bool:
        """Does a parameter take an `az.Bundle` (launched as its fields)?"""
        return bool(_runtime().has_bundles(self.fn))

    # -- generic kernels --------------------------------------------------------------------
    @functools.cached_property
    def generic(self) -> Any:
        """The generic parameters (type variables, `az.Constant` parameters) read from source; None for a
        plain kernel or a specialisation."""
        if self.spec is not None:
            return None
        return _generic().generic_signature(self)

    def specialize(self, **bindings: Any) -> Kernel[Any]:
        """The specialisation of a generic kernel: `k.specialize(T="f32", n=64)` (a type
        variable names a scalar, a Constant parameter takes its value); cached."""
        return self._specialization(_generic().check_bindings(self, self.generic, bindings))

    def _specialization(self, key: tuple[tuple[str, Any], ...]) -> Kernel[Any]:
        """The cached specialisation for bindings already validated (sorted (name, value) pairs)."""
        ck = ("spec", spec_key(key))
        specs = self.store.specs
        hit = specs.get(ck)
        if hit is None:
            hit = specs[ck] = self._specialised(tuple(sorted(key + self.options)) if self.options else key)
            while len(specs) > self._SPECS_MAX:  # the least recently used goes (and, unless held elsewhere, its code)
                specs.popitem(last=False)
        else:
            specs.move_to_end(ck)
        return cast("Kernel[Any]", hit)

    def _specialised(self, key: tuple[tuple[str, Any], ...]) -> Kernel[Any]:
        """A new kernel object for the specialisation `key` (a subclass keeps its own options)."""
        return Kernel(self.fn, self.contract_spec, spec=key, options=self.options)

    def with_options(self, options: tuple[tuple[str, Any], ...], num_warps: int | None = None) -> Kernel[Any]:
        """This kernel with compile options baked into every specialisation (an autotuning
        configuration's, runtime/tuning.py; `num_warps` applies to a tile kernel).  A plain
        kernel's options are its whole specialisation."""
        return Kernel(self.fn, self.contract_spec, spec=None if self.generic is not None else options, options=options)

    # -- launching ------------------------------------------------------------------------
    # specialisations kept per kernel (a bounded LRU, docs/performance.md "What is cached"): a
    # loop over 1,000 values of one `az.Constant` compiles each once and keeps the last 32
    _SPECS_MAX = 32
    _LAUNCHES_MAX = 64  # launch objects remembered per kernel, by config (then forgotten at once)

    def __getitem__(self, config: LaunchConfig[Any]) -> Launch[P]:
        store = self.store
        last = store.last_launcher
        if last is not None and last[0] is config:  # the hot path: the same config object as last time
            return last[1]  # type: ignore[no-any-return]
        # A config built on every launch (`k[LaunchConfig.for_tiles(...)]`) is interned, so it is
        # usually the object of an earlier launch: its launch object (a `Launcher`, or a generic
        # kernel's `GenericLaunch` with its per-dtype/Constant memo) is kept by config.
        launches = store.launches
        if launches:
            try:
                hit = launches.get(config)
            except TypeError:  # unhashable: not a LaunchConfig, which `_launch_for` reports
                hit = None
            if hit is not None:
                store.last_launcher = (config, hit)
                return hit  # type: ignore[no-any-return]
        try:
            return self._launch_for(config)
        except _user_errors() as e:  # a refused launch shows no anodize-internal frames
            __tracebackhide__ = True  # pytest and IPython hide this frame too
            raise e.with_traceback(None)

    def _launch_for(self, config: LaunchConfig[Any]) -> Launch[P]:
        """The launch object for `config`, made (and its config checked) and remembered."""
        rt = _runtime()
        bound = self._bind_config(config)
        if self.generic is not None:
            launcher: Any = rt.GenericLaunch(self, bound, self.generic)
        else:
            launcher = rt.prepare(self, bound, safe=True)
        if self._bundled:  # `State(...)` arguments: their fields (anodize/bundle_launch.py)
            launcher = rt.BundleLaunch(launcher, rt.bundle_positions(self.fn))
        store = self.store
        if isinstance(config, rt.LaunchConfig):
            if len(store.launches) >= self._LAUNCHES_MAX:
                store.launches.clear()
            store.launches[config] = launcher
        store.last_launcher = (config, launcher)
        return launcher  # type: ignore[no-any-return]

    def _bind_config(self, config: LaunchConfig[Any]) -> LaunchConfig[Any]:
        """The config this kernel launches with for `config` (a tile kernel fills in its block):
        `for_num_elems(n)` or `for_shape(shape)` built without `block` takes the block of the
        kernel's contract, the grid recomputed (docs/language.md, "Launch rules")."""
        with_block = getattr(config, "with_block", None)
        if with_block is None:
            return config
        contract = self.contract
        if contract is None or contract.block is None or contract.domain != config.rank:
            return config  # no block to take (or a rank error, which the launch reports)
        rank = config.rank
        block = (*contract.block, 1, 1, 1)[:3]
        if any(b != 1 for b in block[rank:]):
            return config  # a block beyond the launch's rank: the launch reports it
        return with_block(block[:rank])  # type: ignore[no-any-return]

    def unsafe_launch(self, config: LaunchConfig[Any], *args: Any, **kwargs: Any) -> None:
        """Launch without a contract; witnesses fail closed on a launch of the wrong rank
        (or with a grid or block dimension beyond their rank that is not 1)."""
        rt = _runtime()
        if self._bundled:
            args = rt.expand(args, rt.bundle_positions(self.fn)[1])
        try:
            if self.generic is not None:
                k, rest = rt.specialise(self, self.generic, args, kwargs)
                rt.prepare(k, config, safe=False)(*rest)
                return
            rt.prepare(self, config, safe=False)(*args, **kwargs)
        except _user_errors() as e:  # a refused launch shows no anodize-internal frames
            __tracebackhide__ = True  # pytest and IPython hide this frame too
            raise e.with_traceback(None)

    def compile(
        self,
        arch: str | None = None,
        *,
        bounds_checks: bool = True,
        line_info: bool = False,
        opt: int = 3,
    ) -> CompiledKernel:
        """Check and compile for a GPU architecture (default: the current device's, else sm_90).
        A generic kernel compiles one specialisation: `k.specialize(T="f32").compile()`."""
        try:
            if self.generic is not None:
                tvs = ", ".join(f'{t}="{c[0]}"' for t, c in self.generic.constraints.items())
                consts = ", ".join(f"{c}=..." for c in self.generic.constants)
                raise _generic().ArgumentError(
                    f"kernel `{self.__name__}` is generic: compile one specialisation of it",
                    help=f"`{self.__name__}.specialize({', '.join(x for x in (tvs, consts) if x)}).compile()`",
                )
            compiled: CompiledKernel = _compiler().compile_for_gpu(self, arch=arch, bounds_checks=bounds_checks, line_info=line_info, opt=opt)
            return compiled
        except _user_errors() as e:  # a check failure shows no anodize-internal frames
            __tracebackhide__ = True  # pytest and IPython hide this frame too
            raise e.with_traceback(None)

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            f"kernel `{self.__name__}` cannot be called directly; launch it with "
            f"`{self.__name__}[az.LaunchConfig.for_num_elems(n)](...)`"
        )

    def __repr__(self) -> str:
        return f"<anodize kernel {self.fn.__module__}.{self.fn.__qualname__}>"

    @functools.cached_property
    def signature(self) -> inspect.Signature:
        return inspect.signature(self.fn)


def kernel(fn: Callable[P, None]) -> Kernel[P]:
    """Mark `fn` as a kernel: annotated parameters, returns None."""
    if isinstance(fn, Kernel):
        return fn
    return Kernel(fn)


def func(fn: Callable[P, R]) -> Func[P, R]:
    """Mark `fn` as a device helper callable from kernels."""
    return Func(fn)


def launch_contract(**contract: Unpack[LaunchContractArgs]) -> Callable[[_K], _K]:
    """Declare how a kernel may be launched; stacks above or below `@kernel`.  The keywords are
    the contract's fields (language/contract_schema.py: `domain`, `block`, `requires`,
    `shared_mem`, `min_compute_capability`, `min_blocks_per_sm`, `outputs`, `cooperative`), read and validated
    from the kernel's source (az-contract).  `outputs=` declares how `kernel[cfg].call(...)`
    allocates the output parameters (docs/async.md)."""
    spec = ContractSpec(dict(contract))

    def apply(target: Any) -> Any:
        if isinstance(target, Kernel):
            target.contract_spec = spec
            target._contract_parsed = False
            # everything made under the old contract (launchers, specialisations, artifacts: the
            # codegen trusts the contract) is stale
            target.store.clear()
            return target
        if callable(target):
            target.__az_contract__ = spec
            return target
        raise TypeError("@launch_contract applies to a @kernel function")

    return apply


class TileKernel(Kernel[P]):
    """A tile kernel (`@az.tile_kernel`): one program per tile.  Its launches get their block
    from the kernel (`num_warps * 32` threads, one dimension); only the grid of the config
    counts (`az.LaunchConfig.for_tiles(shape, tile_shape)`)."""

    def __init__(self, fn: Callable[P, None], num_warps: int = 4, contract: ContractSpec | None = None, spec: tuple[tuple[str, Any], ...] | None = None,
                 options: tuple[tuple[str, Any], ...] = ()):
        super().__init__(fn, contract, spec, options)
        self.num_warps = num_warps

    def _specialised(self, key: tuple[tuple[str, Any], ...]) -> Kernel[Any]:
        return TileKernel(self.fn, self.num_warps, self.contract_spec, spec=key, options=self.options)

    def with_options(self, options: tuple[tuple[str, Any], ...], num_warps: int | None = None) -> Kernel[Any]:
        """This tile kernel with compile options (and the block `num_warps * 32` they name)."""
        spec = None if self.generic is not None else options
        return TileKernel(self.fn, num_warps or self.num_warps, self.contract_spec, spec=spec, options=options)

    def tile_config(self, config: LaunchConfig[Any]) -> LaunchConfig[Any]:
        """`config` with this kernel's block: `num_warps * 32` threads in x (the grid and its
        rank as given)."""
        LC: type[LaunchConfig[Any]] = _runtime().LaunchConfig
        if not isinstance(config, LC):
            return config  # (the launch path reports it)
        threads = self.num_warps * 32
        if config.block == (threads, 1, 1):
            return config
        rank = config.rank
        grid = config.grid[:rank] if rank > 1 else config.grid[0]
        return LC(grid, (threads,) + (1,) * (rank - 1) if rank > 1 else threads, config.shared_mem)

    def _bind_config(self, config: LaunchConfig[Any]) -> LaunchConfig[Any]:
        return self.tile_config(config)

    def unsafe_launch(self, config: LaunchConfig[Any], *args: Any, **kwargs: Any) -> None:
        """Launch without a contract (the block filled in, as for `kernel[config]`)."""
        super().unsafe_launch(self.tile_config(config), *args, **kwargs)


@overload
def tile_kernel(fn: Callable[P, None], *, num_warps: int = 4) -> TileKernel[P]: ...
@overload
def tile_kernel(fn: None = None, *, num_warps: int = 4) -> Callable[[Callable[P, None]], TileKernel[P]]: ...


def tile_kernel(fn: Callable[P, None] | None = None, *, num_warps: int = 4) -> Any:
    """Mark `fn` as a tile kernel (`@az.tile_kernel` or `@az.tile_kernel(num_warps=8)`); see
    `anodize.tile`."""
    if fn is None:
        return lambda f: TileKernel(f, num_warps)
    return TileKernel(fn, num_warps)


SLICE_FROM = 24
"""Top-level functions from which `source_kernels(path, only)` fronts only the kernel's slice."""


def source_kernels(path: Path, only: str = "") -> dict[str, Any]:
    """The file's kernels read from its source (the module is not run): name -> a `Kernel`
    object, or, with `only`, None for every kernel but that one.  `anodize compile`/`run`
    (anodize/cli.py) and `anodize build` (anodize/build.py) read a file this way.

    With `only` naming a top-level kernel of a module of `SLICE_FROM` or more top-level
    functions, the whole file is read and compiled by CPython's parser (a syntax error
    anywhere stops it, as it stops `anodize check`), and only the kernel's slice of it
    (anodize/language/module_slice.py: the kernel, what it depends on and every statement that
    is not a function) is parsed, fronted, typed and checked: the kernel's `Kernel` alone is returned, its stand-in function carrying
    the slice's front.  The compile gate's errors are those `anodize check` of the whole module
    reports inside the kernel, its contract and its helpers (test_kernel_slice.py)."""
    front_end = _front()
    text = front_end.read_source(path)  # read as Python reads it (BOM, coding line)
    if only:
        front, mine = front_end.sliced_front(text, str(path), only, SLICE_FROM)
        if mine is not None and front.symbols.function_kind(mine) == "kernel":
            return {only: Kernel(front_end.stand_in_function(front, only, mine))}
        if mine is not None:  # (not a kernel: the whole module's front says what its kernels are)
            front = front_end.front_or_error(text, str(path))
    else:
        front = front_end.front_or_error(text, str(path))
    out: dict[str, Any] = {}
    functions = list(front.functions())
    named = [(q, f) for q, f in functions if q == only]
    if named and front.symbols.function_kind(named[-1][1]) == "kernel":  # (the binding the module ends with)
        functions = named[-1:]
    for qual, fdef in functions:
        if front.symbols.function_kind(fdef) == "kernel":
            out[qual] = Kernel(front_end.stand_in_function(front, qual, fdef)) if not only or qual == only else None
    return out


@contextlib.contextmanager
def unsafe() -> Iterator[None]:
    """`with az.unsafe():` marks the unsafe tier: shared memory, barriers, raw ids, warp ops."""
    yield


def syncthreads() -> NoReturn:
    """Block-wide barrier (`bar.sync 0`); unsafe tier only."""
    raise TypeError("`syncthreads()` can only be called inside an anodize kernel")


def threadfence() -> None:
    """Order this thread's memory accesses before and after the call, as every thread
    of the device sees them (`membar.gl`, i.e. `fence.sc.gpu`; a sequentially
    consistent fence on the CPU backend).  Safe in every tier; it waits for nobody."""
    raise TypeError("`threadfence()` can only be called inside an anodize kernel")
