"""`Source.span` of an ASCII source reads a node's positions when the span is first asked
for (the typer makes a span for every node it types, `anodize check` reads few): the span is a
`Span` like any other in every use -- its fields, equality and hash with an eager span,
ordering, `repr`, `dataclasses.replace` / `asdict`, copies and pickles (which carry the fields,
not the tree)."""

from __future__ import annotations

import ast
import copy
import dataclasses
import pickle

from anodize.language.diagnostics import Span
from anodize.language.syntax import Source

TEXT = "x = 1\nyy = f(a,\n       b)\n"


def _nodes() -> tuple[Source, ast.Module]:
    return Source(TEXT, "m.py"), ast.parse(TEXT)


def test_a_span_reads_its_node_when_asked() -> None:
    src, tree = _nodes()
    call = tree.body[1].value  # type: ignore[attr-defined]
    lazy = src.span(call)
    assert "_az_at" in vars(lazy)  # nothing read yet
    assert (lazy.path, lazy.line, lazy.col, lazy.end_line, lazy.end_col) == ("m.py", 2, 5, 3, 9)
    assert vars(lazy) == {"path": "m.py", "line": 2, "col": 5, "end_line": 3, "end_col": 9}  # the node is let go
    assert not hasattr(lazy, "no_such_field")


def test_a_lazy_span_is_a_span_in_every_use() -> None:
    src, tree = _nodes()
    call = tree.body[1].value  # type: ignore[attr-defined]
    eager = src.span_now(call)
    assert eager == Span("m.py", 2, 5, 3, 9)
    assert src.span(call) == eager and eager == src.span(call)
    assert hash(src.span(call)) == hash(eager)
    assert {src.span(call): 1}[eager] == 1
    assert repr(src.span(call)) == repr(eager)
    assert sorted([src.span(tree.body[1]), src.span(tree.body[0])]) == [src.span_now(tree.body[0]), src.span_now(tree.body[1])]
    assert dataclasses.replace(src.span(call), line=7) == Span("m.py", 7, 5, 3, 9)
    assert dataclasses.asdict(src.span(call)) == dataclasses.asdict(eager)
    for made in (copy.copy(src.span(call)), copy.deepcopy(src.span(call)), pickle.loads(pickle.dumps(src.span(call)))):
        assert made == eager and "_az_at" not in vars(made)
    assert len(pickle.dumps(src.span(call))) < 200  # the fields, not the source and its tree


def test_a_node_without_a_position_spans_as_before() -> None:
    src, _ = _nodes()
    bare = ast.Name(id="x")
    assert src.span(bare) == src.span_now(bare) == Span("m.py", 1, 0, 1, 1)


def test_a_non_ascii_source_spans_at_once_in_characters() -> None:
    text = "s = 'é'; t = s\n"
    src = Source(text, "u.py")
    t = ast.parse(text).body[1]
    span = src.span(t)
    assert "_az_at" not in vars(span) and (span.col, span.end_col) == (9, 14)
