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


def test_each_v1_class_is_caught_for_its_own_reason() -> None:
    """The v1 features' classes (tools/mutate_races_v1.py): each mutant is rejected with the
    code of the rule that owns its race (grid_stride_exit and range_exit were accepted before
    the red-team fixes)."""
    from anodize.checker.api import check_source
    from mutate_races_v1 import CLASSES as V1

    want = {
        "safe_read_next": "az-shared-race",
        "leader_widen": "az-disjoint-index",
        "barrier_leader": "az-barrier-divergence",
        "grid_stride_exit": "az-disjoint-index",
        "range_exit": "az-shared-race",
        "tile_mixed": "az-disjoint-index",
        "slot_one_path": "az-shared-race",
        "witness_falls_off": "az-type",
        "slot_stride": "az-shared-race",
    }
    assert set(want) == set(V1)
    seen: Counter[str] = Counter()
    for p in shared_paths():
        for m in mutants(p):
            if m.cls not in want or seen[m.cls] >= 3:
                continue
            seen[m.cls] += 1
            codes = {d.code for d in check_source(m.source, str(p))}
            assert want[m.cls] in codes, (m.cls, m.path, m.line, codes)
    assert set(seen) == set(want), seen
