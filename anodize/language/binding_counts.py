"""How many times each name of a function is bound (the range facts' "immutable local":
a name bound once, ranges.py `RangeFacts._immutable`)."""

from __future__ import annotations

import ast

from anodize.language.walk import nodes_of, sub_blocks

__all__ = ["bindings", "body_text", "statement_bindings"]


def body_text(src: object, fdef: ast.FunctionDef) -> str | None:
    """The whole lines of a function's body (from its first statement's line to its end)."""
    lines = getattr(src, "lines", None)
    end = fdef.end_lineno
    if not isinstance(lines, list) or not fdef.body or end is None or end > len(lines):
        return None
    return "\n".join(lines[fdef.body[0].lineno - 1 : end])


def bindings(fdef: object, text: str | None = None) -> dict[str, int]:
    """How many times each name is bound in a function: parameters, and every name stored or
    deleted below its body (assignments plain, annotated, augmented, `for`, `with ... as`,
    `del`, and walrus and comprehension targets in expressions).

    With the body's `text`: when it has no `:=` and no `for` but those of `for` statements, no
    expression binds a name, and the statements' targets are read alone."""
    assert isinstance(fdef, ast.FunctionDef)
    if text is not None and ":=" not in text:
        fast = statement_bindings(fdef, text.count("for"))
        if fast is not None:
            return fast
    out: dict[str, int] = {}
    for a in fdef.args.args:
        out[a.arg] = out.get(a.arg, 0) + 1
    store, delete = ast.Store, ast.Del
    for n in nodes_of(fdef.body, _NAME):
        c = n.ctx.__class__  # type: ignore[attr-defined]
        if c is store or c is delete:
            out[n.id] = out.get(n.id, 0) + 1  # type: ignore[attr-defined]
    return out


_NAME = frozenset((ast.Name,))


def statement_bindings(fdef: ast.FunctionDef, fors_in_text: int) -> dict[str, int] | None:
    """`bindings` from the statements' targets alone; None when the body holds fewer `for`
    statements than its text has `for`s (a comprehension, or only a word: the full walk)."""
    out: dict[str, int] = {}
    for a in fdef.args.args:
        out[a.arg] = out.get(a.arg, 0) + 1
    fors = 0
    targets: list[ast.expr] = []
    todo: list[ast.stmt] = list(fdef.body)
    while todo:
        st = todo.pop()
        cls = st.__class__
        if cls is ast.Assign or cls is ast.Delete:
            targets.extend(st.targets)  # type: ignore[attr-defined]
        elif cls is ast.AugAssign or cls is ast.AnnAssign:
            targets.append(st.target)  # type: ignore[attr-defined]
        elif cls is ast.For or cls is ast.AsyncFor:
            fors += 1
            targets.append(st.target)  # type: ignore[attr-defined]
        elif cls is ast.With or cls is ast.AsyncWith:
            targets.extend(i.optional_vars for i in st.items if i.optional_vars is not None)  # type: ignore[attr-defined]
        elif cls.__name__ == "TypeAlias":  # (3.12) `type X = ...` stores `X`
            targets.append(st.name)  # type: ignore[attr-defined]
        for block in sub_blocks(st):
            todo.extend(block)
    if fors != fors_in_text:
        return None
    while targets:  # a target's names (those under an attribute or a subscript are read, not bound)
        t = targets.pop()
        cls = t.__class__
        if cls is ast.Name:
            out[t.id] = out.get(t.id, 0) + 1  # type: ignore[attr-defined]
        elif cls is ast.Tuple or cls is ast.List:
            targets.extend(t.elts)  # type: ignore[attr-defined]
        elif cls is ast.Starred:
            targets.append(t.value)  # type: ignore[attr-defined]
    return out
