"""No class is split across files by mixins (issue 33): a class's state and methods are declared
where the class is, and collaborators hold a declared state record instead (the typer: language/
typer_state.py's `FnState`, held by typer_fn.py's `FnTyper` and each of its collaborators).

Two static checks over the packages (anodize/, checker/, codegen/, runtime/), both on the source:

* a composite: a class with two or more bases that are classes of the same package defined in
  other modules (the old `_FnCompiler(StmtTyping, ExprTyping, ...)`).  A subclass of one class of
  another module (a real specialisation: `TileStmtTyper(StmtTyper)`) is fine;
* a piece: a class whose methods read `self.<name>` that neither it nor its bases (followed
  through the package's classes) define -- a mixin pretending to be the whole class, whose
  state lives in another file.  A class with a base from outside the packages (`ast.NodeVisitor`,
  `Exception`) is not judged: its base's attributes are not read here.

`KNOWN` lists the classes that still break the rule (none: the typer, the checker's interpreter
and race walk, and codegen's lowerers all hold collaborators over a declared state record); the
test fails when one listed is fixed, so the list only shrinks.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("anodize", "checker", "codegen", "runtime")

# classes that still break the rule (module path, class name): none; the list may only shrink
KNOWN: frozenset[tuple[str, str]] = frozenset()

_ALWAYS = {"__dict__", "__class__", "__module__", "__doc__", "__name__"}


class _Class:
    def __init__(self, path: str, node: ast.ClassDef, aliases: set[str], module: ast.Module | None = None):
        self.path = path
        self.node = node
        self.module = module
        self.name = node.name
        self.bases = [b for b in node.bases if not (isinstance(b, ast.Name) and b.id in aliases)]
        self.defined = _defined(node)
        self.read = _read(node)


def _object_aliases(module: ast.Module) -> set[str]:
    """`object`, and names bound to it (`_Base = object` at run time: the mixin idiom's base),
    which count as no base."""
    out = {"object"}
    todo: list[ast.stmt] = list(module.body)
    while todo:  # module-level statements, and those of its `if TYPE_CHECKING: ... else: ...`
        n = todo.pop()
        if isinstance(n, ast.If):
            todo.extend(n.body + n.orelse)
        elif isinstance(n, ast.Assign) and isinstance(n.value, ast.Name) and n.value.id == "object":
            out.update(t.id for t in n.targets if isinstance(t, ast.Name))
    return out


def _set_in_module(module: ast.Module) -> set[str]:
    """Attributes the class's own module sets on an object it holds (`t.tid = ...`,
    `object.__setattr__(k, "_hash", ...)`): not a mixin's state, which lives in another file."""
    out: set[str] = set()
    for n in ast.walk(module):
        if isinstance(n, ast.Assign):
            out.update(t.attr for t in n.targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id != "self")
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "__setattr__" and len(n.args) >= 2:
            if isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
                out.add(n.args[1].value)
    return out


def _defined(cls: ast.ClassDef) -> set[str]:
    """Methods, class attributes, `__slots__` and every `self.x = ...` of the class's methods."""
    out: set[str] = set()
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(item.name)
        elif isinstance(item, ast.Assign):
            out.update(t.id for t in item.targets if isinstance(t, ast.Name))
            if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in item.targets):
                out.update(e.value for e in ast.walk(item.value) if isinstance(e, ast.Constant) and isinstance(e.value, str))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            out.add(item.target.id)
    for n in ast.walk(cls):
        targets: list[ast.expr] = []
        if isinstance(n, ast.Assign):
            targets = n.targets
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            targets = [n.target]
        for t in targets:
            for e in ast.walk(t):
                if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                    out.add(e.attr)
    return out


def _read(cls: ast.ClassDef) -> dict[str, int]:
    """`self.<name>` read in the class's own methods (not nested classes), with a line."""
    out: dict[str, int] = {}
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(item):
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                    out.setdefault(n.attr, n.lineno)
    return out


