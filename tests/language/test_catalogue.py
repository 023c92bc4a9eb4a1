"""Every diagnostic goes through the message catalogue: no free-text messages at call sites.

The catalogue is anodize/language/messages.py (the builders) and catalogue.py (the texts,
keyed by stable ids).  This test parses every module of the compiler and fails when

  (a) a `Diagnostic(...)` or `messages.make(...)` is built outside the catalogue;
  (b) a keyed builder (`messages.KEYED`: `type_error`, `unsupported`, `signature`, ...),
      or a helper that forwards its key to one, is called with a message or `help=` that is
      not a string-literal key of the catalogue (an f-string, a concatenation, a variable
      holding text), or without the values its template needs;
  (c) any builder is given an f-string or a string concatenation;

and checks that every key used exists and every catalogue entry is used.
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from anodize.language import catalogue, messages

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("anodize", "checker", "codegen", "runtime")
# the builders: messages.py and the modules it re-exports (messages_base.py, messages_rules.py, ...)
BUILDERS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "anodize/language").glob("messages*.py"))
CATALOGUE = {*BUILDERS, "anodize/language/catalogue.py", "anodize/language/diagnostics.py"}

# Files allowed to pass text to their builders while a conversion lands; empty now (every
# call site passes a key).  Do not add to it.
PENDING: set[str] = set()

EXCEPTIONS = {"PromotionError", "RequiresSyntaxError", "RecordError"}  # carry a key; built into diagnostics in messages.py


@dataclass
class Forwarder:
    """A function that passes its own parameter on as a builder's key (and maybe `help`)."""

    key_param: str
    key_pos: int
    help_param: str | None = None
    help_pos: int | None = None


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    messages_used: set[str] = field(default_factory=set)
    helps_used: set[str] = field(default_factory=set)
    phrases_used: set[str] = field(default_factory=set)


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            out.append((rel, ast.parse(path.read_text(encoding="utf-8"), rel)))
    return out


def _callee(call: ast.Call) -> tuple[str | None, str]:
    """(receiver, name): `messages.signature(...)` -> ("messages", "signature"),
    `self.st.type_error(...)` -> ("self.st", "type_error") (the typer's state, typer_state.py)."""
    f = call.func
    if isinstance(f, ast.Name):
        return None, f.id
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute) and isinstance(f.value.value, ast.Name) and f.value.value.id == "self":
        return f"self.{f.value.attr}", f.attr
    if isinstance(f, ast.Attribute):
        return (f.value.id if isinstance(f.value, ast.Name) else "?"), f.attr
    return "?", ""


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    return names[1:] if names and names[0] in ("self", "cls") else names


def _keyed(call: ast.Call, forwarders: dict[str, Forwarder]) -> tuple[int, str | None, int | None, str] | None:
    """(key position, key keyword, help position, what) when `call` takes a catalogue key."""
    recv, name = _callee(call)
    if recv == "messages" and name in messages.KEYED:
        return messages.KEYED[name], "key", None, f"messages.{name}"
    if recv is None and name in EXCEPTIONS:
        return messages.KEYED[name], "key", None, name
    if recv in (None, "self", "self.st") and name in forwarders:
        fw = forwarders[name]
        return fw.key_pos, fw.key_param, fw.help_pos, name
    return None


def _arg(call: ast.Call, pos: int | None, kw: str | None) -> ast.expr | None:
    if pos is not None and pos < len(call.args):
        return call.args[pos]
    return next((k.value for k in call.keywords if k.arg == kw), None)


def _literals(e: ast.expr, forwarded: set[str], key_fns: dict[str, list[str]] | None = None) -> list[str] | None:
    """The literal keys `e` may evaluate to (a literal, `a if c else b`, `param or "k"`, a
    `messages.CONSTANT` holding a key, a call of a file-local function that returns only
    literal keys); None when it may be free text. A forwarded parameter contributes no key."""
    if isinstance(e, ast.Constant) and isinstance(e.value, str):
        return [e.value]
    if (
        isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "messages"
        and e.attr.isupper() and isinstance(getattr(messages, e.attr, None), str)
    ):
        return [getattr(messages, e.attr)]
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and key_fns and e.func.id in key_fns:
        return list(key_fns[e.func.id])
    if isinstance(e, ast.Name) and e.id in forwarded:
        return []
    if isinstance(e, ast.IfExp):
        a, b = _literals(e.body, forwarded), _literals(e.orelse, forwarded)
        return None if a is None or b is None else a + b
    if isinstance(e, ast.BoolOp) and isinstance(e.op, ast.Or):
        parts = [_literals(v, forwarded) for v in e.values]
        return None if any(p is None for p in parts) else [k for p in parts for k in p]  # type: ignore[union-attr]
    return None


