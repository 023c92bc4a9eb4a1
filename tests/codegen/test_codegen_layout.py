"""Codegen's layout (docs/architecture.md, issue 33): the LLVM lowering dispatches every IR
node by its type through one registry, which the modules that lower a node fill themselves;
codegen's modules import each other without cycles, at module top (but the few lazy loads
named here); and no class is split across files by mixins."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

import anodize.codegen.lowerings  # noqa: F401  (registers the SIMT node lowerings)
import anodize.codegen.tile.entry  # noqa: F401  (registers the tile compiler's)
from anodize.codegen.llvm import registry
from anodize.codegen.llvm.lower import Lowerer
from anodize.language import ir

CODEGEN = Path(anodize.codegen.lowerings.__file__).resolve().parent

# the function-level imports codegen keeps, each a lazy load with a reason: llvmlite's binding
# (llvm/binding.py), NumPy on the light cached-load path (artifact.py), and the tile compiler,
# the CPU backend and the debug device, loaded by the driver for the compiles that need them
LAZY_IMPORTS = {("artifact.py", "numpy"), ("llvm/binding.py", "llvmlite.binding"), ("driver.py", "tile"),
                ("driver.py", "cpu"), ("driver.py", "debug.run")}


def _modules() -> dict[str, ast.Module]:
    return {p.relative_to(CODEGEN).as_posix(): ast.parse(p.read_text()) for p in sorted(CODEGEN.rglob("*.py"))}


def _target(rel: str, node: ast.ImportFrom) -> str:
    """The codegen module (a path relative to codegen/, without .py) a relative import names."""
    parts = rel[:-3].split("/")[:-1]  # the importing module's package
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    return "/".join(parts + (node.module.split(".") if node.module else []))


def test_every_ir_node_has_one_registered_lowering() -> None:
    nodes = set(typing.get_args(ir.Stmt)) | set(typing.get_args(ir.Expr))
    assert len(nodes) > 40
    missing = sorted(t.__name__ for t in nodes if t not in registry.LOWERINGS)
    assert not missing, f"IR nodes without an LLVM lowering: {missing}"


def test_a_second_lowering_for_a_node_type_is_refused() -> None:
    with pytest.raises(RuntimeError, match="two lowerings registered for Assign"):
        registry.lowers(ir.Assign)(lambda lw, node: None)


def test_an_unregistered_node_is_an_internal_error_naming_it() -> None:
    class NotLowered:
        span = None

    err = registry.missing(NotLowered())
    assert "no LLVM lowering is registered for NotLowered" in str(err)


def test_the_lowerer_is_one_class_with_collaborators() -> None:
    """`Lowerer` derives from nothing; statements, expressions, calls, local values and bounds
    checks are objects it holds, each of a class defined in its own module."""
    assert Lowerer.__bases__ == (object,)
    init = next(n for n in ast.walk(_modules()["llvm/lower.py"]) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    held = {t.attr for n in ast.walk(init) if isinstance(n, ast.Assign) for t in n.targets
            if isinstance(t, ast.Attribute) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
            and n.value.func.id.endswith(("Lowering", "Checks"))}
    assert held == {"statements", "expressions", "calls", "locals", "bounds"}


def test_no_class_derives_from_a_class_of_another_codegen_module_but_a_specialisation() -> None:
    """A class whose base lives in another module is a mixin unless it is a real specialisation
    (a target of the `Target` interface and the split kernels' CPU target, the CPU backend's
    region lowerer, the tile pass's row form, the debug device's block barrier, the attention
    tile's narrow copies): those are listed; anything else derives from no codegen class of
    another file."""
    allowed = {("cpu/backend.py", "CPUTarget", "Target"), ("gpu/ptx.py", "NVPTXTarget", "Target"),
               ("cpu/regions.py", "SplitTarget", "CPUTarget"), ("cpu/regions.py", "RegionLowerer", "Lowerer"),
               ("tile/rows.py", "RowLowering", "_Lowering"), ("debug/run.py", "_Block", "BlockState"),
               ("tensorcore/attention.py", "_Narrow", "_Tile")}
    mods = _modules()
    defined = {(rel, c.name) for rel, t in mods.items() for c in t.body if isinstance(c, ast.ClassDef)}
    local = {rel: {c for r, c in defined if r == rel} for rel in mods}
    imported_classes = {c for _, c in defined}
    found = set()
    for rel, t in mods.items():
        for c in t.body:
            if isinstance(c, ast.ClassDef):
                for b in c.bases:
                    name = b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else ""
                    if name in imported_classes and name not in local[rel]:
                        found.add((rel, c.name, name))
    assert found <= allowed, sorted(found - allowed)


def test_codegen_imports_have_no_cycle_and_few_lazy_loads() -> None:
    mods = _modules()
    names = {rel[:-3].removesuffix("/__init__") for rel in mods}
    graph: dict[str, set[str]] = {n: set() for n in names}
    lazy = set()
    for rel, t in mods.items():
        me = rel[:-3].removesuffix("/__init__")
        in_function = {id(n) for f in ast.walk(t) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for node in ast.walk(t):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if id(node) in in_function:
                what = node.names[0].name if isinstance(node, ast.Import) else (node.module or "")
                lazy.add((rel, what.removeprefix(".")))
            if isinstance(node, ast.ImportFrom) and node.level:
                base = _target(rel, node)
                for a in node.names:
                    dep = f"{base}/{a.name}" if f"{base}/{a.name}" in names else base
                    if dep in names and dep != me:
                        graph[me].add(dep)
    assert lazy == LAZY_IMPORTS, sorted(lazy ^ LAZY_IMPORTS)
    # no cycle (TYPE_CHECKING-only imports excluded: they never run)
    runtime = {n: set(d) for n, d in graph.items()}
    for rel, t in mods.items():
        me = rel[:-3].removesuffix("/__init__")
        for node in t.body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for imp in node.body:
                    if isinstance(imp, ast.ImportFrom) and imp.level:
                        runtime[me].discard(_target(rel, imp))
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        state[n] = 1
        for d in sorted(runtime[n]):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(d):] + [d]))
            if d not in state:
                visit(d, path + [d])
        state[n] = 2

    for n in sorted(runtime):
        if n not in state:
            visit(n, [n])
