"""What a launch must satisfy before anything runs, and the wording of each refusal.

`runtime/launch.py` calls these once per `(kernel, config)` (when `kernel[config]`
is built) or once per device (at its first launch there), never per launch:

* `check_limits`: the device's (or every CUDA device's) block, grid and shared
  memory limits;
* `check_contract`: the launch contract's rank (`domain`), its `block`, and that
  every block and grid dimension beyond the domain is 1.  A contracted kernel
  trusts this check: its witnesses carry no device-side rank check, so a 2-D
  kernel launched with grid z = 4 would give four threads each `index_2d`
  witness (and two threads one `DisjointSlice` element);
* `check_device`, `check_compiled`: the contract's compute capability, static
  plus dynamic shared memory, and a block pinned by `.reqntid`;
* `bind_keywords`: `k[config](a=x, c=z)`, bound to the kernel's parameters by name.

A kernel compiled without a contract checks the same dimension rule on the
device instead (`codegen/llvm/lower.py`, `Lowerer.witness`): its witnesses fail
closed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anodize.language.contract import Contract
from anodize.language.errors import ArgumentError, ContractViolation, LaunchError
from anodize.language.launch_rules import launch_shape_problem, pad3
from anodize.runtime.config import LaunchConfig
from anodize.runtime.device import UNIVERSAL, DeviceLimits

if TYPE_CHECKING:
    from anodize.runtime.compile import LoadedKernel
    from anodize.runtime.device import Device

__all__ = [
    "UNIVERSAL",
    "check_limits",
    "check_contract",
    "check_device",
    "check_compiled",
    "unused_dimension_error",
    "bind_keywords",
    "argument_count_error",
]


_AXES = "xyz"


def check_contract(name: str, contract: Contract, config: LaunchConfig) -> None:
    """The contract's rank, its block, then the dimensions beyond its domain: the decision of
    `anodize/language/launch_rules.py`, which `anodize check` and the mypy plugin make too."""
    domain = contract.domain
    p = launch_shape_problem(domain, contract.block, config.rank, config.block, config.grid)
    if p is None:
        return
    if p.kind == "rank":
        raise ContractViolation(
            f"kernel `{name}` has a {domain}-D launch contract (domain={domain}), "
            f"but the launch config is {config.rank}-D: {config}",
            help=f"launch it with a {domain}-D config, e.g. `{_config_for(domain)}`",
        )
    if p.kind == "block":
        want = contract.block[0] if len(contract.block) == 1 else tuple(contract.block)  # type: ignore[arg-type]
        raise ContractViolation(
            f"kernel `{name}` must be launched with block {want} (its launch contract), "
            f"but the config has block {_short(config.block, config.rank)}",
            help=f"pass `block={want}` to the LaunchConfig, or leave `block` out: "
            + ("`LaunchConfig.for_num_elems(n)`" if config.rank == 1 else "`LaunchConfig.for_shape(shape)`")
            + " takes the block of the kernel's contract",
        )
    raise unused_dimension_error(name, domain, f"{p.what} {p.axis}", p.size)


def unused_dimension_error(name: str, domain: int, dimension: str, value: int) -> ContractViolation:
    return ContractViolation(
        f"{dimension} is {value}, but `{name}` has `domain={domain}`: every dimension beyond the domain must be 1",
        help=f"a thread's index witness covers only the first {domain} dimension{'s' if domain > 1 else ''}, so "
        f"{value} threads would share each witness; launch it with `{_config_for(domain)}`",
    )


def _config_for(domain: int) -> str:
    if domain == 1:
        return "az.LaunchConfig.for_num_elems(n, block=...)"
    return "az.LaunchConfig.for_shape((rows, cols), block=(bx, by))"


def _short(dim: tuple[int, int, int], rank: int) -> object:
    if dim[2] != 1:
        return dim
    return dim[0] if rank == 1 and dim[1] == 1 else dim[: max(2, rank)]


def check_device(name: str, dev: Device, config: LaunchConfig, contract: Contract | None) -> None:
    """The device's limits and the contract's capability, checked before anything compiles."""
    check_limits(name, dev.limits, dev.describe(), config)
    need = contract.min_compute_capability if contract is not None else None
    have = dev.compute_capability
    if need is not None and have is not None and tuple(have) < tuple(need):
        raise ContractViolation(
            f"kernel `{name}` needs compute capability {need[0]}.{need[1]} (its launch contract), "
            f"but {dev.describe()} has {have[0]}.{have[1]}"
        )


def check_limits(name: str, lim: DeviceLimits, where: str, config: LaunchConfig) -> None:
    if config.threads_per_block > lim.max_threads_per_block:
        raise LaunchError(
            f"kernel `{name}`: a block of {config.threads_per_block} threads {config.block} exceeds "
            f"the limit of {lim.max_threads_per_block} on {where}",
            help="use a smaller block (256 is a good default)",
        )
    for axis, (b, m) in enumerate(zip(config.block, lim.max_block, strict=True)):
        if b > m:
            raise LaunchError(f"kernel `{name}`: block dimension {_AXES[axis]} = {b} exceeds the limit {m} on {where}")
    for axis, (g, m) in enumerate(zip(config.grid, lim.max_grid, strict=True)):
        if g > m:
            raise LaunchError(
                f"kernel `{name}`: grid dimension {_AXES[axis]} = {g} exceeds the limit {m} on {where}",
                help="use a grid-stride loop (`thread.grid_stride`) with a smaller grid",
            )
    if config.shared_mem > lim.max_shared_per_block:
        raise LaunchError(
            f"kernel `{name}` asks for {config.shared_mem} bytes of dynamic shared memory per block, "
            f"more than the {lim.max_shared_per_block} available on {where}"
        )


def check_compiled(name: str, loaded: LoadedKernel, config: LaunchConfig) -> None:
    """What only the compiled kernel knows: static shared memory, a block pinned by `.reqntid`."""
    dev = loaded.device
    compiled = loaded.compiled
    shared = config.shared_mem + compiled.static_shared_bytes
    if shared > dev.limits.max_shared_per_block:
        raise LaunchError(
            f"kernel `{name}` needs {shared} bytes of shared memory per block "
            f"({compiled.static_shared_bytes} static + {config.shared_mem} dynamic), "
            f"more than the {dev.limits.max_shared_per_block} available on {dev.describe()}"
        )
    pinned = compiled.contract.block if compiled.contract is not None else None
    if pinned is not None and pad3(pinned) != config.block:
        raise LaunchError(
            f"kernel `{name}` was compiled for block {tuple(pinned)} (`.reqntid` from its contract), "
            f"but the config has block {config.block}",
            help=f"launch with `block={tuple(pinned) if len(pinned) > 1 else pinned[0]}`",
        )


def bind_keywords(name: str, names: tuple[str, ...], args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """`args` and `kwargs` as one positional tuple in parameter order (Python's own binding rules).

    Raises ArgumentError naming an unknown keyword, a parameter given twice, or the missing ones."""
    n = len(names)
    if len(args) > n:
        raise argument_count_error(name, names, len(args) + len(kwargs))
    slots: list[Any] = [*args, *([_MISSING] * (n - len(args)))]
    for key, value in kwargs.items():
        try:
            i = names.index(key)
        except ValueError:
            raise ArgumentError(
                f"kernel `{name}` has no parameter `{key}`",
                help=f"its parameters are {_names(names)}",
            ) from None
        if i < len(args):
            raise ArgumentError(
                f"kernel `{name}`, parameter `{key}`: given twice (by position and as `{key}=`)",
                help="pass each argument once",
            )
        slots[i] = value
    missing = [names[i] for i, v in enumerate(slots) if v is _MISSING]
    if missing:
        raise ArgumentError(
            f"kernel `{name}`: no argument for parameter{'s' if len(missing) > 1 else ''} {_names(tuple(missing))}",
            help=f"its parameters are {_names(names)}",
        )
    return tuple(slots)


def argument_count_error(name: str, names: tuple[str, ...], got: int) -> ArgumentError:
    n = len(names)
    return ArgumentError(f"kernel `{name}` takes {n} argument{'s' if n != 1 else ''} ({', '.join(names)}), got {got}")


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(f"`{x}`" for x in names)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING: Any = _Missing()