def _per_tree(fn: Any) -> Any:
    """Memoise a function of one module tree (the report reads each module twice)."""
    memo: dict[int, tuple[ast.Module, Any]] = {}

    def once(tree: ast.Module) -> Any:
        hit = memo.get(id(tree))
        if hit is None or hit[0] is not tree:
            hit = memo[id(tree)] = (tree, fn(tree))
        return dict(hit[1])

    return once


@_per_tree
def _key_functions(tree: ast.Module) -> dict[str, list[str]]:
    """File-local functions every `return` of which is a literal key (`_reason(node)`)."""
    found: dict[str, list[str]] = {}
    for fn in _functions(tree):
        returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
        keys: list[str] = []
        for r in returns:
            got = _literals(r.value, set()) if r.value is not None else None
            if got is None:
                break
            keys.extend(got)
        else:
            if keys:
                found[fn.name] = keys
    return found


def _fields(template: str) -> set[str]:
    return {f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f}


def _is_text_expr(e: ast.expr) -> bool:
    """An f-string or a concatenation involving a string: text built at the call site."""
    if isinstance(e, ast.JoinedStr):
        return True
    if isinstance(e, ast.BinOp) and isinstance(e.op, (ast.Add, ast.Mod)):
        return any(isinstance(x, (ast.JoinedStr, ast.Constant)) and not isinstance(getattr(x, "value", ""), (int, float))
                   or _is_text_expr(x) for x in (e.left, e.right))
    return False


_FUNCTIONS: dict[int, tuple[ast.Module, list[ast.FunctionDef | ast.AsyncFunctionDef]]] = {}


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The module's functions (nested ones included), walked once per tree."""
    hit = _FUNCTIONS.get(id(tree))
    if hit is None or hit[0] is not tree:
        hit = _FUNCTIONS[id(tree)] = (tree, [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))])
    return hit[1]


@_per_tree
def _find_forwarders(tree: ast.Module) -> dict[str, Forwarder]:
    """Functions (file-local) that hand a parameter on as a key, to a builder or to another forwarder."""
    found: dict[str, Forwarder] = {}
    # each function's parameters and calls, walked once (the fixpoint below revisits them)
    fns = [(fn, _params(fn), [n for n in ast.walk(fn) if isinstance(n, ast.Call)]) for fn in _functions(tree)]
    changed = True
    while changed:
        changed = False
        for fn, params, calls in fns:
            if fn.name in found:
                continue
            for call in calls:
                k = _keyed(call, found)
                if k is None:
                    continue
                key = _arg(call, k[0], k[1])
                if isinstance(key, ast.Name) and key.id in params:
                    fw = Forwarder(key.id, params.index(key.id))
                    hlp = _arg(call, k[2], "help")
                    names = [n.id for n in ast.walk(hlp) if isinstance(n, ast.Name)] if hlp is not None else []
                    for h in (n for n in names if n in params):
                        fw.help_param, fw.help_pos = h, params.index(h)
                    found[fn.name] = fw
                    changed = True
                    break
    return found


def _check_phrase(call: ast.Call, name: str, key_fns: dict[str, list[str]], where: str, rep: Report) -> None:
    """A builder that takes a key of `catalogue.PHRASES` (`messages.PHRASE_KEYED`)."""
    pos, kw = messages.PHRASE_KEYED[name]
    arg = _arg(call, pos, kw)
    if arg is None:
        return
    keys = _literals(arg, set(), key_fns)
    if keys is None:
        rep.problems.append(f"{where}: messages.{name} needs a literal phrase key, got {ast.unparse(arg)[:80]}")
        return
    given = {k.arg for k in call.keywords}
    for k in keys:
        if k not in catalogue.PHRASES:
            rep.problems.append(f"{where}: messages.{name}: no phrase `{k}` in the catalogue")
            continue
        rep.phrases_used.add(k)
        if None not in given and not _fields(catalogue.PHRASES[k]) <= given:
            rep.problems.append(f"{where}: phrase `{k}` needs {sorted(_fields(catalogue.PHRASES[k]) - given)}")


