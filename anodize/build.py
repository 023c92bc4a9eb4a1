"""`anodize build MODULE.py --arch sm_80,sm_90 -o OUT`: a module's kernels compiled ahead of time.

Writes the package `OUT/<module>_kernels/`:

    __init__.py          the loader: `import <module>_kernels as K; K.vecadd[cfg](a, b, c)`
    __init__.pyi         the kernels' parameter types, for mypy and editors
    py.typed
    anodize_build.json   the manifest (runtime/prebuilt.py): parameters, roles, contract,
                         fault sites, per target the entry and launch needs, each file's SHA-256,
                         and the SHA-256 of the source it was built from (`anodize check` reports
                         a package whose source changed since: az-stale-artifact)
    <kernel>.<arch>.cubin  one per architecture (ptxas)
    <kernel>.<arch>.ptx    the newest architecture's PTX, which the driver compiles for newer GPUs
                           (every architecture's when ptxas is missing)

The module is read, never run (as `anodize compile` does); every kernel passes the checker
before it is compiled.  Importing the package needs anodize's runtime, cuda-python and NumPy:
not llvmlite, not the checker, not the module's source.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from anodize.codegen import toolchain
from anodize.kernel import source_kernels
from anodize.language import VERSION
from anodize.language.front import kernel_of
from anodize.runtime.prebuilt import (
    FORMAT,
    MANIFEST,
    contract_json,
    params_json,
    sha256,
    target_json,
)

__all__ = ["build_package", "package_name"]


def package_name(module_path: Path) -> str:
    return f"{module_path.stem}_kernels"


def _arch_list(text: str) -> list[str]:
    archs = [a.strip() for a in text.split(",") if a.strip()]
    for a in archs:
        if not (a.startswith("sm_") and a[3:].rstrip("a").isdigit()):
            raise ValueError(f"`{a}` is not a GPU architecture (expected sm_XY, e.g. sm_80,sm_90)")
    if not archs:
        raise ValueError("--arch names no architecture (expected e.g. sm_80,sm_90)")
    return archs


def _arch_number(arch: str) -> int:
    return int(arch[3:].rstrip("a"))


def build_package(module_path: Path, arch_text: str, out: Path, bindings: dict[str, Any], log: Any) -> Path:
    """Compile every kernel of `module_path` for each architecture and write the package;
    returns its folder.  Raises CheckError (a rejected kernel), ValueError (usage)."""
    archs = _arch_list(arch_text)
    source = module_path.read_bytes()
    kernels = source_kernels(module_path)
    if not kernels:
        raise ValueError(f"{module_path} defines no @kernel")
    has_ptxas = toolchain.find_ptxas() is not None
    newest = max(archs, key=_arch_number)
    files: dict[str, bytes] = {}
    entries: dict[str, Any] = {}
    for qual, k in kernels.items():
        if k.generic is not None:
            wanted = [*k.generic.constraints, *k.generic.constants]
            mine = {n: v for n, v in bindings.items() if n in wanted}
            if len(mine) != len(wanted):
                need = " ".join(f"--{'const' if n in k.generic.constants else 'specialize'} {n}=..." for n in wanted if n not in mine)
                log(f"anodize build: skipped generic kernel `{qual}`: name its specialisation ({need})")
                continue
            k = k.specialize(**mine)
        targets: dict[str, Any] = {}
        first = None
        for arch in archs:
            ck = k.compile(arch=arch)
            if ck.foreign:  # its code is linked with the functions' PTX at load: not packaged yet
                log(f"anodize build: skipped `{qual}`: it calls foreign device functions "
                    f"({', '.join(s for _, s in ck.foreign)}), which a built package does not link yet")
                break
            first = first or ck
            names: dict[str, str] = {}
            if ck.cubin:
                names["cubin"] = f"{ck.name}.{ck.arch}.cubin"
                files[names["cubin"]] = ck.cubin
            if arch == newest or not ck.cubin:
                names["ptx"] = f"{ck.name}.{ck.arch}.ptx"
                files[names["ptx"]] = ck.ptx.encode()
            targets[ck.arch] = target_json(ck, names)
            log(f"anodize build: {qual} for {ck.arch}: {', '.join(sorted(names))}")
        if first is None:
            continue
        entries[first.name] = {
            "params": params_json(first.params),
            "contract": contract_json(first.contract),
            "domain": first.domain,
            "num_warps": _tile_warps(k),
            "spec": [list(x) for x in (k.spec or ())],
            "doc": k.__doc__,
            "source": {"path": str(module_path.resolve()), "line": first.source_line, "sha256": sha256(source)},
            "targets": targets,
        }
    if not entries:
        raise ValueError(f"{module_path}: no kernel was built")
    manifest = {
        "format": FORMAT,
        "anodize": VERSION,
        "module": module_path.stem,
        "archs": archs,
        "ptxas": has_ptxas,
        "kernels": entries,
        "hashes": {n: sha256(d) for n, d in files.items()},
    }
    name = package_name(module_path)
    texts = {
        MANIFEST: json.dumps(manifest, indent=1, sort_keys=True),
        "__init__.py": _loader_text(module_path.name, name, entries, archs),
        "__init__.pyi": _stub_text(entries),
        "py.typed": "",
    }
    return _write_atomically(out, name, files, texts)


def _tile_warps(k: Any) -> int | None:
    """A tile kernel's `num_warps` (its launches take `num_warps * 32` threads), None for SIMT: read
    from the typed model the compile just built (a kernel read from source is a plain `Kernel`)."""
    front, fdef = kernel_of(k.fn)
    ir = front.typed(fdef, k.spec or ()).ir
    return int(ir.tile_warps) if ir is not None and ir.tile_warps else None


def _write_atomically(out: Path, name: str, files: dict[str, bytes], texts: dict[str, str]) -> Path:
    """The package written into a temporary folder next to its place, then renamed over it."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out))
    for fname, data in files.items():
        (tmp / fname).write_bytes(data)
    for fname, text in texts.items():
        (tmp / fname).write_text(text, encoding="utf-8")
    tmp.chmod(0o755)
    final = out / name
    if final.exists():
        old = out / f".{name}-old-{os.getpid()}"
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)
    return final


