"""Persisting a GPU `CompiledKernel` in the disk cache (runtime/diskcache.py) and back.

The key covers the text of every source file the kernel can reach (its
module: helpers and constant tables live there), by content, not by path: a
byte-identical copy of the module elsewhere hits the same entry, and a hit's
fault sites and source path are rewritten to name the loading kernel's file.
It also covers the target and options, the anodize, llvmlite, ptxas and
driver versions (llvmlite's read from its installed metadata, so a warm
cache loads with llvmlite not importable), and a
digest of the compiler's own sources (`compiler_digest`: the language, the
checker, the codegen and the runtime modules that shape the artifact), so an
edited or reinstalled compiler never loads a binary an older one built.  An
entry is only ever written after the checker and codegen succeeded, so a hit
is the same artifact the full path would build, and loading it skips both.
"""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import os
import re
import sys
from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from anodize.codegen import toolchain
from anodize.codegen.artifact import CompiledKernel, FaultSite, ParamSpec, Resources, foreign_links
from anodize.language import VERSION
from anodize.language.contract_schema import (
    codegen_view,
    decode_contract,
    encode_contract,
)
from anodize.language.sources import module_source, spec_repr
from anodize.language.vocab import SCALARS, SLICE_KINDS
from anodize.runtime import diskcache, lazy

if TYPE_CHECKING:
    from anodize.runtime.kernel_store import RuntimeKernel as Kernel


def dependency_files(kernel: Kernel) -> list[str]:
    """The source file of the kernel's module: its helpers and constant tables live there
    too (the front end reads a kernel from its own module only)."""
    path, _ = module_source(kernel.fn)
    return [path] if path else []


# The compiler's sources that decide an artifact (or whether there is one): every module of
# these packages, and these modules of the runtime (the compile path, the specialisation of
# generic kernels, the entry's format).  `anodize.checker.mypy` is the editor plugin: not in it.
COMPILER_PACKAGES = ("anodize.language", "anodize.checker", "anodize.checker.rules", "anodize.codegen")
COMPILER_TREES = ("anodize.codegen",)  # with their sub-packages (codegen/llvm/, codegen/gpu/, ...)
COMPILER_RUNTIME_MODULES = ("compile.py", "generic.py", "artifact_store.py", "diskcache.py")


def compiler_files() -> list[tuple[str, str]]:
    """(name, path) of every source in the compiler digest, in a fixed order; the name
    (`anodize.codegen/gpu/ptx.py`) does not depend on where anodize is installed."""
    here = os.path.dirname(os.path.abspath(__file__))
    out: list[tuple[str, str]] = []
    for pkg in COMPILER_PACKAGES:
        if pkg == "anodize.checker.rules":  # found through its parent's folder: finding its spec would import the checker
            folders = [os.path.join(d, "rules") for d in _folders("anodize.checker")]
        else:
            folders = _folders(pkg)
        for folder in folders:
            names = _sources(folder, recursive=pkg in COMPILER_TREES)
            out += [(f"{pkg}/{n}", os.path.join(folder, n)) for n in names]
    out += [(f"anodize.runtime/{n}", os.path.join(here, n)) for n in COMPILER_RUNTIME_MODULES]
    return out


def _sources(folder: str, *, recursive: bool) -> list[str]:
    """The .py files of a package's folder (with its sub-packages' when `recursive`), as sorted
    '/'-separated paths relative to it."""
    out: list[str] = []
    for here, dirs, files in os.walk(folder) if recursive else [next(os.walk(folder), (folder, [], []))]:
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = os.path.relpath(here, folder).replace(os.sep, "/")
        out += [n if rel == "." else f"{rel}/{n}" for n in files if n.endswith(".py")]
    return sorted(out)


def _folders(pkg: str) -> list[str]:
    """A package's folders, without importing it (its parent is imported: `anodize`)."""
    spec = importlib.util.find_spec(pkg)
    return list(spec.submodule_search_locations or []) if spec is not None else []


