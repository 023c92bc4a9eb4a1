"""The shared fixture-expectation harness (used by the checker and the mypy plugin tests).

A fixture marks each expected diagnostic on its line with `# E: az-code` (several
codes: `# E: az-alias, az-no-contract`).  `expectations(path)` returns the
`(line, code)` set; `fixture_files()` lists every fixture under fixtures/.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"

_MARK = re.compile(r"#\s*E:\s*(.*)$")
_CODE = re.compile(r"az-[a-z][a-z0-9-]*")


def expectations_from_source(source: str) -> set[tuple[int, str]]:
    """`(line, code)` for each `# E: az-code` in a comment (text inside strings is ignored)."""
    out: set[tuple[int, str]] = set()
    try:
        comments = [
            (tok.start[0], tok.string)
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT
        ]
    except (tokenize.TokenError, SyntaxError):  # not valid Python: fall back to plain lines
        comments = list(enumerate(source.splitlines(), start=1))
    for lineno, text in comments:
        m = _MARK.search(text)
        if m:
            for code in _CODE.findall(m.group(1)):
                out.add((lineno, code))
    return out


def expectations(path: str | Path) -> set[tuple[int, str]]:
    return expectations_from_source(Path(path).read_text(encoding="utf-8"))


def fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*.py") if "__pycache__" not in p.parts)
