"""Persisting a GPU `CompiledKernel` in the disk cache (runtime/diskcache.py) and back.

The key covers every source file the kernel can reach (its module and the
modules of every `@az.func` helper or kernel reachable through globals), the
target and options, and the anodize, llvmlite, ptxas and driver versions.  An
entry is only ever written after the checker and codegen succeeded, so a hit
is the same artifact the full path would build, and loading it skips both.
"""

from __future__ import annotations

import hashlib
import inspect
import linecache
import os
import types
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from anodize.checker.model import SCALARS, SLICE_KINDS
from anodize.codegen.artifact import CompiledKernel, FaultSite, ParamSpec, Resources
from anodize.runtime import diskcache

if TYPE_CHECKING:
    from anodize.kernel import Kernel


def dependency_files(kernel: Kernel) -> list[str]:
    """Source files of the kernel's module and of every module a reachable helper lives in."""
    from anodize.kernel import Func, Kernel as K

    seen_fns: set[int] = set()
    files: list[str] = []
    todo: list[Any] = [kernel.fn]
    while todo:
        fn = todo.pop()
        if id(fn) in seen_fns:
            continue
        seen_fns.add(id(fn))
        try:
            path = inspect.getsourcefile(fn) or ""
        except TypeError:
            path = ""
        if path and path not in files:
            files.append(path)
        glb = getattr(fn, "__globals__", {})
        for v in list(glb.values()):
            if isinstance(v, (Func, K)):
                todo.append(v.fn)
            elif isinstance(v, types.ModuleType):
                for w in list(vars(v).values()):
                    if isinstance(w, (Func, K)):
                        todo.append(w.fn)
    return files


@lru_cache(maxsize=1)
def _toolchain() -> dict[str, str]:
    import llvmlite

    import anodize
    from anodize.codegen import ptx as _ptx

    out = {"anodize": anodize.__version__, "llvmlite": llvmlite.__version__}
    exe = _ptx.find_ptxas()
    if exe:
        st = os.stat(exe)
        out["ptxas"] = f"{exe}:{st.st_size}:{int(st.st_mtime)}"
    else:
        out["ptxas"] = "none"
    try:
        from cuda.bindings import driver

        err, ver = driver.cuDriverGetVersion()
        out["driver"] = str(ver)
    except Exception:  # no driver: the key says so
        out["driver"] = "none"
    return out


def cache_key(kernel: Kernel, arch: str, options: dict[str, object]) -> str:
    h = hashlib.sha256()
    for path in dependency_files(kernel):
        h.update(path.encode() + b"\0")
        h.update("".join(linecache.getlines(path)).encode())
    return diskcache.make_key(
        {"kind": "gpu", "sources": h.hexdigest(), "kernel": kernel.__qualname__, "arch": arch, **options, **_toolchain()}
    )


def save(key: str, ck: CompiledKernel) -> None:
    meta = {
        "name": ck.name,
        "entry": ck.entry,
        "params": [
            [p.name, p.slice_kind.name if p.slice_kind else None, p.scalar.name] for p in ck.params
        ],
        "domain": ck.domain,
        "arch": ck.arch,
        "fault_sites": [[s.path, s.line, s.col, s.kind, s.param] for s in ck.fault_sites],
        "bounds_checks": ck.bounds_checks,
        "uses_barrier": ck.uses_barrier,
        "static_shared_bytes": ck.static_shared_bytes,
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
    }
    files = {"kernel.ptx": ck.ptx.encode(), "kernel.ll": ck.llvm_ir.encode()}
    if ck.cubin:
        files["kernel.cubin"] = ck.cubin
    diskcache.store(key, meta, files)


def load(key: str, kernel: Kernel) -> CompiledKernel | None:
    got = diskcache.load(key)
    if got is None:
        return None
    meta, files = got
    try:
        params = tuple(
            ParamSpec(name, SLICE_KINDS[kind] if kind else None, SCALARS[scalar])
            for name, kind, scalar in meta["params"]
        )
        return CompiledKernel(
            name=meta["name"],
            entry=meta["entry"],
            params=params,
            contract=kernel.contract,
            domain=int(meta["domain"]),
            arch=meta["arch"],
            llvm_ir=files["kernel.ll"].decode(),
            ptx=files["kernel.ptx"].decode(),
            cubin=files.get("kernel.cubin"),
            fault_sites=tuple(FaultSite(*s) for s in meta["fault_sites"]),
            bounds_checks=int(meta["bounds_checks"]),
            uses_barrier=bool(meta["uses_barrier"]),
            static_shared_bytes=int(meta["static_shared_bytes"]),
            resources=Resources(**meta["resources"]),
            compile_seconds=0.0,
            source_path=meta["source_path"],
            source_line=int(meta["source_line"]),
        )
    except (KeyError, TypeError, ValueError, UnicodeDecodeError):
        diskcache.evict(key)
        return None