def digest_files(files: list[tuple[str, str]]) -> str:
    """SHA-256 over each file's name, length and bytes (a missing file counts as missing)."""
    h = hashlib.sha256()
    for name, path in files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            h.update(f"{name}\0missing\0".encode())
            continue
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


@lru_cache(maxsize=1)
def compiler_digest() -> str:
    """The digest of the compiler's own sources: computed once per process, on the first
    disk-cache key (about 1 MB of Python read and hashed: a few milliseconds), never at import."""
    return digest_files(compiler_files())


_LLVMLITE_DIST = re.compile(r"^llvmlite-([^-]+)\.(?:dist|egg)-info$", re.IGNORECASE)


def _versions() -> dict[str, str]:
    """anodize's version, the compiler digest and llvmlite's version (every entry's key; the
    digest is computed once per process)."""
    return {"anodize": VERSION, "compiler": compiler_digest(), "llvmlite": llvmlite_version()}


@lru_cache(maxsize=1)
def llvmlite_version() -> str:
    """llvmlite's version from the name of its distribution's metadata folder
    (`llvmlite-0.50.0.dist-info`) beside the package the import path finds first, without
    importing llvmlite (a cached load must not need it: an environment whose llvmlite does not
    import still loads what the compiler built there) nor importlib.metadata (100 ms); else
    the package's own version, or "none" when neither is there."""
    for folder in sys.path:
        if os.path.isdir(os.path.join(folder or ".", "llvmlite")):
            for name in os.listdir(folder or "."):
                m = _LLVMLITE_DIST.match(name)
                if m:
                    return m.group(1)
            break
    try:
        return str(lazy.llvmlite().__version__)
    except ImportError:
        return "none"


@lru_cache(maxsize=1)
def _toolchain() -> dict[str, str]:
    out = dict(_versions())
    exe = toolchain.find_ptxas()
    out["ptxas"] = _file_id(exe) if exe else "none"
    out["driver"] = toolchain.driver_version()  # "none" without a driver: the key says so
    return out


def _file_id(path: str) -> str:
    """A tool or library file by its path, size and modification time (a reinstall changes it)."""
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:missing"
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _switches() -> dict[str, str]:
    """The libdevice a math kernel would link and every environment switch that changes the code
    a compile builds (read per compile: a switch set mid-process is a new key)."""
    lib = toolchain.find_libdevice()
    out = {"libdevice": _file_id(lib) if lib else "none"}
    out.update({name: os.environ[name] for name in toolchain.CODE_SWITCHES if name in os.environ})
    return out


def _kernel_inputs(kernel: Kernel) -> dict[str, Any]:
    """The kernel's part of a key: its sources (by content: where the file lies is no part of
    the artifact), name, first line and specialisation."""
    h = hashlib.sha256()
    for path in dependency_files(kernel):
        text = "".join(linecache.getlines(path)).encode("utf-8", "surrogatepass")
        h.update(b"%d\0" % len(text) + text)
    return {"sources": h.hexdigest(), "kernel": kernel.__qualname__,
            "line": getattr(kernel.fn.__code__, "co_firstlineno", 0), "spec": spec_repr(kernel)}


def cache_inputs(kernel: Kernel, arch: str, options: dict[str, object]) -> dict[str, Any]:
    """Everything that decides the artifact of `kernel` for `arch` and `options`: the entry's
    inputs, stored in it and hashed into its name (`diskcache.make_key`)."""
    return {"kind": "gpu", **_kernel_inputs(kernel), "arch": arch, **options, **_toolchain(), "switches": _switches()}


def cpu_cache_inputs(kernel: Kernel, bounds_checks: bool) -> dict[str, Any]:
    """The inputs of `kernel`'s CPU entry: its sources, the compiler, the code switches, and the
    host its machine code runs on (triple, CPU name and features, `ANODIZE_CPU_ISA`, LLVM:
    codegen/cpu/machine_code.py `host_id`), so another CPU never loads this one's object."""
    host = lazy.codegen_cpu().host_id(lazy.codegen_cpu().cpu_isa())
    switches = {name: os.environ[name] for name in toolchain.CODE_SWITCHES if name in os.environ}
    return {"kind": "cpu", **_kernel_inputs(kernel), "arch": "cpu", "bounds_checks": bool(bounds_checks), "host": host,
            **_versions(), "switches": switches}


