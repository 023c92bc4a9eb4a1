"""The compile gate of one kernel checks that kernel's slice of its module (checker/kernel_slice.py,
issue 34 item 5): the errors it reports for the kernel are the errors `anodize check` of the whole
module reports inside the kernel, its contract and its helpers (`api.kernel_errors`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "bench"))

from budgets import quick_and_full  # noqa: E402
from check_throughput import generate  # noqa: E402
from kernelgen import RandomChooser, gen_module  # noqa: E402

from anodize.checker import api, kernel_slice  # noqa: E402
from anodize.language.front import front_for_source  # noqa: E402


def _key(diags: list) -> list[tuple[str, int, int, str]]:
    return sorted((d.code, d.span.line, d.span.col, d.message) for d in diags)


def _same_gate(src: str, path: str) -> int:
    """Every kernel of `src`: the slice's errors are the whole module's; the number of slices."""
    full = api.analyze_source(src, path)
    if full.model is None:
        return 0
    front = full.model.front
    n = 0
    for fdef in front.kernels():
        sliced = kernel_slice.slice_analysis(front, fdef)
        if sliced is None:  # nothing to leave out: the gate checks the module whole
            continue
        analysis, mine = sliced
        assert _key(api.kernel_errors(analysis, mine)) == _key(api.kernel_errors(full, fdef)), (fdef.name, src)
        n += 1
    return n


@pytest.mark.parametrize("modules", quick_and_full(40, 400))
def test_slices_report_what_the_whole_module_reports(modules: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Generated modules (tools/kernelgen.py, one in three with a construct outside the
    language), every module sliced (`SLICE_FROM` 0)."""
    monkeypatch.setattr(kernel_slice, "SLICE_FROM", 0)
    kernels = 0
    for seed in range(9100, 9100 + modules):
        kernels += _same_gate(gen_module(RandomChooser(seed), outside=seed % 3 == 0), f"/gen/slice_{seed}.py")
    assert kernels > modules // 4  # the share exercised slices


def test_a_kernel_dense_module(tmp_path: Path) -> None:
    """bench/check_throughput.py's kernels in one module (shared helpers, races, host launches):
    each kernel's slice keeps its helpers and their callers and nothing else, line for line."""
    generate(tmp_path, 600, lines_per_file=600)
    path = next(tmp_path.rglob("*.py"))
    src = path.read_text()
    assert _same_gate(src, str(path)) >= 40
    front = front_for_source(src, str(path))
    fdef = next(f for f in front.kernels() if f.name == "helper_user_1")
    text = kernel_slice.kernel_slice(front, fdef)
    assert text is not None and text.count("\n") == src.count("\n")
    kept = {ln.split("(")[0][4:] for ln in text.splitlines() if ln.startswith("def ")}
    assert kept == {"put_1", "helper_user_1"}
    assert all(a == b for a, b in zip(text.splitlines(), src.splitlines()) if a)


def test_small_modules_are_checked_whole() -> None:
    src = (ROOT / "examples" / "vecadd.py").read_text()
    front = front_for_source(src, "vecadd.py")
    assert kernel_slice.kernel_slice(front, front.kernels()[0]) is None


@pytest.mark.parametrize("stride", quick_and_full(5, 1))
def test_every_fixture_and_example(stride: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every module of fixtures/ and examples/ (every fifth in the default run) sliced
    (`SLICE_FROM` 0): the same gate errors."""
    from anodize.language.syntax import read_source

    monkeypatch.setattr(kernel_slice, "SLICE_FROM", 0)
    slices = 0
    for f in sorted([*ROOT.glob("fixtures/*/*.py"), *ROOT.glob("examples/*.py")])[::stride]:
        try:
            src = read_source(f)
        except (OSError, SyntaxError, UnicodeDecodeError):  # the fixtures of unreadable files
            continue
        slices += _same_gate(src, str(f))
    assert slices > 250 // stride  # (368 slices in all at 264 modules; every fifth module holds 59-60 of them)


def _dense_module(tmp_path: Path) -> Path:
    generate(tmp_path, 600, lines_per_file=600)
    return next(tmp_path.rglob("*.py"))


def test_compile_of_one_kernel_fronts_its_slice(tmp_path: Path) -> None:
    """`anodize compile FILE:KERNEL` of a large module fronts, types and checks the kernel's
    slice (the stand-in carries the slice's front), and lowers what the whole module lowers."""
    from anodize.kernel import source_kernels
    from anodize.language.front import front_of_function, stand_in_function

    path = _dense_module(tmp_path)
    src = path.read_text()
    kernels = source_kernels(path, "helper_user_1")
    assert list(kernels) == ["helper_user_1"]
    k = kernels["helper_user_1"]
    front = front_of_function(k.fn)
    assert front.source != src and front.source.count("\n") == src.count("\n")
    assert {q for q, _ in front.functions()} == {"put_1", "helper_user_1"}
    whole = front_for_source(src, str(path))
    fdef = next(f for f in whole.kernels() if f.name == "helper_user_1")
    from anodize.kernel import Kernel

    from_whole = Kernel(stand_in_function(whole, "helper_user_1", fdef))
    assert k.compile(arch="sm_90").ptx == from_whole.compile(arch="sm_90").ptx
    for name in ("put_1", "nonesuch"):  # a helper, no function: the module's kernels (the CLI lists them)
        listed = source_kernels(path, name)
        assert "helper_user_1" in listed and name not in listed and set(listed.values()) == {None}


def test_compile_of_one_kernel_refuses_what_check_reports_in_its_slice(tmp_path: Path) -> None:
    """An error in the kernel's helper stops its compile with the diagnostic `anodize check`
    gives; an error in a function it does not depend on does not (as the gate of the whole
    module); a syntax error anywhere in the file stops it (the file is parsed whole)."""
    from anodize.kernel import source_kernels
    from anodize.language.diagnostics import CheckError

    path = _dense_module(tmp_path)
    src = path.read_text()
    bad_helper = src.replace("def put_1(out: DisjointSlice[f32], i: Index1D, v: f32) -> None:\n    if i in out:\n        out[i] = v",
                             "def put_1(out: DisjointSlice[f32], i: Index1D, v: f32) -> None:\n    out[i + 1] = v", 1)
    assert bad_helper != src
    path.write_text(bad_helper)
    full = api.analyze_source(bad_helper, str(path))
    whole = api.kernel_errors(full, next(f for f in full.model.front.kernels() if f.name == "helper_user_1"))
    assert [d.code for d in whole] == ["az-disjoint-index"]
    with pytest.raises(CheckError) as e:
        source_kernels(path, "helper_user_1")["helper_user_1"].compile(arch="sm_90")
    assert _key(e.value.diagnostics) == _key(whole)
    source_kernels(path, "vecadd_0")["vecadd_0"].compile(arch="sm_90")  # the helper is not its
    path.write_text(src + "\ndef broken(:\n")
    with pytest.raises(CheckError) as e:
        source_kernels(path, "vecadd_0")
    assert [d.code for d in e.value.diagnostics] == ["az-syntax"]
