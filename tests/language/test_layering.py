"""The packages import each other in one direction only:

    language <- checker <- runtime;  language <- codegen <- runtime <- the `anodize` facade

(the runtime runs the checker as the gate before codegen; checker and codegen never
import each other)

Every import statement is read from source (function-level imports included, and those
under `if TYPE_CHECKING:` too: a type named across a layer is a dependency across it, which
the runtime meets with its own protocols, runtime/kernel_store.py), so neither a late nor a
type-only import can hide a dependency that points the wrong way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# folder in the checkout -> (installed package, packages it may import)
LAYERS = {
    "anodize/language": ("anodize.language", ("anodize.language",)),
    "checker": ("anodize.checker", ("anodize.language", "anodize.checker")),
    "codegen": ("anodize.codegen", ("anodize.language", "anodize.codegen")),
    "runtime": ("anodize.runtime", ("anodize.language", "anodize.checker", "anodize.codegen", "anodize.runtime")),
}


def _imports(tree: ast.Module, package: str, is_init: bool) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                out.extend((child.lineno, a.name) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    parts = package.split(".")
                    base = parts[: len(parts) - child.level + 1]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                out.append((child.lineno, mod))
                if mod in ("anodize",):  # `from anodize import thread` names a submodule
                    out.extend((child.lineno, f"anodize.{a.name}") for a in child.names)
            visit(child)

    visit(tree)
    return out


def _files() -> list[tuple[Path, str, tuple[str, ...]]]:
    out = []
    for folder, (package, allowed) in LAYERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            pkg = ".".join([package, *parts[:-1]]) if path.name != "__init__.py" else ".".join([package, *parts])
            out.append((path, pkg, allowed))
    return out


@pytest.mark.parametrize("path,package,allowed", _files(), ids=lambda v: str(v) if isinstance(v, str) else None)
def test_imports_point_one_way(path: Path, package: str, allowed: tuple[str, ...]) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = [
        f"{path.relative_to(ROOT)}:{line}: imports `{mod}`"
        for line, mod in _imports(tree, package, path.name == "__init__.py")
        if (mod == "anodize" or mod.startswith("anodize.")) and not any(mod == a or mod.startswith(a + ".") for a in allowed)
    ]
    assert not bad, "an import against the layering:\n" + "\n".join(bad)


def test_every_layer_has_files() -> None:
    counts = {folder: sum(1 for _ in (ROOT / folder).rglob("*.py")) for folder in LAYERS}
    assert all(n >= 3 for n in counts.values()), counts


def test_type_only_imports_count() -> None:
    """An import under `if TYPE_CHECKING:` is a dependency too (the runtime once named the
    facade's `Kernel` that way)."""
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from anodize.kernel import Kernel\n")
    assert (3, "anodize.kernel") in _imports(tree, "anodize.runtime", False)
