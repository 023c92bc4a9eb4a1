"""One walk per tree (issue 33): the `ast` walks live in anodize/language/walk.py (`walk_batched`,
`walk_no_scopes`, `sub_blocks`, `statements`, `child_fields`) and the typed IR's in
anodize/language/ir_walk.py (`node_fields`, `children`, `walk`).  No other module finds a node's
children by iterating its fields: a static scan of the packages' source for `dataclasses.fields(...)`,
`__dataclass_fields__`, an `ast` class's `_fields` and `ast.iter_fields` outside those modules.

`KNOWN` lists the sites that still do (module path, function): the test fails when one listed no
longer does, so the list only shrinks; a new hand-written field walker fails it at once.
"""

from __future__ import annotations

import ast
from pathlib import Path

from anodize.language import ir
from anodize.language.types import I32
from anodize.language.ir_walk import children, map_children, node_fields, same, walk
from anodize.language.tile_ir import TileElem, TileTy
from anodize.language.walk import statements, walk_no_scopes

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("anodize", "checker", "codegen", "runtime")
WALK_MODULES = frozenset(("anodize/language/walk.py", "anodize/language/ir_walk.py"))

# not walks: a record's own field list (bundle.py, records.py build classes from their fields)
NOT_WALKS: frozenset[tuple[str, str]] = frozenset((
    ("anodize/bundle.py", "__init_subclass__"),
    ("anodize/language/records.py", "_make"),
))
# field walkers still written by hand (a rebuild is `map_children`, a comparison `same`); only shrinks
KNOWN: frozenset[tuple[str, str]] = frozenset()


