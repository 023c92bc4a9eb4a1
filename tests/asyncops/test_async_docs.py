"""The kernels the async documentation defines (docs/async.md, README's async section) pass
`anodize check`, and a contract's `outputs=` in them is read as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from anodize.checker.api import check_source

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _kernel_blocks() -> list[tuple[str, str]]:
    out = []
    for doc in ("docs/async.md", "README.md"):
        for k, code in enumerate(BLOCK.findall((ROOT / doc).read_text(encoding="utf-8"))):
            if "outputs=" in code and "kernel" in code:
                out.append((f"{doc}#{k}", code))
    return out


def test_there_are_documented_output_contracts() -> None:
    assert len(_kernel_blocks()) >= 2


@pytest.mark.parametrize(("where", "code"), _kernel_blocks(), ids=[w for w, _ in _kernel_blocks()])
def test_documented_kernel_checks(where: str, code: str) -> None:
    source = "import anodize as az\n" + code
    errors = [d for d in check_source(source, where) if d.severity == "error"]
    assert not errors, "\n".join(str(d) for d in errors)
