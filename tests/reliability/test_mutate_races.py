"""Racy mutants of the shared-memory kernels (tools/mutate_races.py): the checker rejects them."""

from __future__ import annotations

from collections import Counter

from mutate_races import CLASSES, ROOT, mutants, run, shared_paths


def test_a_share_of_the_racy_mutants_is_rejected() -> None:
    """A third of the mutants, sampled (the whole run: `python tools/mutate_races.py`)."""
    rep = run(shared_paths(), share=0.35, seed=7)
    r = rep["race"]
    assert rep["files"] >= 8 and not rep["files_skipped_not_accepted"]
    assert r["total"] >= 20
    assert r["survivors"] == [], r["survivors"]
    assert r["rate"] == 1.0


def test_every_class_has_mutants() -> None:
    per = Counter(m.cls for p in shared_paths() for m in mutants(p))
    assert set(per) == set(CLASSES), per
    assert sum(per.values()) >= 80


def test_mutants_are_modules_that_differ_from_the_source() -> None:
    p = ROOT / "fixtures" / "accept" / "unsafe_shared_reduce.py"
    src = p.read_text()
    ms = mutants(p)
    assert ms
    for m in ms:
        assert m.source != src
        compile(m.source, m.cls, "exec")
    factor = next(m for m in ms if m.cls == "factor")
    assert "buf[az.i32((t) * 65536 * 65536)] = v" in factor.source
    guard = next(m for m in ms if m.cls == "unsigned_guard")
    assert "_mut_d = az.u32(t) - az.u32(1)" in guard.source and "buf[t + 1] = v" in guard.source


def test_each_class_is_caught_for_its_own_reason() -> None:
    from anodize.checker.api import check_source

    want = {"helper_barrier": "az-barrier-divergence"}
    p = ROOT / "fixtures" / "accept" / "unsafe_shared_reduce.py"
    for m in mutants(p):
        codes = {d.code for d in check_source(m.source, str(p))}
        assert want.get(m.cls, "az-shared-race") in codes, (m.cls, m.line, codes)
