"""The `anodize` command: check, compile, run, doctor, new.

Exit status: 0 success, 1 when anything is rejected or fails, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anodize.language.diagnostics import CheckError
from anodize.language.errors import LaunchError


def _err(msg: str) -> None:
    print(f"anodize: error: {msg}", file=sys.stderr)


def cmd_check(argv: list[str]) -> int:
    from anodize.checker.cli import run_check

    return run_check(argv)


def _source_kernels(path: Path) -> dict[str, Any]:
    """The file's kernels as `Kernel` objects read from its source: the module is not run."""
    from anodize.kernel import Kernel
    from anodize.language.front import front_for_source, stand_in_function

    front = front_for_source(path.read_text(encoding="utf-8"), str(path))
    out: dict[str, Any] = {}
    for qual, fdef in front.functions():
        if front.symbols.function_kind(fdef) == "kernel":
            out[qual] = Kernel(stand_in_function(front, qual, fdef))
    return out


def cmd_compile(args: argparse.Namespace) -> int:
    target = args.target
    file_part, _, kname = target.partition(":")
    path = Path(file_part)
    if not path.is_file():
        _err(f"no such file: {file_part}")
        return 2
    try:
        kernels = _source_kernels(path)
    except SyntaxError as e:
        _err(f"{path}:{e.lineno}:{e.offset}: invalid syntax: {e.msg}")
        return 1
    except UnicodeDecodeError as e:
        _err(f"{path}: not UTF-8 ({e.reason})")
        return 1
    if kname:
        if kname not in kernels:
            _err(f"`{kname}` is not a kernel in {path} (kernels: {', '.join(sorted(kernels)) or 'none'})")
            return 2
        chosen = [kernels[kname]]
    else:
        if not kernels:
            _err(f"{path} defines no @kernel")
            return 1
        chosen = list(kernels.values())
    bindings: dict[str, Any] = {}
    for item in [*args.specialize, *args.const]:
        key, eq, value = item.partition("=")
        if not eq or not key:
            _err(f"expected NAME=VALUE, got `{item}`")
            return 2
        bindings[key] = value
    for item in args.const:
        key, _, value = item.partition("=")
        try:
            bindings[key] = int(value) if value.lstrip("-").isdigit() else {"True": True, "False": False}.get(value, None)
            if bindings[key] is None:
                bindings[key] = float(value)
        except ValueError:
            _err(f"--const {key}: `{value}` is not a number or True/False")
            return 2
    try:
        if bindings:
            chosen = [k.specialize(**bindings) for k in chosen]
        for k in chosen:
            if k.generic is not None:
                k.compile()  # raises the ArgumentError that names what to give
    except LaunchError as e:
        print(f"anodize: error: {e}", file=sys.stderr)
        return 2
    outputs: list[str | bytes] = []
    for k in chosen:
        try:
            if args.arch == "cpu":
                from anodize.runtime.compile import compile_for_cpu

                compiled = compile_for_cpu(k, bounds_checks=not args.no_bounds_checks)
            else:
                compiled = k.compile(
                    arch=args.arch, bounds_checks=not args.no_bounds_checks, line_info=args.line_info
                )
        except CheckError as e:
            print(str(e), file=sys.stderr)
            return 1
        if args.emit == "llvm":
            outputs.append(compiled.llvm_ir)
        elif args.emit == "ptx":
            outputs.append(compiled.ptx)
        else:
            if not compiled.cubin:
                _err("no cubin: ptxas was not found (see `anodize doctor`)")
                return 1
            outputs.append(compiled.cubin)
        if compiled.warnings:
            from anodize.language.diagnostics import render_one

            for w in compiled.warnings:
                print(render_one(w), file=sys.stderr)
        if args.verbose:
            print(describe_compiled(k.__name__, compiled), file=sys.stderr)
    if args.emit == "cubin":
        if len(outputs) != 1:
            _err("--emit cubin needs one kernel: use FILE:KERNEL")
            return 2
        data = outputs[0]
        assert isinstance(data, bytes)
        if not args.output:
            _err("--emit cubin writes binary data: give -o FILE")
            return 2
        Path(args.output).write_bytes(data)
        return 0
    text = "\n".join(o if isinstance(o, str) else "" for o in outputs)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def describe_compiled(name: str, compiled: Any) -> str:
    """`anodize compile -v`: what was built, how (compiled, or loaded from the cache), and with which ptxas."""
    how = "loaded from cache" if compiled.from_cache else f"compiled in {compiled.compile_seconds * 1e3:.1f} ms"
    checks = f"bounds checks left={compiled.bounds_checks}"
    if compiled.arch == "cpu":
        return f"{name}: cpu (llvmlite host JIT), {checks}, {how}"
    from anodize.runtime.doctor import describe_ptxas

    r = compiled.resources
    if compiled.cubin and r.registers is not None:
        usage = f"registers={r.registers}, spills={r.spill_stores}/{r.spill_loads}"
    else:
        usage = "registers and spills unknown (no cubin)"
    text = f"{name}: {compiled.arch}, {usage}, {checks}, {how}\n  ptxas: {describe_ptxas()}"
    return text + "".join(f"\n  {line}" for line in compiled.matmuls)


