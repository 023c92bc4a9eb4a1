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


# ---- import cycles and function-level imports -------------------------------------------------

# Function-level imports in the product tree (anodize/, checker/, codegen/, runtime/): what is
# lazy for a reason -- a heavy dependency loaded at its one place (runtime/lazy.py: CUDA's
# bindings, llvmlite, torch, the checker, codegen's driver), the runtime behind the facade
# (anodize/kernel.py `_runtime`: `import anodize` stays light).  Everything else is
# imported at the top of its module.  The budget only goes down.
FUNCTION_IMPORT_BUDGET = 54  # (454 before issue 33, by this count: 60 after it, 54 with no runtime cycle)
FOLDERS = ("anodize", "checker", "codegen", "runtime")


def _function_imports(tree: ast.Module) -> list[int]:
    out = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.extend(n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return sorted(set(out))


def test_function_level_imports_stay_within_the_budget() -> None:
    found = {
        str(p.relative_to(ROOT)): lines
        for folder in FOLDERS
        for p in sorted((ROOT / folder).rglob("*.py"))
        if (lines := _function_imports(ast.parse(p.read_text(encoding="utf-8"))))
    }
    total = sum(len(v) for v in found.values())
    worst = sorted(found.items(), key=lambda kv: -len(kv[1]))[:10]
    assert total <= FUNCTION_IMPORT_BUDGET, (
        f"{total} function-level imports (budget {FUNCTION_IMPORT_BUDGET}): import at the module's top, or load a "
        "heavy dependency through its one place (runtime/lazy.py); most: " + ", ".join(f"{p} ({len(v)})" for p, v in worst)
    )


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    base = {"runtime": "anodize.runtime", "anodize": "anodize"}[parts[0]]
    rest = [p for p in parts[1:] if p != "__init__"]
    return ".".join([base, *rest])


# The lazy loader: runtime/lazy.py loads a heavy or optional piece (CUDA's bindings, llvmlite,
# torch, the checker, codegen's driver, runtime/cuda_device.py, and runtime/combinators.py and
# runtime/copy_ops.py, which fill the slots of `Op`, `Buffer` and `Device` when no module above
# loaded them yet) at its one place, inside a function; it is a leaf loader (its own code depends on none of them), so its function-level
# imports are not edges.  The facade reaches the runtime from anodize/kernel.py's functions
# (`_runtime()`: anodize/kernel_runtime.py, and the runtime modules a kernel object needs): those
# imports do count, and close no cycle, as the runtime never imports the facade (above).
LAZY_LOADERS = {"anodize.runtime.lazy"}

# Function-level imports that still close a cycle (module -> module it imports in a function).
# None is left: a method of a low value type that fronts work of a module built on that type
# (`Op.and_then`, `Buffer.to_host_op`, `Device.copy_op`, `Buffer.copy_to`) calls a slot the low
# module declares (runtime/ops.py `Builders`, runtime/buffer.py `Fronts`) and the high module
# fills as it loads.  The set stays empty: a new cycle fails the test.
KNOWN_CYCLE_EDGES: set[tuple[str, str]] = set()


def _module_edges(lazy: bool) -> dict[str, set[str]]:
    """module -> the runtime/facade modules it imports: those that run when it loads (`TYPE_CHECKING`
    ones aside) and, with `lazy`, those inside its functions too (a lazy loader's aside)."""
    files = [p for p in sorted((ROOT / "runtime").glob("*.py"))] + [p for p in sorted((ROOT / "anodize").glob("*.py"))]
    names = {_module_name(p): p for p in files}
    edges: dict[str, set[str]] = {}
    for mod, path in names.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out: set[str] = set()

        def visit(node: ast.AST) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and (not lazy or mod in LAZY_LOADERS):
                    continue
                if isinstance(child, ast.If) and (getattr(child.test, "id", None) == "TYPE_CHECKING"):
                    for s in child.orelse:
                        visit(s)
                    continue
                targets: list[str] = []
                if isinstance(child, ast.Import):
                    targets = [a.name for a in child.names]
                elif isinstance(child, ast.ImportFrom):
                    base = _imports(ast.Module(body=[child], type_ignores=[]), package, False)[0][1]
                    subs = [f"{base}.{a.name}" for a in child.names if f"{base}.{a.name}" in names]
                    targets = subs or [base]
                out.update(t for t in targets if t in names and t != mod)
                visit(child)

        visit(ast.parse(path.read_text(encoding="utf-8")))
        edges[mod] = out
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    cycles = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                walk(n)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            walk(m)
    return cycles


def test_no_import_cycle_between_runtime_and_facade_modules() -> None:
    """Module-level imports (those that run when a module loads, `TYPE_CHECKING` ones aside) among
    runtime/ and the facade's modules form no cycle: each module loads after what it imports."""
    cycles = _cycles(_module_edges(lazy=False))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_import_cycle_counting_function_level_imports() -> None:
    """Function-level imports count too: a module that imports another inside a function depends
    on it as much as one that imports it at its top (the lazy loaders aside, LAZY_LOADERS).  The
    cycles left are closed only by KNOWN_CYCLE_EDGES, each of which still closes one."""
    edges = _module_edges(lazy=True)
    known = {(a, b) for a, b in KNOWN_CYCLE_EDGES if b in edges.get(a, set())}
    assert known == KNOWN_CYCLE_EDGES, f"no longer imported (drop from KNOWN_CYCLE_EDGES): {sorted(KNOWN_CYCLE_EDGES - known)}"
    for a, b in KNOWN_CYCLE_EDGES:
        rest = {m: (t - {b} if m == a else t) for m, t in edges.items()}
        assert _cycles_from(rest, b, a), f"{a} -> {b} closes no cycle now: drop it from KNOWN_CYCLE_EDGES"
    pruned = {m: {t for t in ts if (m, t) not in KNOWN_CYCLE_EDGES} for m, ts in edges.items()}
    cycles = _cycles(pruned)
    assert not cycles, "import cycles (function-level imports counted):\n" + "\n".join(" -> ".join(c) for c in cycles)


def _cycles_from(edges: dict[str, set[str]], start: str, goal: str) -> list[list[str]]:
    """[[start, ..., goal, start]] when `goal` is reachable from `start` (so goal -> start closes a cycle)."""
    seen = {start}
    todo = [[start]]
    while todo:
        path = todo.pop()
        for n in sorted(edges.get(path[-1], set())):
            if n == goal:
                return [path + [n, start]]
            if n not in seen:
                seen.add(n)
                todo.append(path + [n])
    return []


def test_the_cycle_walk_counts_a_function_level_import() -> None:
    """The walk sees a cycle that only a function-level import closes."""
    assert _cycles({"a": {"b"}, "b": {"a"}}) and not _cycles({"a": {"b"}, "b": set()})
    edges = _module_edges(lazy=True)
    assert "anodize.kernel_runtime" in edges["anodize.kernel"]  # `_runtime()`, a function-level import
    assert "anodize.kernel_runtime" not in _module_edges(lazy=False)["anodize.kernel"]


def test_a_function_level_import_that_closes_a_cycle_fails() -> None:
    """An import inside a function of a low module, of a module built on it, is a cycle."""
    edges = _module_edges(lazy=True)
    edges["anodize.runtime.ops"] = edges["anodize.runtime.ops"] | {"anodize.runtime.combinators"}
    assert any("anodize.runtime.combinators" in c and "anodize.runtime.ops" in c for c in _cycles(edges))
