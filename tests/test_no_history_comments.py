"""The product's comments and docstrings say what the code does, not which issue added it: a
reader of anodize/, checker/, codegen/ or runtime/ finds no "issue N" history notes."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HISTORY = re.compile(r"\b[Ii]ssue \d+|ADDED for")


def test_no_issue_history_in_the_product() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for folder in ("anodize", "checker", "codegen", "runtime")
        for p in sorted((ROOT / folder).rglob("*.py"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not found, "history notes (say what the code does instead):\n" + "\n".join(found)