def cache_key(kernel: Kernel, arch: str, options: dict[str, object]) -> str:
    return diskcache.make_key(cache_inputs(kernel, arch, options))


def _meta(inputs: dict[str, Any], ck: CompiledKernel) -> dict[str, Any]:
    """meta.json of `ck`'s entry (the part a GPU and a CPU entry share)."""
    return {
        "inputs": inputs,
        "name": ck.name,
        "entry": ck.entry,
        "params": [
            [p.name, p.slice_kind.name if p.slice_kind else None, p.scalar.name] for p in ck.params
        ],
        "domain": ck.domain,
        "arch": ck.arch,
        "fault_sites": [[s.path, s.line, s.col, s.kind, s.param, s.message] for s in ck.fault_sites],
        "bounds_checks": ck.bounds_checks,
        "uses_barrier": ck.uses_barrier,
        "static_shared_bytes": ck.static_shared_bytes,
        "coarsen": ck.coarsen,
        "grid_counter": ck.grid_counter,
        "dynamic_shared_bytes": ck.dynamic_shared_bytes,
        "matmuls": list(ck.matmuls),
        "resources": {
            "registers": ck.resources.registers,
            "spill_stores": ck.resources.spill_stores,
            "spill_loads": ck.resources.spill_loads,
            "stack_frame": ck.resources.stack_frame,
            "shared_bytes": ck.resources.shared_bytes,
        },
        "compile_seconds": ck.compile_seconds,
        "source_path": ck.source_path,
        "source_line": ck.source_line,
        "contract": encode_contract(ck.contract),
        "foreign": [list(pair) for pair in ck.foreign],
    }


def save(inputs: dict[str, Any], ck: CompiledKernel) -> None:
    """Write `ck` under the key of `inputs` (a failure to write is no entry, never an error)."""
    meta = _meta(inputs, ck)
    files = {"kernel.ptx": ck.ptx.encode("utf-8", "surrogatepass"), "kernel.ll": ck.llvm_ir.encode("utf-8", "surrogatepass")}
    if ck.cubin:
        files["kernel.cubin"] = ck.cubin
    diskcache.store(diskcache.make_key(inputs), meta, files)


def load(inputs: dict[str, Any], kernel: Kernel) -> CompiledKernel | None:
    """The artifact cached for `inputs`, or None.  The entry is confirmed, not trusted: its
    inputs, content and payload hashes (runtime/diskcache.py), the kernel's name, its entry
    symbol in the PTX, and its contract, which must equal the one parsed from the source
    (`kernel.contract`): the contract that guards a launch always comes from the source."""
    def gpu(meta: dict[str, Any], files: dict[str, bytes]) -> CompiledKernel:
        ptx = files["kernel.ptx"].decode()
        if f".entry {kernel.__name__}(" not in ptx:
            raise ValueError("the entry is another kernel's")
        return _compiled(meta, files, kernel, ptx=ptx, cubin=files.get("kernel.cubin"))

    return _confirmed(inputs, gpu)


# what a confirmation raises on an entry of the wrong shape: a miss, never an error
_MISS = (KeyError, TypeError, ValueError, IndexError, AttributeError, UnicodeDecodeError, RecursionError)


def _confirmed(inputs: dict[str, Any], build: Callable[[dict[str, Any], dict[str, bytes]], CompiledKernel]) -> CompiledKernel | None:
    """`build(meta, files)` of the entry cached for `inputs`, or None: none, or one that `build`
    refuses (it raises one of `_MISS`), which is removed."""
    key = diskcache.make_key(inputs)
    got = diskcache.load(key)
    if got is None:
        return None
    try:
        return build(*got)
    except _MISS:
        diskcache.evict(key)
        return None


