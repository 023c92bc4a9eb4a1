"""The checker's fast paths give libcst's own answers: the batched walk visits in libcst's
order, `QualifiedNames` records QualifiedNameProvider's names, `Positions` gives
PositionProvider's ranges, and the mypy plugin loads without the runtime or NumPy."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from libcst import BatchableCSTVisitor
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

from anodize.checker.positions import Positions
from anodize.checker.walk import QualifiedNames, Wrapper, walk_batched

REPO = Path(__file__).resolve().parents[2]
NODE_NAMES = [n for n, c in vars(cst).items() if inspect.isclass(c) and issubclass(c, cst.CSTNode)]

TRICKY = [
    # CRLF line ends, a tab-indented body, a continuation line, a header comment
    "# header\r\nx = (1,\r\n     2)\r\n\r\ndef f():\r\n\treturn x  # c\r\n",
    # repeated identical statements (a statement's text is not unique in the source)
    "x = 1\n\nx = 1\ndef g():\n    return 1\nx = 1\n",
    # f-strings with and without a format spec, decorators, a class, strings over lines
    'import anodize as az\n\n@az.kernel\ndef k(a):\n    """doc\n    more"""\n'
    '    y = f"{a!r:>{3}} {a}"\n    return None\n\nclass C:\n    @staticmethod\n    def m(): pass\n',
]


def _sources() -> list[tuple[str, str]]:
    files = sorted(REPO.glob("fixtures/**/*.py")) + [REPO / "checker" / "walk.py", REPO / "checker" / "engine.py"]
    return [(str(p), p.read_text(encoding="utf-8")) for p in files] + [(f"tricky{i}", s) for i, s in enumerate(TRICKY)]


class _Log(BatchableCSTVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, str, int]] = []

    def get_visitors(self):  # type: ignore[no-untyped-def,override]
        out = {}
        for n in NODE_NAMES:
            out["visit_" + n] = lambda node, n=n: self.log.append(("visit", n, id(node)))
            out["leave_" + n] = lambda node, n=n: self.log.append(("leave", n, id(node)))
        return out


@pytest.mark.parametrize("path,source", _sources(), ids=lambda v: Path(v).name if "/" in v else v[:12])
def test_walk_batched_matches_libcst_visit_order(path: str, source: str) -> None:
    module = cst.parse_module(source)
    want, got = _Log(), _Log()
    cst.visit_batched(module, [want])
    assert walk_batched(module, [got])
    assert got.log == want.log


@pytest.mark.parametrize("path,source", _sources(), ids=lambda v: Path(v).name if "/" in v else v[:12])
def test_positions_and_qualified_names_match_libcst(path: str, source: str) -> None:
    module = cst.parse_module(source)
    full = MetadataWrapper(module, unsafe_skip_copy=True)
    ranges = full.resolve(PositionProvider)
    names = full.resolve(QualifiedNameProvider)
    pos = Positions(module, source)
    pos.enter(len(module.body) // 2)  # a walk's hint must never change an answer
    for node, r in ranges.items():
        if node is not module:
            assert pos[node] == r, type(node).__name__
    ours = Wrapper(module, unsafe_skip_copy=True).resolve(QualifiedNames)
    assert set(ours) == set(names)
    for node, lazy in names.items():
        want = lazy() if callable(lazy) else lazy
        mine = ours[node]
        assert (mine() if callable(mine) else mine) == want


def test_mypy_plugin_loads_without_runtime_or_numpy() -> None:
    code = (
        "import sys, anodize.checker.mypy_plugin\n"
        "bad = [m for m in ('numpy', 'anodize.runtime') if m in sys.modules]\n"
        "assert not bad, bad\n"
        "import anodize\n"
        "assert anodize.LaunchConfig.__module__ == 'anodize.runtime.config'\n"
        "from anodize import device, Buffer\n"
        "assert 'numpy' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
