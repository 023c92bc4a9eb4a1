"""`anodize tune MODULE.py:KERNEL --shape m=4096 --shape n=4096 ...`: tune an autotuned kernel
for one shape and print the report (which configurations ran, their times, which were skipped
and why, the winner).

The module is imported (not run as `__main__`); the kernel must be an `@az.autotune` kernel whose
decorator names `inputs=`, a function `(device, **shape) -> (grid, args)` that allocates the
launch's arguments for a shape.  `--export FILE` writes the winner to a seed file for deployment
(`@az.autotune(..., seed=FILE)` or `ANODIZE_TUNE_SEED=FILE`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import anodize as az
from anodize.language.errors import USER_ERRORS

__all__ = ["add_parser", "cmd_tune"]


def add_parser(sub: Any) -> None:
    t = sub.add_parser("tune", help="autotune an `@az.autotune` kernel for a shape and print the report")
    t.add_argument("target", metavar="FILE:KERNEL")
    t.add_argument("--shape", action="append", default=[], metavar="NAME=INT",
                   help="a size the kernel's `inputs=` function takes (repeatable)")
    t.add_argument("--json", action="store_true", help="print the report as JSON")
    t.add_argument("--export", default=None, metavar="FILE", help="write the winner to a seed file")


def _err(msg: str) -> int:
    print(f"anodize tune: error: {msg}", file=sys.stderr)
    return 2


def _shape(items: list[str]) -> dict[str, int] | str:
    out: dict[str, int] = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            return f"`--shape {item}`: expected NAME=INT"
        try:
            out[name] = int(value, 0)
        except ValueError:
            return f"`--shape {item}`: `{value}` is not an integer"
    return out


def cmd_tune(args: argparse.Namespace) -> int:
    from anodize.autotuning import (
        Autotuned,  # (the runtime: loaded by `anodize tune` only)
    )

    file_part, _, kname = args.target.partition(":")
    path = Path(file_part)
    if not path.is_file() or not kname:
        return _err(f"expected FILE.py:KERNEL, got `{args.target}`")
    shape = _shape(args.shape)
    if isinstance(shape, str):
        return _err(shape)
    sys.path.insert(0, str(path.resolve().parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    k = getattr(module, kname, None)
    if not isinstance(k, Autotuned):
        return _err(f"`{kname}` in {path} is not an `@az.autotune` kernel")
    if k.inputs is None:
        return _err(f"`{kname}` names no `inputs=` function: `@az.autotune(..., inputs=lambda dev, **shape: (grid, args))`")
    dev = az.device()
    try:
        grid, launch_args = k.inputs(dev, **shape)
        report = k.tune(grid, *launch_args)
    except USER_ERRORS as e:
        print(str(e), file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({
            "key": repr(report.key), "winner": report.winner.to_json() if report.winner else None, "source": report.source,
            "device": report.device, "seconds": report.seconds, "compile_seconds": report.compile_seconds,
            "records": [{"config": r.config.to_json(), "status": r.status, "time_ms": r.time_ms, "reason": r.reason} for r in report.records],
        }, indent=1))
    else:
        print(f"anodize tune: `{kname}` on {dev.describe()}")
        print(report.table())
    if args.export:
        n = k.export(args.export)
        print(f"anodize tune: wrote {n} entr{'y' if n == 1 else 'ies'} to {args.export}")
    return 0 if report.winner is not None else 1