def _compiled(meta: dict[str, Any], files: dict[str, bytes], kernel: Kernel, **target: Any) -> CompiledKernel:
    """The CompiledKernel of a confirmed entry's meta and files (`target`: the GPU's PTX and cubin,
    or the CPU's entry); a field of the wrong shape raises (the caller's miss)."""
    params = tuple(
        ParamSpec(str(name), SLICE_KINDS[kind] if kind else None, SCALARS[scalar])
        for name, kind, scalar in meta["params"]
    )
    if not meta["name"] == meta["entry"] == kernel.__name__:
        raise ValueError("the entry is another kernel's")
    contract = kernel.contract  # the contract a launch checks is always the source's
    if codegen_view(decode_contract(meta["contract"])) != codegen_view(contract):
        raise ValueError("the entry was compiled under another contract")
    foreign = tuple((str(b), str(s)) for b, s in meta.get("foreign", ()))
    stored, here = str(meta["source_path"]), module_source(kernel.fn)[0]
    sites = tuple(FaultSite(*s) for s in meta["fault_sites"])
    if here and here != stored:  # the entry of a byte-identical copy: its sites are this file's lines
        sites = tuple(replace(s, path=here) if s.path == stored else s for s in sites)
    return CompiledKernel(
        name=str(meta["name"]),
        entry=str(meta["entry"]),
        params=params,
        contract=contract,
        domain=int(meta["domain"]),
        arch=str(meta["arch"]),
        llvm_ir=files["kernel.ll"].decode(),
        fault_sites=sites,
        bounds_checks=int(meta["bounds_checks"]),
        uses_barrier=bool(meta["uses_barrier"]),
        static_shared_bytes=int(meta["static_shared_bytes"]),
        resources=Resources(**meta["resources"]),
        compile_seconds=0.0,
        from_cache=True,
        source_path=here or stored,
        source_line=int(meta["source_line"]),
        coarsen=int(meta.get("coarsen", 1)),
        grid_counter=bool(meta.get("grid_counter", False)),
        dynamic_shared_bytes=int(meta.get("dynamic_shared_bytes", 0)),
        matmuls=tuple(str(x) for x in meta.get("matmuls", ())),
        foreign=foreign,
        links=foreign_links(kernel.fn, foreign, str(meta["arch"])),  # the code the program holds now, never a stored copy
        **target,
    )


def save_cpu(inputs: dict[str, Any], ck: CompiledKernel) -> None:
    """Write a CPU entry: `ck`'s description, its recipe and the object file MCJIT built
    (nothing when the entry has no object: a failure to write is no entry, never an error)."""
    got = lazy.codegen_cpu().recipe_of(ck.cpu_entry)
    if got is None:
        return
    recipe, obj = got
    meta = dict(_meta(inputs, ck), cpu=recipe)
    diskcache.store(diskcache.make_key(inputs), meta, {"kernel.ll": ck.llvm_ir.encode("utf-8", "surrogatepass"), "kernel.o": obj})


def load_cpu(inputs: dict[str, Any], kernel: Kernel) -> CompiledKernel | None:
    """The CPU artifact cached for `inputs`, its object loaded into a fresh engine, or None.
    Confirmed as `load` confirms a GPU entry; the object must be an object file holding the
    recipe's entry symbol, and LLVM must load it (anything else is a miss, the entry removed)."""
    def cpu(meta: dict[str, Any], files: dict[str, bytes]) -> CompiledKernel:
        ck = _compiled(meta, files, kernel)
        recipe = meta["cpu"]
        if not isinstance(recipe, dict) or recipe.get("entry") != ck.entry:
            raise ValueError("the recipe is another kernel's")
        ck.cpu_entry = lazy.codegen_cpu().entry_from_object(recipe, ck.params, files["kernel.o"])
        return ck

    return _confirmed(inputs, cpu)
