"""Launch every kernel of some modules once with valid random inputs (run under compute-sanitizer).

    python tools/sanitize_runner.py [--device cpu|gpu] [--debug-build] [--no-main | --small-main]
                                    [--each-member] [--json FILE] MODULE.py...

For each module: its `main()` (examples and many fixtures have one) runs first
(with `--small-main`, only a module that sets `SANITIZE_KWARGS`, and with those
keyword arguments: the examples' small sizes for the instrumented builds),
then every `@kernel` (and `@az.tile_kernel`) in it is launched with inputs derived
from its parameters and its contract (`derive_launches`, which needs no device):

* slice shapes (1-D, 2-D and 3-D) are searched until the contract's `requires` holds,
  integer scalars get small values, inputs are random, outputs zeroed;
* a generic kernel is specialised: each type variable takes the first member of its
  constraint (`--each-member`: one launch per member, combined over the type variables),
  and each `az.Constant` the first small value (`CONST_CHOICES`) the compile path accepts;
  the launch goes through the generic kernel (`kernel[config](...)`), which picks the
  specialisation from the arguments' dtypes and the Constants' values;
* a `shared_mem=` contract gets exactly the bytes its expression asks for, at the chosen
  shapes and the block's thread count (a combination needing more than 48 KiB is skipped);
  a kernel without one, in a module that declares a dynamic shared array, 8 bytes a thread;
* integer inputs are small (0-2: they often index a table), float inputs in [0, 1);
* the grid covers the largest slice: `for_num_elems` (domain 1), `for_shape` over the
  largest 2-D or 3-D output (domains 2 and 3), with the contract's block.

Kernels without a contract use `unsafe_launch`.  A launch that raises `KernelFault` (a
bounds check or assert caught on the device) is recorded as `fault: ...`, not as an error.  Before each launch the runner prints
`@@AZ-BEGIN module::kernel` (a specialisation as `module::kernel[T=f32,k=4]`) and
`@@AZ-END ... status` on stdout, flushed, and synchronizes after it, so tools/sanitize.py
can attribute each sanitizer report to a kernel.

`--debug-build` compiles GPU kernels with `line_info=True, opt=0` (the `-G`
equivalent that racecheck needs to see every shared-memory access).
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import itertools
import json
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

LEN_CHOICES = (1024, 256, 64, 1, 4)
SHAPE_CHOICES = ((64, 64), (48, 80), (80, 48), (96, 64), (64, 96))
SHAPE3_CHOICES = ((6, 10, 12), (5, 6, 7), (8, 8, 8), (4, 16, 32))
INT_CHOICES = (64, 3, 1024, 0)
# az.Constant values tried in order until the compile path accepts one (small: they size
# local and shared arrays and unroll loops)
CONST_CHOICES: dict[str, tuple[Any, ...]] = {"i64": (4, 2, 8, 1, 16, 3, 32, 64), "f64": (1.5, 0.5, 2.0), "bool_": (True, False)}
MAX_SHARED = 48 * 1024  # dynamic shared memory a derived launch may ask for
# dynamic shared memory per thread for a kernel without a `shared_mem=` contract whose module
# declares a dynamic shared array (`az.shared.array(0, T)`, `az.shared.dynamic_array(T)`)
DYNAMIC_SHARED_PER_THREAD = 8
_SEARCH_LIMIT = 20000  # shape combinations tried per kernel
_CONST_LIMIT = 64  # Constant combinations tried per specialisation


class _Fake:
    """Stands in for a buffer when evaluating `requires`: `len()` and `.shape`."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __len__(self) -> int:
        return self.shape[0]


@dataclass
class LaunchPlan:
    """One derived launch: which specialisation, the inputs' shapes and values, the config."""

    kernel: Any  # what `[config]` is applied to: the kernel as the user has it (generic: its Constants are arguments)
    label: str  # "" or "[T=f32,k=4]"
    params: list[Any]  # the specialisation's ABI parameters (`ParamSpec`s; Constants removed)
    order: tuple[str, ...]  # every parameter of the kernel, in call order (Constants included)
    shapes: dict[str, Any]  # slice -> shape, integer scalar -> value
    constants: dict[str, Any] = field(default_factory=dict)  # Constant parameter -> value
    domain: int = 1
    grid_shape: tuple[int, ...] = ()  # what the grid covers: (n,), (rows, cols) or (layers, rows, cols)
    block: Any = 256
    shared_mem: int = 0
    checked: bool = True  # False: no contract, launched with `unsafe_launch`

    def config(self) -> Any:
        import anodize as az

        if self.domain == 1:
            return az.LaunchConfig.for_num_elems(self.grid_shape[0], block=self.block, shared_mem=self.shared_mem)
        shape: Any = self.grid_shape  # (rows, cols) or (layers, rows, cols)
        return az.LaunchConfig.for_shape(shape, block=self.block, shared_mem=self.shared_mem)


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def load(path: Path) -> Any:
    name = "azsan_" + path.stem
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _contract(kernel: Any) -> Any:
    return kernel.contract if kernel.contract_spec is not None else None


