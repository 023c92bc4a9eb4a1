"""The tile kernels of docs/language.md ("Tile kernels") and docs/tiles.md, as written there:
`anodize check` accepts each block, every kernel in it types, and the kernels of docs/tiles.md
take the register plan they are shown under (codegen/tile/rows_plan.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from anodize.codegen.tile.rows import row_plan
from anodize.language.front import front_for_source
from checker.api import check_source

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_LAUNCH = re.compile(r"^\w+\[az\.LaunchConfig.*$", re.M)  # a launch of names the block leaves to the reader


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end >= 0 else len(text)]


def _blocks() -> list[tuple[str, str]]:
    lang = _section((ROOT / "docs" / "language.md").read_text(), "## Tile kernels")
    tiles = (ROOT / "docs" / "tiles.md").read_text()
    out = [("language.md", b) for b in _BLOCK.findall(lang)] + [("tiles.md", b) for b in _BLOCK.findall(tiles)]
    return [(doc, _LAUNCH.sub("", b)) for doc, b in out if "@az.tile_kernel" in b]


def test_the_docs_have_tile_kernel_blocks() -> None:
    docs = [d for d, _ in _blocks()]
    assert docs.count("language.md") >= 2 and docs.count("tiles.md") >= 1


@pytest.mark.parametrize("doc, src", _blocks(), ids=lambda v: v if v.endswith(".md") else "")
def test_doc_tile_kernels_check_and_type(doc: str, src: str) -> None:
    diags = check_source(src, f"<{doc}>")
    assert not diags, [d.message for d in diags]
    front = front_for_source(src, f"<{doc}>")
    kernels = list(front.kernels())
    assert kernels
    for fdef in kernels:
        spec = tuple((a.arg, 256) for a in fdef.args.args if "Constant" in ast_text(a.annotation))
        t = front.typed(fdef, spec)
        assert t.ir is not None, (fdef.name, [d.message for d in t.diagnostics])
        if doc == "tiles.md":
            assert row_plan(t.ir, 256) is not None, fdef.name


def ast_text(node: object) -> str:
    import ast

    return ast.unparse(node) if isinstance(node, ast.AST) else ""
