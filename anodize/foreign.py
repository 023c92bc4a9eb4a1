"""Foreign kernels: existing CUDA C++, PTX or cubins launched beside anodize kernels.

    k = az.foreign.cuda(SOURCE, "vecadd", {"a": Slice[f32], "b": Slice[f32], "c": DisjointSlice[f32], "n": i32})
    k = az.launch_contract(domain=1, block=256, requires=lambda a, b, c, n: len(a) >= n and len(b) >= n and len(c) >= n)(k)
    k[az.LaunchConfig.for_num_elems(n, block=256)](a, b, c, np.int32(n))

`signature` names each parameter's role and type as a kernel's annotations do.  The ABI is
the C one the kernel was written for: a slice parameter passes as one device pointer (a
`const float*` for `Slice[f32]`, a `float*` for `DisjointSlice[f32]`), a scalar as its
value; no lengths and no hidden arguments.  What the host checks for a launch through
`k[config]` is what it checks for an anodize kernel: each argument's kind, dtype and device,
that no output aliases another argument, the contract's `requires`, rank, block and unused
dimensions, the device's limits.  What it cannot check, and trusts, is the kernel's body:
that it reads only within the lengths `requires` relates, writes only its outputs, each
element of a `DisjointSlice` from one thread, and that `signature` matches the kernel's real
parameter list.  Without a contract the kernel launches only through
`k.unsafe_launch(config, *args)` (the argument checks still apply); without a signature
(`signature=None`), only through `unsafe_launch` with raw arguments (Buffers pass as their
pointers, NumPy scalars as their values), nothing checked.  Foreign kernels run on CUDA GPUs;
the CPU backend has no code for them (a LaunchError says so).  docs/deploy.md has the details.

A foreign *device function* is called from an anodize kernel:

    sigmoid = az.foreign.device_function(PTX, "fast_sigmoid", {"x": f32}, returns=f32)
    ...
        c[i] = sigmoid(a[i])         # in a kernel: typed against the declaration

The front end reads the declaration from the module's source (language/foreign_decl.py: the
name and signature are literals; scalars in, a scalar out), the call lowers to a PTX `call` of
an `.extern .func`, and the loader links the function's PTX with the kernel's (cuda.core's
`Linker`: nvJitLink, else the driver's cuLink).  The function may also be LTO-IR (bytes or a
`.ltoir` file: nvcc / NVRTC `-dlto`) or CUDA C++ (`kind="cuda"`, compiled to LTO-IR by NVRTC per
GPU), which nvJitLink links (runtime/foreign_link.py).  At each compile the code is checked
against the declaration (the symbol is defined, its parameters and result have the declared
widths; LTO-IR is not for a newer GPU): a refusal is `az-foreign-link` at the declaration.
Trusted: that the parameters' types (not only their widths) are the declared ones, and that it
touches no memory (it gets no pointers: its result is a value of its arguments, so no race
or bounds rule can be broken through it).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import os
import re
import sys
import textwrap
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from anodize.codegen.artifact import CompiledKernel
from anodize.kernel import Kernel
from anodize.language import contract_schema, foreign_decl, messages
from anodize.language.contract import (
    Contract,
    RequiresSyntaxError,
    parse_requires,
    parse_shared_mem,
)
from anodize.language.diagnostics import CheckError, Span
from anodize.language.errors import ArgumentError, LaunchError
from anodize.language.ir import ParamSpec
from anodize.language.vocab import SCALARS, SLICE_KINDS
from anodize.runtime import device as devmod
from anodize.runtime import foreign_link
from anodize.runtime.buffer import Buffer
from anodize.runtime.compile import LoadedKernel, default_arch
from anodize.runtime.config import LaunchConfig
from anodize.runtime.nvrtc import NvrtcFailure, compile_cuda, compile_ltoir

if TYPE_CHECKING:
    from anodize.codegen.artifact import CompiledKernel
    from anodize.language.contract import Contract
    from anodize.language.ir import ParamSpec
    from anodize.runtime.compile import LoadedKernel
    from anodize.runtime.config import LaunchConfig
    from anodize.runtime.device import Device

__all__ = ["ForeignKernel", "ForeignFunction", "cuda", "ptx", "cubin", "device_function"]

R = TypeVar("R")


def _stub(*args: Any, **kwargs: Any) -> None:
    raise TypeError("a foreign kernel has no Python body")


class ForeignKernel(Kernel[Any]):
    """A kernel from PTX, a cubin or CUDA C++ (`az.foreign.ptx/cubin/cuda`)."""

    def __init__(self, name: str, signature: Mapping[str, Any] | None, code: Callable[[str], tuple[str, bytes]], what: str):
        super().__init__(_stub, None, spec=None)
        self.__name__ = self.__qualname__ = name
        self.__module__ = "anodize.foreign"
        self.what = what  # "PTX", "cubin", "CUDA C++"
        self.params: tuple[ParamSpec, ...] | None = None if signature is None else _params(name, signature)
        self._code = code  # arch -> (entry symbol, PTX text or cubin bytes)

    @property
    def contract(self) -> Contract | None:
        if not self._contract_parsed:
            self._contract = None if self.contract_spec is None else _contract(self.__name__, self.contract_spec, self.params or ())
            self._contract_parsed = True
        return self._contract

    @property
    def generic(self) -> Any:
        return None

    @property
    def signature(self) -> inspect.Signature:
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        return inspect.Signature([inspect.Parameter(p.name, kind) for p in self.params or ()])

    def __getitem__(self, config: LaunchConfig[Any]) -> Any:
        if self.params is None:
            raise LaunchError(
                f"foreign kernel `{self.__name__}` has no declared signature, so its launches cannot be checked",
                help=f"give `signature={{...}}` (each parameter's role and type) and a launch contract, or launch it "
                f"with `{self.__name__}.unsafe_launch(config, *args)`",
            )
        return super().__getitem__(config)

    def unsafe_launch(self, config: LaunchConfig[Any], *args: Any, **kwargs: Any) -> None:
        if self.params is not None:
            super().unsafe_launch(config, *args, **kwargs)
            return
        _raw_launch(self, config, args)

    def compile(self, arch: str | None = None, **_options: Any) -> CompiledKernel:
        """The kernel's code for `arch` (default: the current GPU's): a CompiledKernel whose ABI
        is the foreign one (`abi="foreign"`)."""
        arch = arch or default_arch()
        key = ("foreign", arch)
        hit = self.store.compiled.get(key)
        if hit is None:
            entry, code = self._code(arch)
            is_cubin = code.startswith(b"\x7fELF")
            hit = self.store.compiled[key] = CompiledKernel(
                name=self.__name__, entry=entry, params=self.params or (), contract=self.contract,
                domain=self.contract.domain if self.contract is not None else 1, arch=arch, llvm_ir="",
                ptx="" if is_cubin else code.decode(), cubin=code if is_cubin else None, abi="foreign",
            )
        return hit

    def load_prebuilt(self, device: Device) -> LoadedKernel:
        """Loaded on `device` (runtime/compile.py `compile_for_device` asks this instead of compiling)."""
        key = ("loaded-foreign", id(device))
        hit = self.store.loaded.get(key)
        if hit is not None:
            return hit
        if device.kind != "cuda":
            raise LaunchError(
                f"foreign kernel `{self.__name__}` ({self.what}) runs on CUDA GPUs only, not on {device.describe()}",
                help="pass arrays on a GPU (`az.device(0)`); the CPU backend runs anodize kernels only",
            )
        compiled = self.compile(str(getattr(device, "arch", "")))
        loaded = LoadedKernel(compiled, device, device.load(compiled), device.faults.register(compiled))  # type: ignore[attr-defined]
        self.store.loaded[key] = loaded
        return loaded

    def __repr__(self) -> str:
        return f"<anodize foreign kernel {self.__name__} ({self.what})>"


# ---- the constructors ---------------------------------------------------------------------


def ptx(text_or_path: str | os.PathLike[str], name: str, signature: Mapping[str, Any] | None = None) -> ForeignKernel:
    """A kernel from PTX text or a .ptx file; `name` is its `.entry` symbol."""
    text = _read(text_or_path, "PTX") if _is_path(text_or_path) else str(text_or_path)
    if f".entry {name}" not in text:
        raise ArgumentError(f"the PTX has no `.entry {name}`", help="`name` is the kernel's entry symbol, as the PTX spells it (mangled for C++)")
    data = text.encode()
    return ForeignKernel(name, signature, lambda arch: (name, data), "PTX")


def cubin(path: str | os.PathLike[str], name: str, signature: Mapping[str, Any] | None = None) -> ForeignKernel:
    """A kernel from a cubin file (built for the GPU's architecture); `name` is its symbol."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(b"\x7fELF"):
        raise ArgumentError(f"{os.fspath(path)} is not a cubin (no ELF header)", help="pass a file `ptxas` or `nvcc -cubin` wrote")
    return ForeignKernel(name, signature, lambda arch: (name, data), "cubin")


def cuda(source: str, name: str, signature: Mapping[str, Any] | None = None, *, options: tuple[str, ...] = ()) -> ForeignKernel:
    """A kernel from CUDA C++ source, compiled by NVRTC (cuda-python) for each GPU it loads on,
    at the first launch there; `name` is the `__global__` function's name (C++ names are
    resolved by NVRTC, `extern "C"` is not needed)."""
    def code(arch: str) -> tuple[str, bytes]:
        return compile_cuda(source, name, arch, options)

    return ForeignKernel(name, signature, code, "CUDA C++")


class ForeignFunction(Generic[R]):
    """A foreign device function (`az.foreign.device_function`): called from a kernel only.

    `kind` says what its code is: "ptx" (text, in `ptx`), "ltoir" (bytes, in `ltoir`) or "cuda"
    (CUDA C++ source, in `source`, compiled to LTO-IR by NVRTC for each GPU); `path` and `line`
    are where it was declared (its link errors point there)."""

    def __init__(self, code: str | bytes, name: str, params: tuple[tuple[str, str], ...], ret: str, *, kind: str = "ptx",
                 options: tuple[str, ...] = (), path: str = "<unknown>", line: int = 1):
        self.kind = kind
        self.ptx = code if isinstance(code, str) and kind == "ptx" else ""
        self.ltoir = code if isinstance(code, bytes) else None
        self.source = code if isinstance(code, str) and kind == "cuda" else None
        self.options = options
        self.name = name
        self.params = params  # (name, scalar type name)
        self.ret = ret
        self.path, self.line = path, line

    def __call__(self, *args: Any) -> R:
        raise TypeError(f"the foreign device function `{self.name}` runs on the GPU: call it from a kernel")

    def __repr__(self) -> str:
        sig = ", ".join(f"{n}: {t}" for n, t in self.params)
        return f"<anodize foreign device function {self.name}({sig}) -> {self.ret} ({self.kind})>"

    def code_for(self, arch: str) -> str | bytes:
        """The code a kernel compiled for `arch` links (codegen/artifact.py `foreign_links`): PTX
        text or LTO-IR bytes, its definition of `name` checked against the declared signature
        (parameter and result widths); a located `az-foreign-link` CheckError when it does not
        link: no such symbol, another signature, LTO-IR for a newer GPU, no nvJitLink."""
        what = {"ptx": "PTX", "ltoir": "LTO-IR", "cuda": "CUDA C++"}[self.kind]
        try:
            if self.kind == "ptx":
                code: str | bytes = self.ptx
                found = foreign_link.func_signature(self.ptx, self.name)
            else:
                code = self.ltoir if self.ltoir is not None else compile_ltoir(str(self.source), arch, self.options)
                found = foreign_link.ltoir_signature(code, self.name, arch)
        except NvrtcFailure as e:
            if e.missing:
                raise self._error("foreign-link-library", help="foreign-link-install", name=self.name, what=what, why=e.log) from None
            raise self._error("foreign-link-cuda", help="foreign-link-fix-source", name=self.name, arch=arch, log=e.log) from None
        except foreign_link.LinkFailure as e:
            raise self._failure(e, what, arch) from None
        if found is None:
            raise self._error("foreign-link-symbol", help="foreign-link-name", name=self.name, what=what, symbol=self.name)
        want = (tuple(_WIDTH[t] for _, t in self.params), _WIDTH[self.ret])
        if found != want:
            def show(widths: tuple[int, ...]) -> str:
                return ", ".join("?" if w < 0 else str(w) for w in widths)
            raise self._error("foreign-link-signature", help="foreign-link-widths", what=what, symbol=self.name, declared=show(want[0]),
                              dret=show((want[1],)), actual=show(found[0]), aret="void" if found[1] is None else show((found[1],)))
        return code

    def _failure(self, e: foreign_link.LinkFailure, what: str, arch: str) -> CheckError:
        """The located diagnostic of nvJitLink's refusal `e` (its `reason`)."""
        if e.reason == "library":
            return self._error("foreign-link-library", help="foreign-link-install", name=self.name, what=what, why=e.log)
        if e.reason == "symbol":
            return self._error("foreign-link-symbol", help="foreign-link-name", name=self.name, what=what, symbol=self.name)
        if e.reason == "arch":
            return self._error("foreign-link-arch", help="foreign-link-older-arch", name=self.name, arch=arch, log=e.log)
        return self._error("foreign-link-input", help="foreign-link-kinds", name=self.name, what=what, log=e.log)

    def _error(self, key: str, help: str, **values: Any) -> CheckError:
        span = Span.point(self.path, self.line, 0)
        return CheckError([messages.foreign_link(span, key, help=help, **values)])


_WIDTH = {"i32": 32, "u32": 32, "f32": 32, "i64": 64, "u64": 64, "f64": 64}
_LTOIR_SUFFIXES = (".ltoir", ".lto", ".nvvm")
_CUDA_SUFFIXES = (".cu", ".cuh")


def device_function(code: str | bytes | os.PathLike[str], name: str, signature: Mapping[str, Any], returns: type[R], *,
                    kind: str | None = None, options: tuple[str, ...] = ()) -> ForeignFunction[R]:
    """A device function called from kernels with scalar arguments and a scalar result; `name`
    is its symbol (`extern "C"` in CUDA C++, else the mangled name).  `code` is PTX text, LTO-IR
    bytes (nvcc or NVRTC with `-dlto`), CUDA C++ source with `kind="cuda"` (compiled to LTO-IR
    by NVRTC for each GPU, with `options`), or a file: `.ptx`, `.ltoir`/`.lto`/`.nvvm`, `.cu`.
    LTO-IR and CUDA C++ are linked with the kernel by nvJitLink (`pip install 'anodize[ltoir]'`).
    Bind it to a module-level name with literal `name` and `signature`: kernels are typed from
    the source."""
    caller = sys._getframe(1)  # the declaration's line: its link errors point there
    kind, data = _function_code(code, kind)
    if kind == "ptx" and not re.search(rf"\.func\s*(\([^)]*\))?\s*{re.escape(name)}\s*\(", str(data)):
        raise ArgumentError(f"the PTX has no `.func {name}`", help="`name` is the device function's symbol, as the PTX spells it (`extern \"C\"` in CUDA C++)")
    if kind == "ltoir" and not (isinstance(data, bytes) and data.startswith(foreign_link.LTOIR_MAGIC)):
        raise ArgumentError(f"the code given for `{name}` is not LTO-IR (no LTO-IR header)",
                            help="pass the bytes nvcc or NVRTC wrote with `-dlto` (NVRTC: `nvrtcGetLTOIR`), PTX text, or CUDA C++ with `kind=\"cuda\"`")
    params = tuple((pname, _scalar_name(name, f"parameter `{pname}`", ann)) for pname, ann in signature.items())
    return ForeignFunction(data, name, params, _scalar_name(name, "the result", returns), kind=kind, options=tuple(options),
                           path=caller.f_code.co_filename, line=caller.f_lineno)


def _function_code(code: str | bytes | os.PathLike[str], kind: str | None) -> tuple[str, str | bytes]:
    """(kind, code) of a device function's `code` argument: a file read by its suffix (or `kind`)."""
    if kind not in (None, "ptx", "ltoir", "cuda"):
        raise ArgumentError(f"`kind={kind!r}` is not a kind of device code", help="write `kind=\"ptx\"`, `\"ltoir\"` or `\"cuda\"` (or leave it out)")
    if isinstance(code, (bytes, bytearray)):
        return kind or "ltoir", bytes(code)
    suffixes = (".ptx", *_LTOIR_SUFFIXES, *_CUDA_SUFFIXES)
    if isinstance(code, os.PathLike) or ("\n" not in code and code.endswith(suffixes) and os.path.isfile(code)):
        path = os.fspath(code)
        kind = kind or ("ltoir" if path.endswith(_LTOIR_SUFFIXES) else "cuda" if path.endswith(_CUDA_SUFFIXES) else "ptx")
        if kind == "ltoir":
            with open(path, "rb") as f:
                return kind, f.read()
        return kind, _read(path, "PTX")
    return kind or "ptx", str(code)


def _scalar_name(fn: str, what: str, ann: Any) -> str:
    scalar = getattr(ann, "__name__", "")
    if scalar not in foreign_decl.SCALARS:  # the front end's list (it types the calls from the source)
        raise ArgumentError(f"foreign device function `{fn}`, {what}: `{ann!r}` is not a scalar type",
                            help="a foreign device function takes and returns `i32`, `u32`, `i64`, `u64`, `f32` or `f64`")
    return str(scalar)


# ---- the declared signature and contract ---------------------------------------------------


def _params(kernel: str, signature: Mapping[str, Any]) -> tuple[ParamSpec, ...]:
    out: list[ParamSpec] = []
    for pname, ann in signature.items():
        origin = typing.get_origin(ann)
        if origin is not None and getattr(origin, "__name__", "") in SLICE_KINDS:
            (elem,) = typing.get_args(ann)
            scalar = SCALARS.get(getattr(elem, "__name__", ""))
            kind = SLICE_KINDS[origin.__name__]
            if scalar is not None:
                out.append(ParamSpec(pname, kind, scalar))
                continue
        elif getattr(ann, "__name__", "") in SCALARS:
            out.append(ParamSpec(pname, None, SCALARS[ann.__name__]))
            continue
        raise ArgumentError(
            f"foreign kernel `{kernel}`, parameter `{pname}`: `{ann!r}` is not a slice or scalar type",
            help="write each parameter as a kernel annotates it: `Slice[f32]`, `DisjointSlice[f32]`, `i32`, ...",
        )
    return tuple(out)


def _lambda_node(fn: Callable[..., Any]) -> tuple[ast.Lambda, str]:
    """The `ast.Lambda` of a live lambda: its module's source parsed, the lambda on its first line
    whose parameters match (a lambda typed in a REPL: the lines `inspect` finds)."""
    code = fn.__code__
    names = code.co_varnames[: code.co_argcount]
    texts: list[str] = []
    path = inspect.getsourcefile(fn)
    if path:
        texts.append("".join(linecache.getlines(path)))
    try:
        texts.append(textwrap.dedent("".join(inspect.getsourcelines(fn)[0])))
    except (OSError, TypeError):
        pass
    for text in texts:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda) and tuple(a.arg for a in n.args.args) == names]
        at_line = [n for n in found if n.lineno == code.co_firstlineno]
        if len(at_line) == 1 or (len(found) == 1 and text is not texts[0]):
            return (at_line or found)[0], text
    raise SyntaxError("no lambda found")


