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
        self_loop = any(u == v and k < 0 for u, v, k in edges)  # (`x - x <= negative`: no edge of the closure)
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


def test_bindings_from_statements_match_the_full_walk() -> None:
    """`bindings` reads only the statements' targets when the body's text rules out walrus and
    comprehension targets; the counts equal the walk of every node, and any `:=` or extra
    `for` (a comprehension, or a word holding it) takes the walk."""
    import ast

    from anodize.language import binding_counts as ranges
    from anodize.language.syntax import Source

    bodies = [
        "x = 1\n    y, (z, *w) = x, (1, 2, 3)\n    x += 1\n    q: int\n    r: int = 2\n    del r\n    a.b = 3\n    s[i] = 4",
        "for i in range(n):\n        for j, k in p:\n            t = i\n    else:\n        t = 0\n    with m as (u, v), o:\n        pass",
        "def inner(k):\n        k = 2\n        return k\n    class C:\n        z = 1\n    try:\n        e = 1\n    except E as err:\n        e = 2\n    finally:\n        f = 0",
        "x = [i for i in range(3)]",  # a comprehension binds `i`
        "y = (x := 3) + x",  # a walrus binds `x`
        "info = format(a)\n    for i in a:\n        info = i",  # `for` inside `format`: the full walk
        "while (n := n - 1) > 0:\n        pass",
    ]
    fast = 0
    for body in bodies:
        text = f"def f(n, a, p, m, o, s, i):\n    {body}\n"
        fdef = ast.parse(text).body[0]
        assert isinstance(fdef, ast.FunctionDef)
        got = ranges.bindings(fdef, ranges.body_text(Source(text, "t.py"), fdef))
        assert got == ranges.bindings(fdef), body
        if ":=" not in body and ranges.statement_bindings(fdef, body.count("for")) is not None:
            fast += 1
    assert fast == 3  # the first three bodies take the statements' path
