"""The checker and the compiler never crash on generated kernels (tools/kernelgen.py).

Hypothesis cases through `check_source` (a third just outside the subset): 60 in the
default run (`ANODIZE_FUZZ_BUDGET=N` sets another number), 2,000 under `-m slow`;
then a fixed sample of accepted modules through the real compile path
(`kernel.compile("sm_90")` with ptxas, and the CPU backend): 10 modules by default,
30 under `-m slow` (tests/budgets.py).
"""

from __future__ import annotations

import pytest
from budgets import fuzz_budget, quick_and_full
from fuzz import check_case, compile_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernelgen import OUTSIDE_KINDS, HypothesisChooser, RandomChooser, gen_module

from anodize.language.diagnostics import CheckError

SETTINGS = settings(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

COUNTS = {"accepted": 0, "rejected": 0}


@pytest.mark.parametrize("examples", quick_and_full(fuzz_budget(60), 2000))
def test_checker_never_crashes(examples: int) -> None:
    @settings(SETTINGS, max_examples=examples)
    @given(st.data(), st.integers(0, 2))
    def one(data: st.DataObject, which: int) -> None:
        src = gen_module(HypothesisChooser(data), outside=which == 0)
        ok, diags = check_case(src)  # raises only on a checker crash
        COUNTS["accepted" if ok else "rejected"] += 1
        if not ok:
            assert diags and all(d.message and d.span.path for d in diags)

    before = sum(COUNTS.values())
    one()
    assert sum(COUNTS.values()) - before >= examples  # the budget really ran


def test_generator_reaches_both_sides() -> None:
    """The generator is not degenerate: most inside programs are accepted, outside ones mostly not."""
    inside = [check_case(gen_module(RandomChooser(s)))[0] for s in range(60)]
    outside = [check_case(gen_module(RandomChooser(s), outside=True))[0] for s in range(60)]
    assert sum(inside) >= 30
    assert sum(outside) <= 20


@pytest.mark.parametrize("kind", OUTSIDE_KINDS)
def test_each_outside_kind_is_handled(kind: str) -> None:
    from kernelgen import _inject

    for seed in range(3):
        src = _inject(gen_module(RandomChooser(seed)), RandomChooser(seed), kind)
        check_case(src)


COMPILE_SEEDS = [s for s in range(400) if s % 3][:160]


@pytest.mark.parametrize("modules", quick_and_full(10, 30))
def test_accepted_modules_compile_or_raise_check_error(modules: int) -> None:
    """Real compile path on a sample: only success or CheckError, never an internal error or ptxas rejection."""
    compiled = 0
    outcomes: list[str] = []
    for seed in COMPILE_SEEDS:
        src = gen_module(RandomChooser(seed))
        ok, _ = check_case(src)
        if not ok:
            continue
        outcomes += compile_case(src)
        compiled += 1
        if compiled >= modules:
            break
    assert compiled >= modules
    assert outcomes.count("ok") >= modules, outcomes  # most compile for both targets


def test_check_error_is_what_compile_raises_for_keyword_calls() -> None:
    src = (
        "from anodize import DisjointSlice, i64, kernel, launch_contract, thread\n"
        "@launch_contract(domain=1, block=32)\n@kernel\n"
        "def kern(out: DisjointSlice[i64]) -> None:\n"
        "    i = thread.index_1d()\n"
        "    if i in out:\n"
        "        out[i] = min(a=1, b=2)\n"
    )
    ok, diags = check_case(src)
    assert not ok and {d.code for d in diags} == {"az-unsupported"}
    with pytest.raises(CheckError):
        from fuzz import load_module

        load_module(src).kern.compile("sm_90")
