"""`anodize check` on a package `anodize build` wrote: az-stale-artifact when its source changed.

A built package (`OUT/<module>_kernels/`) records the SHA-256 of the module its kernels were
compiled from (anodize_build.json, runtime/prebuilt.py).  Its loader never reads that source,
so nothing at run time would notice an edit; `anodize check` does: a package found among the
checked paths (its `__init__.py` beside the manifest) whose recorded source exists and hashes
differently now is one az-stale-artifact, located at the first built kernel's `def` in the
source as it is now.  A package whose source is not there (a deployed package) is not judged.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from anodize.language import messages
from anodize.language.diagnostics import Diagnostic, Span

MANIFEST = "anodize_build.json"  # (runtime/prebuilt.py's MANIFEST: the checker does not import the runtime)

__all__ = ["MANIFEST", "stale_artifacts"]


def stale_artifacts(files: list[Path]) -> tuple[list[Diagnostic], dict[str, str]]:
    """The az-stale-artifact diagnostics of the built packages among `files`, and the sources
    they are located in (path -> text, for rendering)."""
    diags: list[Diagnostic] = []
    sources: dict[str, str] = {}
    for f in files:
        if f.name != "__init__.py" or not (f.parent / MANIFEST).is_file():
            continue
        got = _check_package(f.parent)
        if got is not None:
            diag, path, text = got
            diags.append(diag)
            sources[path] = text
    return diags, sources


def _check_package(folder: Path) -> tuple[Diagnostic, str, str] | None:
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        kernels = manifest["kernels"]
        by_source: dict[str, list[str]] = {}
        digests: dict[str, str] = {}
        for name, k in kernels.items():
            by_source.setdefault(k["source"]["path"], []).append(name)
            digests[k["source"]["path"]] = k["source"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not a manifest this anodize wrote: the loader refuses it when imported
    for path, names in by_source.items():
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue  # the source is not here (a deployed package): nothing to compare
        if hashlib.sha256(data).hexdigest() == digests[path]:
            continue
        text = data.decode("utf-8", "replace")
        span = _first_def(path, text, names)
        diag = messages.stale_artifact(
            span, str(folder), tuple(sorted(names)), str(manifest.get("anodize", "?")),
            path, ",".join(manifest.get("archs", [])), str(folder.parent),
        )
        return diag, path, text
    return None


def _first_def(path: str, text: str, names: list[str]) -> Span:
    """The `def` of the first built kernel still in the source, else its first line."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return Span.point(path, 1, 0)
    lines = sorted(
        (n.lineno, n.col_offset, n.name) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in names
    )
    if not lines:
        return Span.point(path, 1, 0)
    line, col, name = lines[0]
    return Span.point(path, line, col + len("def "), len(name))