def _block_threads(contract: Any, domain: int) -> int:
    block = getattr(contract, "block", None)
    if block:
        n = 1
        for b in block:
            n *= b
        return n
    return {1: 256, 2: 256, 3: 256}[domain]


def _domain(contract: Any, params: list[Any]) -> int:
    if contract is not None:
        return int(contract.domain)
    ranks = [p.rank for p in params if p.is_output]
    return 3 if 3 in ranks else 2 if 2 in ranks else 1


def _uses_dynamic_shared(kernel: Any) -> bool:
    from anodize.language.front import module_source

    _, text = module_source(kernel.fn)
    return "shared.array(0" in text or "shared.dynamic_array(" in text


def shared_bytes(contract: Any, values: dict[str, Any], block_threads: int, dynamic: bool = False) -> int:
    """The dynamic shared memory the contract's `shared_mem=` asks for at these shapes and
    scalars; without one, `DYNAMIC_SHARED_PER_THREAD` bytes a thread when `dynamic` (the
    kernel's module declares a dynamic shared array), else 0."""
    sm = getattr(contract, "shared_mem", None)
    if sm is None:
        return DYNAMIC_SHARED_PER_THREAD * block_threads if dynamic else 0
    from anodize.language.contract import Env, eval_expr

    shapes = {n: v for n, v in values.items() if isinstance(v, tuple)}
    scalars = {n: int(v) for n, v in values.items() if isinstance(v, int) and not isinstance(v, bool)}  # the expression reads ints
    env = Env(lengths={n: s[0] for n, s in shapes.items()}, shapes=shapes, scalars={**scalars, "block": block_threads})
    return max(0, eval_expr(sm.expr, env))


