"""Ignore comments: `# anodize: ignore[az-x]` and mypy's `# type: ignore[az-x]` (one reading,
shared by the engine and the mypy plugin; a module of its own so that the plugin reads
them without loading the rule engine, which runs in a worker process)."""

from __future__ import annotations

import io
import re
import tokenize

__all__ = ["anodize_ignored_codes", "anodize_ignores", "ignored_codes"]

# `# anodize: ignore[az-x]`, and mypy's `# type: ignore[az-x]` (the codes are shared)
_IGNORE = re.compile(r"#\s*(?:anodize|type):\s*ignore\[([^\]]*)\]")

# an anodize ignore comment, bare or with codes (mypy's `# type: ignore[...]` is mypy's business)
_ANODIZE_IGNORE = re.compile(r"#\s*anodize:\s*ignore\b(?:\[([^\]]*)\])?")


def ignored_codes(line: str) -> set[str]:
    """The codes the ignore comments on this line of source name (the engine's and the
    mypy plugin's one reading of them)."""
    if "ignore[" not in line:
        return set()
    return {c.strip() for m in _IGNORE.finditer(line) for c in m.group(1).split(",") if c.strip()}


def anodize_ignored_codes(line: str) -> set[str]:
    """The codes `# anodize: ignore[...]` on this line names (not mypy's `# type: ignore`,
    which mypy applies itself: the plugin reads only these)."""
    return {c.strip() for m in _ANODIZE_IGNORE.finditer(line) for c in (m.group(1) or "").split(",") if c.strip()}


def anodize_ignores(source: str) -> list[tuple[int, int, int, list[str]]]:
    """Every `# anodize: ignore[...]` in a comment (not in a string): (line, start col,
    end col, the codes it names; empty for a bare one)."""
    if not _ANODIZE_IGNORE.search(source):
        return []
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.COMMENT:
                continue
            for m in _ANODIZE_IGNORE.finditer(tok.string):
                codes = [c.strip() for c in (m.group(1) or "").split(",") if c.strip()]
                found.append((tok.start[0], tok.start[1] + m.start(), tok.start[1] + m.end(), codes))
    except (tokenize.TokenError, SyntaxError):  # the module parsed, so this is not expected
        return found
    return found