def _classes() -> dict[str, list[_Class]]:
    by_name: dict[str, list[_Class]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"), rel)
            aliases = _object_aliases(tree)
            for n in ast.walk(tree):
                if isinstance(n, ast.ClassDef):
                    by_name.setdefault(n.name, []).append(_Class(rel, n, aliases, tree))
    return by_name


def _base_name(b: ast.expr) -> str | None:
    if isinstance(b, ast.Name):
        return b.id
    if isinstance(b, ast.Subscript):  # `Generic[T]`, `Base[T]`
        return _base_name(b.value)
    return None


def _package(path: str) -> str:
    return path.split("/")[0]


def _ancestors_defined(c: _Class, by_name: dict[str, list[_Class]], seen: set[int]) -> set[str] | None:
    """Everything `c` and its bases define; None when a base is outside the packages."""
    if id(c) in seen:
        return set()
    seen.add(id(c))
    out = set(c.defined)
    for b in c.bases:
        name = _base_name(b)
        if name in ("Protocol", "Generic"):
            continue
        found = [k for k in by_name.get(name or "", []) if _package(k.path) == _package(c.path)]
        if not found:
            return None  # a base we cannot read (the standard library's, a third party's)
        for k in found:
            got = _ancestors_defined(k, by_name, seen)
            if got is None:
                return None
            out |= got
    return out


@lru_cache(maxsize=1)
def _problems() -> tuple[tuple[str, str, str], ...]:
    by_name = _classes()
    out: list[tuple[str, str, str]] = []
    for classes in by_name.values():
        for c in classes:
            if any(_base_name(b) == "Protocol" for b in c.bases):
                continue
            other = [
                name for name in (_base_name(b) for b in c.bases)
                if any(k.path != c.path and _package(k.path) == _package(c.path) for k in by_name.get(name or "", []))
            ]
            if len(other) >= 2:
                out.append((c.path, c.name, f"composed of classes of other modules: {', '.join(other)}"))
                continue
            defined = _ancestors_defined(c, by_name, set())
            if defined is None:
                continue
            missing = sorted(n for n in c.read if n not in defined and n not in _ALWAYS)
            if missing and c.module is not None:
                missing = sorted(set(missing) - _set_in_module(c.module))
            if missing:
                out.append((c.path, c.name, f"reads self.{missing[0]} (line {c.read[missing[0]]}) that it does not define"
                                            + (f", and {len(missing) - 1} more" if len(missing) > 1 else "")))
    return tuple(sorted(out))


def test_no_class_is_split_across_files_by_mixins() -> None:
    new = [p for p in _problems() if (p[0], p[1]) not in KNOWN]
    assert not new, "classes split by mixins (declare the state; hold collaborators instead):\n" + "\n".join(
        f"  {path}: {name}: {why}" for path, name, why in new
    )


def test_the_known_list_only_shrinks() -> None:
    still = {(p[0], p[1]) for p in _problems()}
    fixed = sorted(KNOWN - still)
    assert not fixed, f"no longer split by mixins: remove from KNOWN: {fixed}"


def test_the_check_finds_a_mixin(tmp_path: Path) -> None:
    """The check itself: the old typer's shape (a piece reading the whole class's state, and a
    composite of pieces from two modules) is found; a specialisation is not."""
    piece = ast.parse("_Base = object\nclass StmtPart(_Base):\n    def visit(self):\n        return self.vars\n")
    c = _Class("anodize/a.py", piece.body[1], _object_aliases(piece))  # type: ignore[arg-type]
    assert c.bases == [] and "vars" in c.read and "vars" not in c.defined
    owner = ast.parse("class Typer:\n    def __init__(self):\n        self.vars = {}\n    def go(self):\n        return self.vars\n")
    t = _Class("anodize/b.py", owner.body[0], _object_aliases(owner))  # type: ignore[arg-type]
    assert "vars" in t.defined and _ancestors_defined(t, {"Typer": [t]}, set()) == {"__init__", "go", "vars"}
