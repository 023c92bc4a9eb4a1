"""`CheckError` renders its text on first use (the typer raises one per failing kernel, and
`anodize check` reads only the diagnostics): the text, `args`, `repr` and a pickled copy are
what the eager rendering gave."""

from __future__ import annotations

import pickle
import traceback

from anodize.language.diagnostics import CheckError, Diagnostic, Span, render_full


def _error() -> CheckError:
    span = Span("k.py", 2, 4, 2, 9)
    return CheckError([Diagnostic("az-shared-race", "a race", span, help="add a barrier")], {"k.py": "x = 1\n    y = z\n"})


def test_the_text_is_the_full_rendering() -> None:
    e = _error()
    text = render_full(e.diagnostics, {"k.py": "x = 1\n    y = z\n"})
    assert "error[az-shared-race]: a race" in text and "y = z" in text
    assert str(e) == text
    assert e.args == (text,)
    assert repr(e) == f"CheckError({text!r})"
    assert traceback.format_exception_only(type(e), e)[-1].rstrip("\n").endswith(text.splitlines()[-1])


def test_a_pickled_error_keeps_its_diagnostics() -> None:
    e = pickle.loads(pickle.dumps(_error()))
    assert isinstance(e, CheckError)
    assert [d.code for d in e.diagnostics] == ["az-shared-race"]
    assert "error[az-shared-race]: a race" in str(e)