def cmd_run(args: argparse.Namespace) -> int:
    from anodize.runtime import device as devmod

    path = Path(args.file)
    if not path.is_file():
        _err(f"no such file: {args.file}")
        return 2
    sys.argv = [str(path), *args.args]
    sys.path.insert(0, str(path.parent.resolve()))
    try:
        runpy.run_path(str(path), run_name="__main__")
    except CheckError as e:
        print(str(e), file=sys.stderr)
        return 1
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if code:
            return code
    used = devmod.devices_used()
    names = ", ".join(d.describe() for d in used) if used else "no device"
    print(f"anodize: {path.name} ran on {names}", file=sys.stderr)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from anodize.runtime import doctor_info

    info = doctor_info()
    width = max(len(k) for k in info)
    for k, v in info.items():
        print(f"{k.ljust(width)}  {v}")
    return 0


_NEW_TEMPLATE = '''"""{name}: an anodize kernel. Run with `anodize run {name}.py`."""

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda x, out: len(x) == len(out))
@kernel
def {name}(x: Slice[f32], out: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = x[i] * 2.0


if __name__ == "__main__":
    dev = az.device()
    n = 1 << 16
    x = dev.to_device(np.random.rand(n).astype(np.float32))
    out = dev.empty(n, az.f32)
    {name}[az.LaunchConfig.for_num_elems(n, block=256)](x, out)
    assert np.allclose(out.to_host(), x.to_host() * 2.0)
    print("ok")
'''


def cmd_new(args: argparse.Namespace) -> int:
    name = args.name
    if not name.isidentifier():
        _err(f"`{name}` is not a valid Python identifier")
        return 2
    path = Path(f"{name}.py")
    if path.exists():
        _err(f"{path} already exists")
        return 1
    path.write_text(_NEW_TEMPLATE.format(name=name))
    print(f"created {path}; try `anodize check {path}` and `anodize run {path}`")
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from anodize.runtime import diskcache

    if args.action == "clear":
        n = diskcache.clear()
        print(f"removed {n} cache entr{'y' if n == 1 else 'ies'} from {diskcache.cache_dir()}")
        return 0
    info = diskcache.info()
    print(f"directory  {info['directory']}")
    print(f"enabled    {info['enabled']}")
    print(f"entries    {info['entries']}")
    print(f"size       {info['bytes'] / 1024:.1f} KiB")
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="anodize", description="safe GPU kernels in plain Python")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="cmd")
    sub.add_parser("check", help="run the static safety checker (see `anodize check --help`)", add_help=False)
    c = sub.add_parser("compile", help="compile a kernel to LLVM IR, PTX or a cubin")
    c.add_argument("target", metavar="FILE[:KERNEL]")
    c.add_argument("--emit", choices=["llvm", "ptx", "cubin"], default="ptx")
    c.add_argument("--arch", default=None, help="sm_80, sm_90, ... (default: the GPU's, else sm_90), or cpu")
    c.add_argument("-o", "--output", default=None)
    c.add_argument("--line-info", action="store_true", help="emit source line info (for compute-sanitizer)")
    c.add_argument("--no-bounds-checks", action="store_true", help="remove bounds checks (benchmarks only)")
    c.add_argument("--specialize", action="append", default=[], metavar="T=f32",
                   help="a generic kernel's type variable and the scalar to compile it for (repeatable)")
    c.add_argument("--const", action="append", default=[], metavar="N=64",
                   help="an `az.Constant` parameter and its value (repeatable)")
    c.add_argument(
        "-v", "--verbose", action="store_true",
        help="print registers, spills, compile time (or that the cache had it) and the ptxas used",
    )
    r = sub.add_parser("run", help="run a script and say which device it used")
    r.add_argument("file")
    r.add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("doctor", help="report GPU, driver, toolchain and cache")
    ca = sub.add_parser("cache", help="show or clear the persistent compile cache")
    ca.add_argument("action", choices=["info", "clear"])
    n = sub.add_parser("new", help="create a starter kernel file")
    n.add_argument("name")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "check":
        return cmd_check(argv[1:])
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.version:
        import anodize

        print(f"anodize {anodize.__version__}")
        return 0
    handlers = {"cache": cmd_cache, "compile": cmd_compile, "run": cmd_run, "doctor": cmd_doctor, "new": cmd_new}
    if args.cmd not in handlers:
        parser.print_help()
        return 2
    return handlers[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