def _loader_text(source_name: str, package: str, entries: dict[str, Any], archs: list[str]) -> str:
    names = sorted(entries)
    lines = [
        f'"""The kernels of {source_name}, built ahead of time by `anodize build` for {", ".join(archs)}.',
        "",
        "Generated: do not edit (each artifact's SHA-256 is checked when it is loaded).  Importing",
        "needs anodize's runtime, cuda-python and NumPy, never llvmlite or the kernels' source;",
        "launches keep every run-time check (contract, dtypes, aliasing, `requires`, faults).",
        '"""',
        "",
        "from anodize.built import load_package as _load_package",
        "",
        "_kernels = _load_package(__file__)",
    ]
    lines += [f"{n} = _kernels[{n!r}]" for n in names]
    lines.append(f"__all__ = {names!r}")
    return "\n".join(lines) + "\n"


def _stub_text(entries: dict[str, Any]) -> str:
    used: set[str] = set()
    decls: list[str] = []
    for name in sorted(entries):
        types = []
        for _pname, kind, scalar in entries[name]["params"]:
            used.add(scalar)
            if kind:
                used.add(kind)
                types.append(f"{kind}[{scalar}]")
            else:
                types.append(scalar)
        decls.append(f"{name}: BuiltKernel[[{', '.join(types)}]]")
    head = [
        '"""Types of the built kernels (generated by `anodize build`)."""',
        "",
        "from anodize.built import BuiltKernel",
        f"from anodize.types import {', '.join(sorted(used))}",
        "",
    ]
    return "\n".join(head + decls + [f"__all__ = {sorted(entries)!r}"]) + "\n"