def choose_shapes(kernel: Any, params: list[Any], constants: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A shape (or int value) per parameter for which the contract's `requires` holds (and
    whose `shared_mem` fits in `MAX_SHARED`).  `constants`: the Constant parameters' values,
    which `requires` may read."""
    options: list[list[Any]] = []
    for p in params:
        if p.slice_kind is not None:
            options.append(list(SHAPE3_CHOICES) if p.rank == 3 else list(SHAPE_CHOICES) if p.rank == 2 else [(n,) for n in LEN_CHOICES])
        elif p.scalar.name in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"):
            options.append(list(INT_CHOICES))
        else:
            options.append([None])
    spec = kernel.contract_spec
    req = getattr(spec, "requires", None) if spec is not None else None
    contract = _contract(kernel)
    threads = _block_threads(contract, _domain(contract, params))
    for k, combo in enumerate(itertools.product(*options)):
        if k > _SEARCH_LIMIT:
            return None
        values = {p.name: v for p, v in zip(params, combo)}
        env = {**(constants or {}), **values}
        if req is not None:
            args = {n: (_Fake(v) if isinstance(v, tuple) else v) for n, v in env.items()}
            try:
                if not req(**{n: args[n] for n in inspect.signature(req).parameters}):
                    continue
            except Exception:
                continue
        try:
            if shared_bytes(contract, env, threads) > MAX_SHARED:
                continue
        except (KeyError, ArithmeticError):
            continue
        return values
    return None


def specialisations(kernel: Any, each_member: bool = False) -> list[dict[str, str]]:
    """The type-variable bindings to launch a kernel with: `[{}]` for a plain kernel, else
    the first member of each constraint (`each_member`: every combination of members)."""
    sig = kernel.generic
    if sig is None or not sig.constraints:
        return [{}]
    names = list(sig.constraints)
    choices = [sig.constraints[t] if each_member else sig.constraints[t][:1] for t in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*choices)]


def _accepted(kernel: Any, types: dict[str, str]) -> tuple[Any, dict[str, Any], list[Any]]:
    """The specialisation for `types` with the first Constant values the compile path's
    gate accepts, those values, and its parameters.  Raises the last CheckError when none is."""
    from anodize.language.typer import build_ir
    from anodize.runtime.compile import _enforce

    sig = kernel.generic
    if sig is None:
        _enforce(kernel)
        return kernel, {}, list(build_ir(kernel).params)
    consts = list(sig.constants.items())
    last: Exception | None = None
    combos = itertools.product(*(CONST_CHOICES[scalar] for _, scalar in consts))
    for values in itertools.islice(combos, _CONST_LIMIT):
        constants = {name: v for (name, _), v in zip(consts, values)}
        spec = kernel.specialize(**types, **constants)
        try:
            _enforce(spec)  # the checker and the typing at this specialisation (a Constant may be refused here)
            return spec, constants, list(build_ir(spec).params)
        except Exception as e:  # CheckError: try the next value
            if type(e).__name__ != "CheckError":
                raise
            last = e
    assert last is not None
    raise last


def derive_launches(kernel: Any, each_member: bool = False) -> list[LaunchPlan | str]:
    """The launches the runner makes of `kernel` (no device needed): one `LaunchPlan` per
    specialisation, or a "skip: ..." string saying why there is none."""
    out: list[LaunchPlan | str] = []
    sig = kernel.generic
    order = tuple(sig.params) if sig is not None else tuple(inspect.signature(kernel.fn).parameters)
    for types in specialisations(kernel, each_member):
        spec_kernel, constants, params = _accepted(kernel, types)
        label = "[" + ",".join(f"{k}={v}" for k, v in {**types, **constants}.items()) + "]" if (types or constants) else ""
        shapes = choose_shapes(spec_kernel, params, constants)
        if shapes is None:
            out.append(f"skip: no input shapes satisfy the contract{label}")
            continue
        contract = _contract(spec_kernel)
        domain = _domain(contract, params)
        block = getattr(contract, "block", None)
        if domain == 1:
            grid_shape: tuple[int, ...] = (max((shapes[p.name][0] for p in params if p.slice_kind is not None), default=256),)
            blk: Any = block[0] if block else 256
        else:
            ranked = [shapes[p.name] for p in params if p.slice_kind is not None and p.rank == domain]
            default = (64, 64) if domain == 2 else (8, 8, 8)
            grid_shape = max(ranked, key=lambda s: int(np.prod(s)), default=default)
            blk = tuple(block[:domain]) if block and len(block) >= domain else ((16, 16) if domain == 2 else (8, 8, 4))
        threads = _block_threads(contract, domain)
        plan = LaunchPlan(
            kernel=kernel, label=label, params=params, order=order, shapes=shapes, constants=constants,
            domain=domain, grid_shape=tuple(grid_shape), block=blk,
            shared_mem=shared_bytes(contract, {**constants, **shapes}, threads, _uses_dynamic_shared(kernel)),
            checked=contract is not None,
        )
        out.append(plan)
    return out


def make_args(dev: Any, params: list[Any], shapes: dict[str, Any], rng: np.random.Generator) -> list[Any]:
    args: list[Any] = []
    for p in params:
        dt = p.scalar.dtype
        v = shapes[p.name]
        if p.slice_kind is None:
            if p.scalar.name == "bool_":
                args.append(True)
            elif np.issubdtype(dt, np.integer):
                args.append(dt.type(v))
            else:
                args.append(dt.type(1.5))
            continue
        if p.is_output:
            args.append(dev.zeros(v, dt))
            continue
        n = int(np.prod(v))
        if np.issubdtype(dt, np.floating):
            host = rng.random(n).astype(dt)
        elif dt == np.bool_:
            host = rng.random(n) < 0.5
        else:  # small: integer inputs often index a table or a local array (of 3 or 4 elements)
            host = rng.integers(0, 3, n).astype(dt)
        args.append(dev.to_device(host.reshape(v)))
    return args


def launch_plan(dev: Any, plan: LaunchPlan, rng: np.random.Generator) -> str:
    """Make the plan's arguments on `dev`, launch, synchronize."""
    by_name = dict(zip((p.name for p in plan.params), make_args(dev, plan.params, plan.shapes, rng)))
    by_name.update(plan.constants)
    args = [by_name[n] for n in plan.order]
    config = plan.config()
    if plan.checked:
        plan.kernel[config](*args)
    else:
        plan.kernel.unsafe_launch(config, *args)
    dev.synchronize()
    return "ok"


def launch_kernel(dev: Any, kernel: Any, rng: np.random.Generator) -> str:
    """Launch the kernel's first derived plan (kept for callers of the one-launch API)."""
    plans = derive_launches(kernel)
    first = plans[0]
    return first if isinstance(first, str) else launch_plan(dev, first, rng)