def _contract(kernel: str, spec: Any, params: tuple[ParamSpec, ...]) -> Contract:
    """The Contract of a `@launch_contract(...)` applied to a foreign kernel, field by field of
    the contract's schema (language/contract_schema.py `FIELDS`, each by its `live` reading):
    the `requires` and `shared_mem` lambdas read from their source with the language's own
    parser.  A field with no live reading (it needs the kernel's source) is refused."""
    def fail(what: str) -> ArgumentError:
        return ArgumentError(f"foreign kernel `{kernel}`: {what}", help="docs/language.md, Launch contracts, has the forms `requires` takes")

    names = {p.name: p for p in params}
    parsers: dict[str, Callable[..., Any]] = {"requires": parse_requires, "shared_mem": parse_shared_mem}
    values: dict[str, Any] = {}
    for f in contract_schema.FIELDS:
        raw = spec.args.get(f.name)
        if raw is None:
            values[f.name] = None
            continue
        if f.live == "domain":
            if raw not in (1, 2, 3):
                raise fail(f"`domain={raw!r}` must be 1, 2 or 3")
            values[f.name] = int(raw)
        elif f.live == "block":
            block = (raw,) if isinstance(raw, int) else raw
            if not (isinstance(block, tuple) and all(isinstance(b, int) and b > 0 for b in block)):
                raise fail(f"`block={raw!r}` must be a positive int or a tuple of them")
            values[f.name] = block
        elif f.live == "pair":
            values[f.name] = tuple(raw)
        elif f.live == "bool":
            if not isinstance(raw, bool):
                raise fail(f"`{f.name}={raw!r}` must be True or False")
            values[f.name] = raw
        elif f.live == "lambda":
            try:
                lam, text = _lambda_node(raw)
                values[f.name] = parsed = parsers[f.name](lam, text)
            except (OSError, TypeError, SyntaxError, RequiresSyntaxError):
                raise fail(f"its `{f.name}` cannot be read: write it as a `lambda` of the kernel's parameters, in a source file") from None
            if f.name == "requires":
                for n in parsed.params:
                    if n not in names:
                        raise fail(f"`requires` names `{n}`, which is not a parameter (the signature has {', '.join(names) or 'none'})")
        else:
            raise fail(f"a foreign kernel's contract takes no `{f.name}`: it needs the kernel's source")
    if values["domain"] is None:
        raise fail("`domain=None` must be 1, 2 or 3")
    return Contract(**values)


# ---- raw launches (no signature) ------------------------------------------------------------


def _raw_launch(k: ForeignKernel, config: LaunchConfig[Any], args: tuple[Any, ...]) -> None:
    if not isinstance(config, LaunchConfig):
        raise LaunchError(f"foreign kernel `{k.__name__}` must be launched with an az.LaunchConfig, got {config!r}")
    dev = next((a.device for a in args if isinstance(a, Buffer)), None) or devmod.device()
    loaded = k.load_prebuilt(dev)
    flat = tuple(a.ptr if isinstance(a, Buffer) else a for a in args)
    handle_cfg = dev.launch_config(config.grid, config.block, config.shared_mem)  # type: ignore[attr-defined]
    devmod.mark_used(dev)
    dev.faults.dirty = True
    dev.launch(loaded.handle, handle_cfg, flat)  # type: ignore[attr-defined]


def _is_path(x: object) -> bool:
    if isinstance(x, os.PathLike):
        return True
    return isinstance(x, str) and "\n" not in x and x.endswith(".ptx") and os.path.isfile(x)


def _read(path: str | os.PathLike[str], what: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()