def _check_module(
    rel: str, tree: ast.Module, rep: Report, shared: dict[str, Forwarder] | None = None,
    shared_keys: dict[str, list[str]] | None = None,
) -> None:
    # the module's own forwarders, and methods of another module's class (the typer's state's
    # `self.st.type_error`/`unsupported`, typer_state.py, in `typer_effects.py`); key
    # functions likewise (the rules' shared `divergence_reason` in `checker/rules/base.py`)
    forwarders = {**(shared or {}), **_find_forwarders(tree)}
    key_fns = {**(shared_keys or {}), **_key_functions(tree)}
    enclosing: dict[int, set[str]] = {}  # id(call) -> the parameters its function forwards
    for fn in _functions(tree):
        fw = forwarders.get(fn.name)
        fwd = {fw.key_param, fw.help_param} - {None} if fw else set()
        for n in ast.walk(fn):
            enclosing.setdefault(id(n), set()).update(fwd)  # type: ignore[arg-type]
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        where = f"{rel}:{call.lineno}"
        recv, name = _callee(call)
        if name == "Diagnostic" or (recv == "messages" and name == "make"):
            rep.problems.append(f"{where}: builds a diagnostic outside the catalogue ({ast.unparse(call.func)})")
            continue
        if recv == "messages":
            for a in [*call.args, *(k.value for k in call.keywords)]:
                if _is_text_expr(a):
                    rep.problems.append(f"{where}: text built at the call site: {ast.unparse(a)[:80]}")
            if name in messages.PHRASE_KEYED:
                _check_phrase(call, name, key_fns, where, rep)
        k = _keyed(call, forwarders)
        if k is None:
            if recv == "messages":  # a one-message builder may still take a help key (`param_type`)
                _check_help(call, _arg(call, None, "help"), enclosing.get(id(call), set()), where, f"messages.{name}", rep)
            continue
        key_pos, key_kw, help_pos, what = k
        forwarded = enclosing.get(id(call), set())
        key = _arg(call, key_pos, key_kw)
        keys = _literals(key, forwarded, key_fns) if key is not None else None
        if keys is None:
            rep.problems.append(f"{where}: {what} needs a literal catalogue key, got {ast.unparse(key) if key else 'none'}")
            continue
        given = {kw.arg for kw in call.keywords}
        for k_ in keys:
            if k_ not in catalogue.MESSAGES:
                rep.problems.append(f"{where}: {what}: no message `{k_}` in the catalogue")
                continue
            rep.messages_used.add(k_)
            if None not in given and not _fields(catalogue.MESSAGES[k_]) <= given:
                rep.problems.append(f"{where}: message `{k_}` needs {sorted(_fields(catalogue.MESSAGES[k_]) - given)}")
        _check_help(call, _arg(call, help_pos, "help"), forwarded, where, what, rep)


def _check_help(call: ast.Call, hlp: ast.expr | None, forwarded: set[str], where: str, what: str, rep: Report) -> None:
    if hlp is None or (isinstance(hlp, ast.Constant) and hlp.value is None):
        return
    hkeys = _literals(hlp, forwarded)
    if hkeys is None:
        rep.problems.append(f"{where}: {what} needs a literal help key, got {ast.unparse(hlp)[:80]}")
        return
    given = {kw.arg for kw in call.keywords}
    for h in hkeys:
        if h not in catalogue.HELPS:
            rep.problems.append(f"{where}: {what}: no help `{h}` in the catalogue")
            continue
        rep.helps_used.add(h)
        if None not in given and not _fields(catalogue.HELPS[h]) <= given:
            rep.problems.append(f"{where}: help `{h}` needs {sorted(_fields(catalogue.HELPS[h]) - given)}")


def _catalogue_uses(rep: Report) -> None:
    """Keys the builders in messages*.py use themselves (`HELPS["..."]`)."""
    trees = [ast.parse((ROOT / rel).read_text(encoding="utf-8")) for rel in BUILDERS]
    for n in (n for tree in trees for n in ast.walk(tree)):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "phrase":
            if n.args and isinstance(n.args[0], ast.Constant):
                rep.phrases_used.add(n.args[0].value)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and isinstance(n.slice, ast.Constant):
            {"MESSAGES": rep.messages_used, "HELPS": rep.helps_used}.get(n.value.id, set()).add(n.slice.value)


