"""`syntax.line_offsets` and `Source.lines` split at Python's line breaks (`\\r\\n`, `\\r`, `\\n`):
the text without a `\\r` takes a quicker path, which must give what the regular expression gives."""

from __future__ import annotations

import itertools

from anodize.language.syntax import NEWLINE, Source, line_offsets


def _texts() -> list[str]:
    out = ["".join(p) for n in range(6) for p in itertools.product("a\n\r", repeat=n)]
    return out + ["x = 1\ny = 2\n", "\n\n\n", "no break", "é\nü\r\nß\r"]


def test_line_offsets_match_the_regular_expression() -> None:
    for text in _texts():
        assert line_offsets(text) == [0, *(m.end() for m in NEWLINE.finditer(text)), len(text)], repr(text)


def test_source_lines_match_the_regular_expression() -> None:
    for text in _texts():
        assert Source(text, "m.py").lines == NEWLINE.split(text), repr(text)
    assert Source("a\rb\nc", "m.py").lines == ["a", "b", "c"]  # a lone `\r` breaks a line
