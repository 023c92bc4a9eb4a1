"""az-warp-divergence: the uniform < warp-uniform < lane-varying lattice of the kernel model,
and the rule's diagnostics."""

from __future__ import annotations

import ast
from typing import Any

import pytest

from anodize.checker.api import check_source
from anodize.checker.kernel_model import ModuleModel

HEADER = (
    "import anodize as az\n"
    "from anodize import kernel, func, launch_contract, thread, Slice, DisjointSlice, f32, i32\n"
)


def _model(body: str) -> tuple[ModuleModel, ast.Module]:
    src = HEADER + body
    tree = ast.parse(src)
    return ModuleModel(tree, "<m>", src), tree


def _level(block: str, expr: str, *, helper: bool = False) -> str:
    """'uniform' | 'warp' | 'lane': the model's verdict on `expr` as the value of `probe`."""
    # a contract's block has as many entries as its domain (3-D blocks wait for `domain=3`)
    domain = block.count(",") + 1 if block.startswith("(") else 1
    deco = "@az.func" if helper else f"@launch_contract(domain={domain}, block={block})\n@kernel"
    m, tree = _model(
        f"{deco}\n"
        "def k(a: Slice[f32], n: i32) -> None:\n"
        "    with az.unsafe():\n"
        "        t = thread.tid_x()\n"
        f"        probe = {expr}\n"
    )
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "probe")
    v = m.values[node]
    return "uniform" if not v.tdep else "lane" if v.lane else "warp"


@pytest.mark.parametrize(
    ("block", "expr", "want"),
    [
        ("256", "n + 1", "uniform"),
        ("256", "thread.block_idx_x() * 2", "uniform"),
        ("256", "t // 32", "warp"),
        ("256", "thread.tid_x() // 64", "warp"),
        ("256", "t >> 5", "warp"),
        ("256", "(t // 32) * 2 + n", "warp"),
        ("256", "t // 32 == 1", "warp"),
        ("256", "a[t // 32]", "warp"),
        ("256", "az.warp.ballot(t > 3)", "warp"),
        ("256", "az.warp.any(t > 3)", "warp"),
        ("256", "t", "lane"),
        ("256", "t % 32", "lane"),
        ("256", "t // 16", "lane"),
        ("256", "t >> 4", "lane"),
        ("256", "t >> 40", "lane"),
        ("256", "(t + 1) // 32", "lane"),
        ("256", "thread.lane_id()", "lane"),
        ("256", "az.warp.shfl_down(n, 1)", "lane"),
        ("256", "a[t]", "lane"),
        ("(32, 4)", "thread.tid_y()", "warp"),
        ("(32, 4)", "thread.tid_y() + t // 32", "warp"),
        ("(16, 2, 2)", "thread.tid_z()", "warp"),
        ("(16, 2, 2)", "thread.tid_y()", "lane"),
        ("48", "t // 32", "lane"),
        ("(48, 2)", "thread.tid_y()", "lane"),
    ],
)
def test_the_lattice(block: str, expr: str, want: str) -> None:
    assert _level(block, expr) == want


def test_a_helper_knows_no_block() -> None:
    assert _level("256", "t // 32", helper=True) == "lane"


def test_values_assigned_under_control() -> None:
    m, tree = _model(
        "@launch_contract(domain=1, block=256)\n"
        "@kernel\n"
        "def k(a: Slice[f32], n: i32) -> None:\n"
        "    with az.unsafe():\n"
        "        t = thread.tid_x()\n"
        "        w = 0\n"
        "        x = 0\n"
        "        if t // 32 == 2:\n"
        "            w = 1\n"
        "        if t % 2 == 0:\n"
        "            x = 1\n"
        "        pw = w\n"
        "        px = x\n"
    )
    vals = {n.id: m.values[n] for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id in ("pw", "px")}
    assert vals["pw"].tdep and not vals["pw"].lane
    assert vals["px"].lane


def _diags(body: str) -> list[Any]:
    return [d for d in check_source(HEADER + body, "<w>") if d.code == "az-warp-divergence"]


def test_divergence_diagnostic_labels_the_condition() -> None:
    (d,) = _diags(
        "@launch_contract(domain=1, block=256)\n"
        "@kernel\n"
        "def k(c: DisjointSlice[f32]) -> None:\n"
        "    with az.unsafe():\n"
        "        v = 1.0\n"
        "        if thread.lane_id() < 8:\n"
        "            v = az.warp.shfl_down(v, 1)\n"
    )
    assert d.span.line == 9 and "lanes of a warp" in d.message
    (cond,) = d.secondary
    assert cond.span.line == 8 and "differ between the lanes" in cond.text


def test_exit_diagnostic_labels_the_return() -> None:
    (d,) = _diags(
        "@launch_contract(domain=1, block=256)\n"
        "@kernel\n"
        "def k(c: DisjointSlice[f32]) -> None:\n"
        "    i = thread.index_1d()\n"
        "    if i not in c:\n"
        "        return\n"
        "    with az.unsafe():\n"
        "        v = az.warp.shfl_down(1.0, 1)\n"
        "    c[i] = v\n"
    )
    assert d.span.line == 10
    assert d.secondary[0].span.line == 8 and "return" in d.secondary[0].text


@pytest.mark.parametrize(
    ("contract", "needle", "label_line"),
    [
        ("@launch_contract(domain=1, block=96 + 1)\n", "blocks of 97 threads", 3),
        ("", "has no launch contract", 4),
        ("@launch_contract(domain=2, block=(8, 3))\n", "blocks of 24 threads", 3),
    ],
)
def test_block_diagnostics(contract: str, needle: str, label_line: int) -> None:
    (d,) = _diags(
        contract + "@kernel\n"
        "def k(c: DisjointSlice[f32]) -> None:\n"
        "    with az.unsafe():\n"
        "        v = az.warp.shfl_down(1.0, 1)\n"
    )
    assert needle in d.message and d.help
    assert d.secondary and d.secondary[0].span.line == label_line


def test_whole_warps_pass() -> None:
    assert not _diags(
        "@launch_contract(domain=2, block=(8, 4))\n"
        "@kernel\n"
        "def k(c: DisjointSlice[f32]) -> None:\n"
        "    with az.unsafe():\n"
        "        v = az.warp.shfl_down(1.0, 1)\n"
    )


_SYNC = (
    "{contract}@kernel\n"
    "def k(c: DisjointSlice[f32]) -> None:\n"
    "    i = thread.index_1d()\n"
    "    if {test}:\n"
    "        az.warp.sync()\n"
    "    c[i] = 1.0\n"
)


@pytest.mark.parametrize(
    "contract, test, want",
    [
        ("@launch_contract(domain=1, block=64)\n", "c[i] > 0.0", "may differ between the lanes of a warp"),
        ("@launch_contract(domain=1, block=48)\n", "True", "blocks of 48 threads"),
        ("@launch_contract(domain=1, block=64)\n", "True", ""),
    ],
)
def test_warp_sync_is_a_full_warp_operation(contract: str, test: str, want: str) -> None:
    """`az.warp.sync()` waits for every lane of the warp (its declaration's `warp_wide`): under
    lane-dependent control, or in blocks that are not whole warps, it is az-warp-divergence."""
    diags = _diags(_SYNC.format(contract=contract, test=test))
    if not want:
        assert diags == []
        return
    (d,) = diags
    assert d.code == "az-warp-divergence" and want in d.message and "az.warp.sync" in d.message
