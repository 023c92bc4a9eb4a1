"""Launch every kernel of some modules once with valid random inputs (run under compute-sanitizer).

    python tools/sanitize_runner.py [--device cpu|gpu] [--debug-build] [--no-main | --small-main] [--json FILE] MODULE.py...

For each module: its `main()` (examples and many fixtures have one) runs first
(with `--small-main`, only a module that sets `SANITIZE_KWARGS`, and with those
keyword arguments: the examples' small sizes for the instrumented builds),
then every `@kernel` in it is launched once with inputs derived from its
parameters and its contract: slice shapes are searched until the contract's
`requires` holds, scalars get small values, inputs are random, outputs zeroed,
and the grid covers the largest slice.  Kernels without a contract use
`unsafe_launch`.  Before each launch the runner prints `@@AZ-BEGIN module::kernel`
(and `@@AZ-END ... status`) on stdout, flushed, and synchronizes after it, so
tools/sanitize.py can attribute each sanitizer report to a kernel.

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
from pathlib import Path
from typing import Any

import numpy as np

LEN_CHOICES = (1024, 256, 64, 1, 4)
SHAPE_CHOICES = ((64, 64), (48, 80), (80, 48), (96, 64), (64, 96))
INT_CHOICES = (64, 3, 1024, 0)


class _Fake:
    """Stands in for a buffer when evaluating `requires`: `len()` and `.shape`."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __len__(self) -> int:
        return self.shape[0]


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


def choose_shapes(kernel: Any, params: list[Any]) -> dict[str, Any] | None:
    """A shape (or int value) per parameter for which the contract's `requires` holds."""
    options: list[list[Any]] = []
    for p in params:
        if p.slice_kind is not None:
            options.append(list(SHAPE_CHOICES) if p.rank == 2 else [(n,) for n in LEN_CHOICES])
        elif p.scalar.name in ("i32", "i64", "u32", "u64"):
            options.append(list(INT_CHOICES))
        else:
            options.append([None])
    spec = kernel.contract_spec
    req = getattr(spec, "requires", None) if spec is not None else None
    for k, combo in enumerate(itertools.product(*options)):
        if k > 20000:
            return None
        values = {p.name: v for p, v in zip(params, combo)}
        if req is None:
            return values
        args = {n: (_Fake(v) if isinstance(v, tuple) else v) for n, v in values.items()}
        try:
            if req(**{n: args[n] for n in inspect.signature(req).parameters}):
                return values
        except Exception:
            continue
    return None


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
        else:
            host = rng.integers(0, max(1, min(n, 256)), n).astype(dt)
        args.append(dev.to_device(host.reshape(v)))
    return args


def launch_kernel(dev: Any, kernel: Any, rng: np.random.Generator) -> str:
    import anodize as az
    from anodize.runtime.compile import compile_for_cpu

    params = list(compile_for_cpu(kernel).params)  # the ABI's view of the parameters
    shapes = choose_shapes(kernel, params)
    if shapes is None:
        return "skip: no input shapes satisfy the contract"
    args = make_args(dev, params, shapes, rng)
    contract = kernel.contract
    domain = contract.domain if contract is not None else (2 if any(p.slice_kind is not None and p.rank == 2 for p in params if p.is_output) else 1)
    block = getattr(contract, "block", None) if contract is not None else None
    if domain == 2:
        shape = max((shapes[p.name] for p in params if p.slice_kind is not None and p.rank == 2), key=lambda s: s[0] * s[1], default=(64, 64))
        blk = tuple(block[:2]) if block else (16, 16)
        config = az.LaunchConfig.for_shape(shape, block=blk)
    else:
        n = max((shapes[p.name][0] for p in params if p.slice_kind is not None), default=256)
        blk1 = (block[0] if isinstance(block, tuple) else block) if block else 256
        config = az.LaunchConfig.for_num_elems(n, block=blk1)
    if contract is not None:
        kernel[config](*args)
    else:
        kernel.unsafe_launch(config, *args)
    dev.synchronize()
    return "ok"


def run_module(dev: Any, path: Path, *, call_main: bool, rng: np.random.Generator, small_main: bool = False) -> list[dict[str, Any]]:
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
            status = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        _say(f"@@AZ-END {tag} {status}")
        rows.append({"module": str(path), "kernel": "main", "status": status})
    for name, obj in sorted(vars(mod).items()):
        if not isinstance(obj, Kernel) or getattr(obj.fn, "__module__", "") != mod.__name__:
            continue
        tag = f"{path.name}::{name}"
        _say(f"@@AZ-BEGIN {tag}")
        try:
            status = launch_kernel(dev, obj, rng)
        except az_errors.CheckError as e:  # e.g. `# anodize: ignore[...]` does not reach the compile path
            status = f"skip: rejected by the compile path ({e.diagnostics[0].code})"
        except Exception as e:
            status = f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            traceback.print_exc(limit=3, file=sys.stderr)
        _say(f"@@AZ-END {tag} {status}")
        rows.append({"module": str(path), "kernel": name, "status": status})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("modules", nargs="+")
    ap.add_argument("--device", choices=("cpu", "gpu"), default="gpu")
    ap.add_argument("--debug-build", action="store_true", help="line_info=True, opt=0 (for racecheck)")
    ap.add_argument("--no-main", action="store_true")
    ap.add_argument("--small-main", action="store_true", help="run main(**SANITIZE_KWARGS) of the modules that set it")
    ap.add_argument(
        "--unchecked",
        action="store_true",
        help="skip the checker on the compile path (positive controls only: run kernels the checker rejects)",
    )
    ap.add_argument("--json", default=None)
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
        rows += run_module(dev, Path(m).resolve(), call_main=not ns.no_main, rng=rng, small_main=ns.small_main)
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if r["status"].startswith("error")]
    _say(f"@@AZ-SUMMARY launched={sum(r['status'] == 'ok' for r in rows)} skipped={sum(r['status'].startswith('skip') for r in rows)} errors={len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
