"""The range prover's closure (anodize/language/ranges.py `Prover._closure`, rows updated with
`map`) equals the textbook Floyd-Warshall, negative cycles included, entry for entry."""

from __future__ import annotations

import random

from anodize.language.ranges import ZERO, Prover


def _reference(p: Prover) -> tuple[list[list[float]], bool]:
    nodes = dict(p._closure())
    n = len(nodes)
    inf = float("inf")
    d: list[list[float]] = [[inf] * n for _ in range(n)]
    for i in range(n):
        d[i][i] = 0
    for (u, v), k in p.edges.items():
        vi, ui = nodes[v], nodes[u]
        if k < d[vi][ui]:
            d[vi][ui] = k
    for a, i in nodes.items():
        if i:
            lo, hi = p.domain(a)
            d[0][i] = min(d[0][i], hi)
            d[i][0] = min(d[i][0], -lo)
    for k in range(n):
        dk = d[k]
        for i in range(n):
            dik = d[i][k]
            if dik == inf:
                continue
            di = d[i]
            for j in range(n):
                nd = dik + dk[j]
                if nd < di[j]:
                    di[j] = nd
    return d, any(d[i][i] < 0 for i in range(n))


def test_closure_matches_floyd_warshall() -> None:
    rnd = random.Random(7)
    negative = 0
    for _ in range(600):
        atoms = [("v", str(i)) for i in range(rnd.randint(1, 8))] + [ZERO]
        edges = [(rnd.choice(atoms), rnd.choice(atoms), rnd.randint(-6, 9)) for _ in range(rnd.randint(0, 14))]
        bounds = {a: (rnd.randint(-20, 0), rnd.randint(0, 40)) for a in atoms}
        p = Prover(edges, lambda a: bounds[a])
        self_loop = p.contradiction  # (`x - x <= negative`, seen before any closure)
        p._closure()
        want, contradiction = _reference(Prover(edges, lambda a: bounds[a]))
        assert p._d == want and p.contradiction == (contradiction or self_loop)
        assert [[type(x) for x in row] for row in p._d] == [[type(x) for x in row] for row in want]
        negative += contradiction
    assert negative > 20  # negative cycles exercised


def test_closure_table_keys_on_edges_and_domains() -> None:
    """Provers of the same facts share one closure; a different domain of an atom is not the
    same closure (`x <= 5` proves `x <= 9` whatever the domain, but `x >= 0` only from it)."""
    from anodize.language import ranges

    x = ("var", "x")
    edges = [(x, ZERO, 5)]
    nonneg = Prover(edges, lambda a: (0, 100))
    signed = Prover(edges, lambda a: (-100, 100))
    assert nonneg.diff_le(ZERO, x, 0) and not signed.diff_le(ZERO, x, 0)
    again = Prover(list(reversed(edges)), lambda a: (0, 100))
    again._closure()
    assert again._d is nonneg._d  # one table entry
    # a negative cycle is remembered with the closure: the second prover of it is contradictory too
    cycle = [(x, ZERO, -1), (ZERO, x, 0)]
    p, q = Prover(cycle, lambda a: (-9, 9)), Prover(cycle, lambda a: (-9, 9))
    p._closure(), q._closure()
    assert p.contradiction and q.contradiction and not q.diff_le(x, ZERO, 100)
    ranges._CLOSURES.clear()
    fresh = Prover(edges, lambda a: (0, 100))
    fresh._closure()
    assert fresh._d == nonneg._d and fresh._d is not nonneg._d
