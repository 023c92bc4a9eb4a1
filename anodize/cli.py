"""The `anodize` command: check, compile, build, run, doctor, new.

Exit status: 0 success, 1 when anything is rejected or fails, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import gc
import os
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import anodize
from anodize.cli_tune import add_parser, cmd_tune
from anodize.kernel import source_kernels
from anodize.language.diagnostics import CheckError, render_one
from anodize.language.errors import LaunchError
from anodize.runtime import diskcache


def _err(msg: str) -> None:
    print(f"anodize: error: {msg}", file=sys.stderr)


def _runtime() -> ModuleType:
    """anodize/cli_runtime.py (the runtime, NumPy), loaded by a command that compiles, runs or
    builds: `anodize check` and `--help` never load it."""
    from anodize import cli_runtime

    return cli_runtime


def cmd_check(argv: list[str], kept: list[object] | None = None) -> int:
    from anodize.checker.cli import run_check

    return run_check(argv, kept)


def cmd_compile(args: argparse.Namespace) -> int:
    target = args.target
    file_part, _, kname = target.partition(":")
    path = Path(file_part)
    if not path.is_file():
        _err(f"no such file: {file_part}")
        return 2
    try:
        kernels = source_kernels(path, kname)
    except CheckError as e:  # does not parse, or nests deeper than anodize reads: as `anodize check` says
        print(str(e), file=sys.stderr)
        return 1
    except SyntaxError as e:  # an unknown encoding on the coding line
        _err(f"{path}:{e.lineno}: {e.msg}")
        return 1
    except UnicodeDecodeError as e:
        _err(f"{path}: not {e.encoding} ({e.reason})")
        return 1
    except OSError as e:
        _err(f"{path}: cannot read: {e.strerror or e}")
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
    bindings = _bindings(args)
    if bindings is None:
        return 2
    try:
        if bindings:
            chosen = [k.specialize(**bindings) for k in chosen]
        for k in chosen:
            if k.generic is not None:  # the command's spelling of what to give, not the Python API's
                given = [f"--specialize {t}={c[0]}" for t, c in k.generic.constraints.items()]
                given += [f"--const {c}=..." for c in k.generic.constants]
                _err(f"kernel `{k.__name__}` is generic: compile one specialisation of it")
                print(f"  help: anodize compile {target} {' '.join(given)}", file=sys.stderr)
                return 2
    except LaunchError as e:
        print(f"anodize: error: {e}", file=sys.stderr)
        return 2
    outputs: list[str | bytes] = []
    for k in chosen:
        try:
            if args.arch == "cpu":
                compiled = _runtime().compile_for_cpu(k, bounds_checks=not args.no_bounds_checks)
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
        return _write_output(args.output, data)
    text = "\n".join(o if isinstance(o, str) else "" for o in outputs)
    if args.output:
        return _write_output(args.output, text.encode("utf-8", "surrogateescape"))
    sys.stdout.write(text)
    return 0


def _write_output(path: str, data: bytes) -> int:
    """Write `-o`'s file; a full disk or a folder that cannot be written is an error naming
    the file (and no half-written file is left behind)."""
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        _err(f"cannot write {path}: {e.strerror or e}")
        if os.path.isfile(path) and not os.path.islink(path):
            try:
                os.remove(path)
            except OSError:
                pass
        return 1
    return 0


def _bindings(args: argparse.Namespace) -> dict[str, Any] | None:
    """`--specialize T=f32` and `--const N=64` as specialisation bindings; None (reported) when malformed."""
    bindings: dict[str, Any] = {}
    for item in [*args.specialize, *args.const]:
        key, eq, value = item.partition("=")
        if not eq or not key:
            _err(f"expected NAME=VALUE, got `{item}`")
            return None
        bindings[key] = value
    for item in args.const:
        key, _, value = item.partition("=")
        try:
            bindings[key] = int(value) if value.lstrip("-").isdigit() else {"True": True, "False": False}.get(value, None)
            if bindings[key] is None:
                bindings[key] = float(value)
        except ValueError:
            _err(f"--const {key}: `{value}` is not a number or True/False")
            return None
    return bindings


def cmd_build(args: argparse.Namespace) -> int:
    """`anodize build MODULE.py --arch sm_80,sm_90 -o OUT` (anodize/build.py)."""
    build_package = _runtime().build_package
    path = Path(args.module)
    if not path.is_file():
        _err(f"no such file: {args.module}")
        return 2
    bindings = _bindings(args)
    if bindings is None:
        return 2
    try:
        folder = build_package(path, args.arch, Path(args.output), bindings, lambda m: print(m, file=sys.stderr))
    except CheckError as e:
        print(str(e), file=sys.stderr)
        return 1
    except (ValueError, LaunchError) as e:
        _err(str(e))
        return 2
    except SyntaxError as e:
        _err(f"{path}:{e.lineno}:{e.offset}: invalid syntax: {e.msg}")
        return 1
    print(f"anodize build: wrote {folder}")
    return 0


def describe_compiled(name: str, compiled: Any) -> str:
    """`anodize compile -v`: what was built, how (compiled, or loaded from the cache), and with which ptxas."""
    how = "loaded from cache" if compiled.from_cache else f"compiled in {compiled.compile_seconds * 1e3:.1f} ms"
    checks = f"bounds checks left={compiled.bounds_checks}"
    if compiled.arch == "cpu":
        return f"{name}: cpu (llvmlite host JIT), {checks}, {how}"
    describe_ptxas = _runtime().describe_ptxas
    r = compiled.resources
    if compiled.cubin and r.registers is not None:
        usage = f"registers={r.registers}, spills={r.spill_stores}/{r.spill_loads}"
    else:
        usage = "registers and spills unknown (no cubin)"
    text = f"{name}: {compiled.arch}, {usage}, {checks}, {how}\n  ptxas: {describe_ptxas()}"
    return text + "".join(f"\n  {line}" for line in compiled.matmuls)


def cmd_run(args: argparse.Namespace) -> int:
    rt = _runtime()
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
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)  # `sys.exit("message")`: printed, status 1, as the interpreter does
            return code
    except BaseException as e:  # the program's own error: its frames only, as `python FILE` shows them
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != str(path):  # this command's and runpy's
            tb = tb.tb_next
        if tb is not None:
            e.__traceback__ = tb  # (what the interpreter's hook prints)
        sys.excepthook(type(e), e, e.__traceback__)  # (anodize's own errors: the user's frames only)
        return 130 if isinstance(e, KeyboardInterrupt) else 1
    used = rt.devices_used()
    if used:
        print(f"anodize: {path.name} ran on {', '.join(d.describe() for d in used)}", file=sys.stderr)
    else:
        print(f"anodize: {path.name} made no buffer and launched no kernel", file=sys.stderr)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    info = _runtime().doctor_info()
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
    if args.action == "clear":
        if not diskcache.info()["tagged"]:
            print(f"no anodize cache at {diskcache.cache_dir()} (no {diskcache.TAG}): nothing removed")
            return 0
        n, t = diskcache.clear()
        print(f"removed {n} cache entr{'y' if n == 1 else 'ies'} and {t} unfinished write{'' if t == 1 else 's'} "
              f"from {diskcache.cache_dir()}")
        return 0
    info = diskcache.info()
    print(f"directory  {info['directory']}")
    print(f"enabled    {info['enabled']}")
    print(f"entries    {info['entries']}")
    print(f"unfinished {info['unfinished']}")
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
    b = sub.add_parser("build", help="compile a module's kernels ahead of time into an importable package")
    b.add_argument("module", metavar="MODULE.py")
    b.add_argument("--arch", default="sm_80,sm_90", help="architectures, comma-separated (default: sm_80,sm_90)")
    b.add_argument("-o", "--output", default="build", help="the folder the package `<module>_kernels/` goes in")
    b.add_argument("--specialize", action="append", default=[], metavar="T=f32",
                   help="the specialisation of the module's generic kernels to build (repeatable)")
    b.add_argument("--const", action="append", default=[], metavar="N=64",
                   help="an `az.Constant` parameter and its value (repeatable)")
    r = sub.add_parser("run", help="run a script and say which device it used")
    r.add_argument("file")
    r.add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("doctor", help="report GPU, driver, toolchain and cache")
    ca = sub.add_parser("cache", help="show or clear the persistent compile cache")
    ca.add_argument("action", choices=["info", "clear"])
    n = sub.add_parser("new", help="create a starter kernel file")
    n.add_argument("name")
    add_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The `anodize` command; `argv` None: the program's own arguments (and the process ends
    after it: what it built is frozen, so the interpreter's exit does not walk it again)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if argv is None and args[:1] == ["check"]:
        # off for good: the checked modules' models are millions of objects, and the first pass
        # after a pause (it scans all of them) costs ~1 s a 50,000-line module; checker/cli.py
        # collects between modules itself
        gc.disable()
        # the last module's analysis is kept, not freed object by object (0.5% of a kernel-dense
        # module's check), and the process ends here, without the interpreter's teardown (which
        # would free it, and the module front's cache, all the same)
        kept: list[object] = []
        code = cmd_check(args[1:], kept)
        _end(code)
    code = _main(args)
    if argv is None:
        gc.freeze()  # (a checked module's model is millions of objects: 0.7 s of collector passes at exit)
    return code


def _end(code: int) -> NoReturn:
    """End the process now with `code`, its output flushed (no teardown: `main`)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, a closed stream: what the teardown would say
            code = code or 120
    os._exit(code)


def _main(argv: list[str]) -> int:
    if argv and argv[0] == "check":
        return cmd_check(argv[1:])
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.version:
        print(f"anodize {anodize.__version__}")
        return 0
    handlers = {"build": cmd_build, "cache": cmd_cache, "compile": cmd_compile, "run": cmd_run, "doctor": cmd_doctor, "new": cmd_new,
                "tune": cmd_tune}
    if args.cmd not in handlers:
        parser.print_help()
        return 2
    return handlers[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