def _is_field_walk(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name in ("fields", "iter_fields"):
            return True
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            return node.args[1].value in ("_fields", "__dataclass_fields__")
    return isinstance(node, ast.Attribute) and node.attr in ("_fields", "__dataclass_fields__")


def _sites() -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel in WALK_MODULES:
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for fn in ast.walk(tree):
                if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    if any(_is_field_walk(n) for s in fn.body for n in walk_no_scopes(s)):
                        out.add((rel, fn.name))
    return out


def test_no_new_hand_written_field_walks() -> None:
    found = _sites() - NOT_WALKS
    new = sorted(found - KNOWN)
    assert not new, f"walk a tree with anodize/language/walk.py or ir_walk.py, not by its fields: {new}"
    fixed = sorted(KNOWN - found)
    assert not fixed, f"no longer a hand-written walk: remove from KNOWN: {fixed}"


def test_scan_sees_a_walker() -> None:
    src = "import dataclasses\ndef f(x):\n    return [getattr(x, g.name) for g in dataclasses.fields(x)]\n"
    fn = ast.parse(src).body[1]
    assert isinstance(fn, ast.FunctionDef)
    assert any(_is_field_walk(n) for s in fn.body for n in walk_no_scopes(s))


def test_ir_walk() -> None:
    a = ir.Local("a", I32)
    b = ir.Local("b", I32)
    node = ir.Assign("x", ir.BinOp("+", a, b, I32))
    assert node_fields(ir.BinOp) == ("op", "left", "right", "site")
    assert children(node) == [node.value]
    assert [n for n in walk(node) if isinstance(n, ir.Local)] == [a, b]
    assert children((a, (b,))) == [a, b]
    assert children("x") == [] and node_fields(str) == ()


def test_walk_stops_at_a_class() -> None:
    a = ir.Local("a", I32)
    f = ir.FuncIR("h", (), (("a", I32),), (ir.Return(a),), I32)
    call = ir.Call(f, (ir.Local("b", I32),), I32)
    assert [n.name for n in walk(call) if isinstance(n, ir.Local)] == ["a", "b"]
    assert [n.name for n in walk(call, stop=(ir.FuncIR,)) if isinstance(n, ir.Local)] == ["b"]


def test_map_children_rebuilds_only_what_changed() -> None:
    a, b, c = ir.Local("a", I32), ir.Local("b", I32), ir.Local("c", I32)
    node = ir.If(ir.BinOp("<", a, b, I32), (ir.Assign("x", a), ir.Assign("y", b)), ())
    same_ids = map_children(node, lambda n: n)
    assert same_ids is node
    swap = lambda n: c if n is a else map_children(n, swap)  # noqa: E731
    new = swap(node)
    assert new is not node and new.cond.left is c and new.body[0].value is c
    assert new.body[1] is node.body[1] and new.orelse is node.orelse  # untouched subtrees kept
    # a TileElem's (placeholder, tile) pairs: the tiles mapped, the placeholder names kept
    t = ir.Local("t", TileTy(I32, (4,)))
    u = ir.Local("u", TileTy(I32, (4,)))
    elem = TileElem(ir.Local("p", I32), (("p", t),), TileTy(I32, (4,)))
    got = map_children(elem, lambda n: u if n is t else n)
    assert got.inputs == (("p", u),) and got.template is elem.template
    assert map_children((a, "s", (b,)), lambda n: c) == (c, "s", (c,))
    assert map_children("x", lambda n: c) == "x"


def test_same_compares_structure_and_asks_eq() -> None:
    def tree(x: str, k: int) -> ir.Stmt:
        return ir.Assign(x, ir.BinOp("+", ir.Local(x, I32), ir.Const(k, I32), I32))

    assert same(tree("x", 1), tree("x", 1)) and not same(tree("x", 1), tree("x", 2))
    assert not same(tree("x", 1), tree("y", 1))
    rename = lambda node, field, x, y: True if field == "name" else None  # noqa: E731
    assert same(tree("x", 1), tree("y", 1), rename) and not same(tree("x", 1), tree("y", 2), rename)
    assert same((tree("x", 1),), [tree("x", 1)]) is False  # a tuple is not a list
    assert not same(ir.Const(1, I32), ir.Const(1.0, I32))  # plain values of one class


def test_statements_and_scopes() -> None:
    tree = ast.parse(
        "def f():\n    if a:\n        x = 1\n    else:\n        try:\n            y = 2\n        except E:\n            z = 3\n"
        "    def g():\n        w = 4\n    h = lambda: (v := 5)\n"
    )
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    names = [s.targets[0].id for s in statements(fn.body) if isinstance(s, ast.Assign) and isinstance(s.targets[0], ast.Name)]
    assert names == ["x", "y", "z", "h"]  # not `w`: g's body is its own
    assert not any(isinstance(n, ast.NamedExpr) for n in walk_no_scopes(fn.body[2]))


def test_child_nodes_is_iter_child_nodes_without_leaves() -> None:
    """syntax.py's nesting check walks with `child_nodes`: the same children, in the same order,
    as `ast.iter_child_nodes` less contexts and operators, over the language package's source."""
    from anodize.language.walk import child_nodes

    leaves = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
    seen = 0
    for path in sorted((ROOT / "anodize" / "language").glob("*.py"))[:40]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            want = [c for c in ast.iter_child_nodes(node) if not isinstance(c, leaves)]
            got = child_nodes(node)
            assert len(got) == len(want) and all(a is b for a, b in zip(got, want)), (path, node)
            seen += 1
    assert seen > 10_000


def _reference_batched(root: ast.AST, visitors: list[object]) -> None:
    """`walk_batched` as a loop over each class's fields (what its written-out walks replace)."""
    from anodize.language.walk import _fields, _LEAVES, _OP_CLASSES, visitor_methods

    methods: dict[str, list] = {}
    for v in visitors:
        for name, fn in visitor_methods(v).items():
            methods.setdefault(name, []).append(fn)
    ops = any(name.partition("_")[2] in _OP_CLASSES for name in methods)
    skip = {c for c in _LEAVES if f"visit_{c.__name__}" not in methods and f"leave_{c.__name__}" not in methods} | {type(None), str, int, bool}

    def go(node: ast.AST) -> None:
        name = type(node).__name__.removeprefix("Async")
        fields = _fields(type(node), ops)
        for fn in methods.get("visit_" + name, ()):
            fn(node)
        for f in fields[:-1] if name == "FunctionDef" else fields:
            v = getattr(node, f)
            for c in v if isinstance(v, list) else [v]:
                if type(c) not in skip:
                    go(c)
        if name == "FunctionDef":
            for fn in methods.get("visit_FunctionBody", ()):
                fn(node)
            for c in node.body:  # type: ignore[attr-defined]
                go(c)
            for fn in methods.get("leave_FunctionBody", ()):
                fn(node)
        for fn in methods.get("leave_" + name, ()):
            fn(node)

    go(root)


def _recorder(names: list[str]) -> object:
    """A visitor of `visit_<name>` and `leave_<name>` for each name, recording each call."""
    ns: dict[str, object] = {}
    for n in names:
        ns["visit_" + n] = lambda self, node, n=n: self.seen.append(("visit", n, id(node)))
        ns["leave_" + n] = lambda self, node, n=n: self.seen.append(("leave", n, id(node)))
    v = type("Recorder", (), ns)()
    v.seen = []  # type: ignore[attr-defined]
    return v


def test_walk_batched_visits_as_the_field_loop() -> None:
    """The written-out walk of each node class makes the same calls in the same order as a loop
    over its fields: every visitor, and the rules' own subset, over the packages and fixtures."""
    from anodize.language.walk import walk_batched

    every = [n for n in dir(ast) if isinstance(getattr(ast, n), type) and issubclass(getattr(ast, n), ast.AST)] + ["FunctionBody"]
    rules = ["FunctionDef", "FunctionBody", "Call", "Subscript", "Assign", "Attribute", "Constant", "BinOp", "Compare"]
    files = sorted((ROOT / "checker/rules").rglob("*.py")) + sorted((ROOT / "fixtures").rglob("*.py")) + sorted((ROOT / "examples").rglob("*.py"))
    assert len(files) > 100
    for path in files:
        tree = ast.parse(path.read_text())
        for names in (every, rules):
            ours, ref = _recorder(names), _recorder(names)
            walk_batched(tree, [ours])
            _reference_batched(tree, [ref])
            assert ours.seen == ref.seen, path  # type: ignore[attr-defined]
