"""Kernels compiled ahead of time (`anodize build`): the manifest format and the choice of
the artifact a device runs.

A built package (`OUT/<module>_kernels/`, written by anodize/build.py) holds, per kernel,
one cubin per architecture named at build time, the PTX of the newest one (the driver
compiles it for GPUs newer than every cubin), and `anodize_build.json`: the kernel's
parameters and their roles, its contract (the `requires` relations as a tree, with the
lambda's source text), its fault sites, and per target the entry symbol, the
coarsening and the shared memory the launch needs.  This module turns a manifest entry
back into the `CompiledKernel` the launch path takes; it imports neither llvmlite nor
the checker, nor the kernel's source (none of them needs to be installed or present).

No pickle: the manifest is data.  Each payload file's SHA-256 is recorded and compared
when the file is read, so a truncated or edited cubin is refused, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from anodize.codegen.artifact import CompiledKernel, Resources
from anodize.language.contract import Contract
from anodize.language.contract_schema import decode_contract, encode_contract
from anodize.language.errors import LaunchError
from anodize.language.params import FaultSite, ParamSpec
from anodize.language.vocab import SCALARS, SLICE_KINDS
from anodize.runtime.compile import LoadedKernel, default_arch  # noqa: F401  (what a built kernel loads with: anodize/built.py)

MANIFEST = "anodize_build.json"  # (checker/stale_artifacts.py reads it under the same name)
FORMAT = 1

__all__ = ["MANIFEST", "FORMAT", "params_json", "params_from_json", "target_json", "compiled_from_manifest", "pick_target", "sha256"]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def params_json(params: tuple[ParamSpec, ...]) -> list[list[Any]]:
    return [[p.name, p.slice_kind.name if p.slice_kind else None, p.scalar.name] for p in params]


def params_from_json(rows: list[list[Any]]) -> tuple[ParamSpec, ...]:
    return tuple(ParamSpec(str(n), SLICE_KINDS[k] if k else None, SCALARS[s]) for n, k, s in rows)


def contract_json(c: Contract | None) -> Any:
    return encode_contract(c)


def contract_from_json(d: Any) -> Contract | None:
    return decode_contract(d)


def target_json(ck: CompiledKernel, files: dict[str, str]) -> dict[str, Any]:
    """What a launch of `ck` needs besides its code (`files`: role -> file name in the package)."""
    return {
        "entry": ck.entry,
        "files": files,
        "fault_sites": [[s.path, s.line, s.col, s.kind, s.param, s.message] for s in ck.fault_sites],
        "coarsen": ck.coarsen,
        "grid_counter": ck.grid_counter,
        "dynamic_shared_bytes": ck.dynamic_shared_bytes,
        "static_shared_bytes": ck.static_shared_bytes,
        "uses_barrier": ck.uses_barrier,
        "bounds_checks": ck.bounds_checks,
        "registers": ck.resources.registers,
    }


def _arch_number(arch: str) -> int:
    """`sm_90` / `sm_90a` / `compute_90` -> 90."""
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    return int(digits) if digits else 0


def pick_target(name: str, targets: dict[str, Any], device_arch: str) -> tuple[str, str]:
    """(arch, "cubin" | "ptx") of the artifact a GPU of `device_arch` runs.

    A cubin runs on GPUs of its major version and the same or a later minor one (sm_80 on
    sm_86); the `a` targets (sm_90a) only on their own.  Otherwise the PTX of the newest
    target not newer than the device, which the driver compiles for it.  None fits: a
    LaunchError naming what was built."""
    dev = _arch_number(device_arch)
    best: tuple[int, str] | None = None
    for arch, t in targets.items():
        if "cubin" not in t["files"]:
            continue
        n = _arch_number(arch)
        same_only = arch.endswith("a")
        fits = n == dev if same_only else (n // 10 == dev // 10 and n <= dev)
        if fits and (best is None or n > best[0]):
            best = (n, arch)
    if best is not None:
        return best[1], "cubin"
    for arch, t in sorted(targets.items(), key=lambda kv: -_arch_number(kv[0])):
        if "ptx" in t["files"] and _arch_number(arch) <= dev and not arch.endswith("a"):
            return arch, "ptx"
    built = ", ".join(sorted(targets)) or "none"
    raise LaunchError(
        f"kernel `{name}` was built ahead of time for {built}, none of which runs on this GPU ({device_arch})",
        help=f"rebuild with `anodize build MODULE.py --arch {device_arch},...`",
    )


def read_payload(folder: str, fname: str, digest: str) -> bytes:
    """A payload file, verified against its recorded SHA-256 (LaunchError when it differs)."""
    path = os.path.join(folder, fname)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise LaunchError(f"built artifact {path} cannot be read: {e.strerror}", help="rebuild the package with `anodize build`") from None
    if sha256(data) != digest:
        raise LaunchError(
            f"built artifact {path} does not match the hash its manifest records (edited or truncated)",
            help="rebuild the package with `anodize build`; a built package is never patched by hand",
        )
    return data


def compiled_from_manifest(folder: str, manifest: dict[str, Any], kname: str, device_arch: str) -> CompiledKernel:
    """The `CompiledKernel` of kernel `kname` for a GPU of `device_arch`, from the package in `folder`."""
    k = manifest["kernels"][kname]
    arch, kind = pick_target(kname, k["targets"], device_arch)
    t = k["targets"][arch]
    fname = t["files"][kind]
    data = read_payload(folder, fname, manifest["hashes"][fname])
    return CompiledKernel(
        name=kname,
        entry=str(t["entry"]),
        params=params_from_json(k["params"]),
        contract=contract_from_json(k["contract"]),
        domain=int(k["domain"]),
        arch=arch,
        llvm_ir="",
        ptx=data.decode() if kind == "ptx" else "",
        cubin=data if kind == "cubin" else None,
        fault_sites=tuple(FaultSite(*s) for s in t["fault_sites"]),
        bounds_checks=int(t["bounds_checks"]),
        uses_barrier=bool(t["uses_barrier"]),
        static_shared_bytes=int(t["static_shared_bytes"]),
        resources=Resources(registers=t.get("registers")),
        from_cache=True,
        source_path=str(k["source"]["path"]),
        source_line=int(k["source"]["line"]),
        coarsen=int(t["coarsen"]),
        grid_counter=bool(t.get("grid_counter", False)),
        dynamic_shared_bytes=int(t["dynamic_shared_bytes"]),
    )


def read_manifest(folder: str) -> dict[str, Any]:
    path = os.path.join(folder, MANIFEST)
    with open(path, encoding="utf-8") as f:
        manifest: dict[str, Any] = json.load(f)
    if manifest.get("format") != FORMAT:
        raise LaunchError(
            f"{path} is format {manifest.get('format')!r}; this anodize reads format {FORMAT}",
            help="rebuild the package with this anodize's `anodize build`",
        )
    return manifest