@pytest.fixture(scope="module")
def report() -> Report:
    rep = Report()
    modules = [(rel, tree) for rel, tree in _modules() if rel not in CATALOGUE]
    shared: dict[str, Forwarder] = {}
    shared_keys: dict[str, list[str]] = {}
    for _, tree in modules:
        for name, fw in _find_forwarders(tree).items():
            shared.setdefault(name, fw)
        for name, keys in _key_functions(tree).items():
            shared_keys.setdefault(name, keys)
    for rel, tree in modules:
        if rel in PENDING:
            continue
        _check_module(rel, tree, rep, shared, shared_keys)
    _catalogue_uses(rep)
    return rep


def test_no_free_text_diagnostics(report: Report) -> None:
    assert not report.problems, "\n".join(report.problems)


def test_every_catalogue_entry_is_used(report: Report) -> None:
    assert sorted(set(catalogue.MESSAGES) - report.messages_used) == []
    assert sorted(set(catalogue.HELPS) - report.helps_used) == []
    assert sorted(set(catalogue.PHRASES) - report.phrases_used) == []


def test_pending_files_exist() -> None:
    """An allow-list entry for a file that is gone would hide nothing; drop it."""
    assert all((ROOT / p).exists() for p in PENDING)


def test_nothing_is_pending() -> None:
    """Every module goes through the catalogue: the allow-list stays empty."""
    assert PENDING == set()


def test_templates_are_well_formed() -> None:
    for key, text in [*catalogue.MESSAGES.items(), *catalogue.HELPS.items(), *catalogue.PHRASES.items()]:
        fields = _fields(text)
        assert all(f.isidentifier() for f in fields), key
        assert text.format(**{f: "x" for f in fields}), key


_SAMPLE = '''
from anodize.language import messages
from anodize.language.diagnostics import Diagnostic

def bad(span, name):
    messages.type_error(span, f"`{name}` is wrong")
    text = "free"
    messages.signature(span, text)
    messages.contract(span, "no-such-key")
    messages.unsupported(span, "call-to", help="write " + name)
    Diagnostic("az-type", "x", span)

class Rule:
    def say(self, node, key, help=None, **values):
        self.report(messages.unsupported(node, key, help=help, **values))

    def visit(self, node):
        self.say(node, f"a {node}")
        self.say(node, "call-to")

def why(v):
    return "not-a-witness" if v is None else "plain " + "text"

def racy(span, reason_text):
    messages.barrier_divergence(span, "barrier-divergent-syncthreads", span, reason_text)
    messages.disjoint_index(span, "c", "DisjointSlice", "0", "read", why(None))
    messages.disjoint_index(span, "c", "DisjointSlice", "0", "read", "tuple-not-witness")
'''


def test_the_check_catches_free_text() -> None:
    """The checker above is not vacuous: each kind of free text in _SAMPLE is reported."""
    rep = Report()
    _check_module("sample.py", ast.parse(_SAMPLE), rep)
    text = "\n".join(rep.problems)
    assert "sample.py:6: messages.type_error needs a literal catalogue key" in text
    assert "sample.py:8: messages.signature needs a literal catalogue key" in text
    assert "no message `no-such-key`" in text
    assert "sample.py:10: text built at the call site" in text
    assert "sample.py:11: builds a diagnostic outside the catalogue" in text
    assert "sample.py:18: say needs a literal catalogue key" in text
    assert "sample.py:19: message `call-to` needs ['name']" in text
    assert "sample.py:15" not in text  # the forwarder itself is fine
    assert "sample.py:25: messages.barrier_divergence needs a literal phrase key, got reason_text" in text
    assert "sample.py:26: messages.disjoint_index needs a literal phrase key, got why(None)" in text
    assert "sample.py:27: phrase `tuple-not-witness` needs ['n']" in text


def test_no_key_is_given_twice() -> None:
    """A dict literal keeps a repeated key's last text: the earlier message is silently lost
    (`tile-arity` was once both the Tile model's arity and `thread.tile_2d`'s form)."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / "anodize/language/catalogue.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            assert len(keys) == len(set(keys)), sorted({k for k in keys if keys.count(k) > 1})