def _error(e: Exception) -> str:
    """A launch's status for an exception: "fault: ..." for a `KernelFault` (a bounds check or
    assert caught it on the device: the safety net worked; fixtures such as owned_tiles.faulty
    fault on purpose), "error: ..." for anything else."""
    kind = "fault" if type(e).__name__ == "KernelFault" else "error"
    return f"{kind}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def run_module(
    dev: Any, path: Path, *, call_main: bool, rng: np.random.Generator, small_main: bool = False, each_member: bool = False
) -> list[dict[str, Any]]:
    import anodize as az_errors
    from anodize.kernel import Kernel

    rows: list[dict[str, Any]] = []
    try:
        mod = load(path)
    except Exception as e:
        return [{"module": str(path), "kernel": "<import>", "status": f"error: {type(e).__name__}: {e}"}]
    main = getattr(mod, "main", None)
    kwargs = getattr(mod, "SANITIZE_KWARGS", None) if small_main else {}
    if small_main and kwargs is None:
        call_main = False  # the module's own sizes are too large for an instrumented build
    if call_main and callable(main) and all(q.default is not q.empty for q in inspect.signature(main).parameters.values()):
        tag = f"{path.name}::main"
        _say(f"@@AZ-BEGIN {tag}")
        try:
            main(**(kwargs or {}))
            dev.synchronize()
            status = "ok"
        except Exception as e:
            status = _error(e)
        _say(f"@@AZ-END {tag} {status}")
        rows.append({"module": str(path), "kernel": "main", "status": status})
    for name, obj in sorted(vars(mod).items()):
        if not isinstance(obj, Kernel) or getattr(obj.fn, "__module__", "") != mod.__name__:
            continue
        try:
            plans: list[LaunchPlan | str] = derive_launches(obj, each_member)
        except az_errors.CheckError as e:  # e.g. `# anodize: ignore[...]` does not reach the compile path
            plans = [f"skip: rejected by the compile path ({e.diagnostics[0].code})"]
        except Exception as e:
            plans = [_error(e)]
            traceback.print_exc(limit=3, file=sys.stderr)
        for plan in plans:
            tag = f"{path.name}::{name}{plan.label if isinstance(plan, LaunchPlan) else ''}"
            _say(f"@@AZ-BEGIN {tag}")
            if isinstance(plan, str):
                status = plan
            else:
                try:
                    status = launch_plan(dev, plan, rng)
                except Exception as e:
                    status = _error(e)
                    traceback.print_exc(limit=3, file=sys.stderr)
            _say(f"@@AZ-END {tag} {status}")
            rows.append({"module": str(path), "kernel": name + (plan.label if isinstance(plan, LaunchPlan) else ""), "status": status})
    return rows


def main(argv: list[str] | None = None) -> int:
    head, _, rest = __doc__.partition("\n")
    ap = argparse.ArgumentParser(description=head, epilog=rest.strip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("modules", nargs="+")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    ap.add_argument("--debug-build", action="store_true", help="line_info=True, opt=0 (for racecheck)")
    ap.add_argument("--no-main", action="store_true", help="only the derived launches, no module's main()")
    ap.add_argument("--small-main", action="store_true", help="run main(**SANITIZE_KWARGS) of the modules that set it")
    ap.add_argument("--each-member", action="store_true", help="a generic kernel: one launch per member of each type variable's constraint (default: the first)")
    ap.add_argument(
        "--unchecked",
        action="store_true",
        help="skip the checker on the compile path (positive controls only: run kernels the checker rejects)",
    )
    ap.add_argument("--json", default=None, help="write the per-launch statuses here")
    ns = ap.parse_args(argv)
    import anodize as az
    from anodize.runtime import compile as rc, launch as rl

    if ns.unchecked:
        rc._enforce = lambda kernel: None  # type: ignore[assignment]
    if ns.debug_build:
        rl.compile_for_device = functools.partial(rc.compile_for_device, line_info=True, opt=0)  # type: ignore[assignment]
    dev = az.device("cpu") if ns.device == "cpu" else az.device(0)
    rng = np.random.default_rng(0)
    rows: list[dict[str, Any]] = []
    for m in ns.modules:
        rows += run_module(dev, Path(m).resolve(), call_main=not ns.no_main, rng=rng, small_main=ns.small_main, each_member=ns.each_member)
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if r["status"].startswith("error")]
    faults = sum(r["status"].startswith("fault") for r in rows)
    _say(
        f"@@AZ-SUMMARY launched={sum(r['status'] == 'ok' for r in rows)} skipped={sum(r['status'].startswith('skip') for r in rows)} "
        f"errors={len(bad)}" + (f" faults={faults}" if faults else "")
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
