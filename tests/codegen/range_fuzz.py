"""Random kernels for the range-fact prover's soundness (test_ranges.py).

Each kernel guards a read `a[index]` with random comparisons over scalar
parameters `x`, `y` of one integer type, `len(a)`, the thread index and locals
(some assigned once, some reassigned), in the forms the prover reads: `if`, an
early `return`, a `range` loop.  A build with the prover's proofs must behave
exactly like a build that keeps every check, at edge values of the type.
"""

from __future__ import annotations

import random

TYPES = {"i32": (-(2**31), 2**31 - 1), "i64": (-(2**63), 2**63 - 1), "u32": (0, 2**32 - 1), "u64": (0, 2**64 - 1)}


def lin(r: random.Random, names: list[str], T: str) -> str:
    base = r.choice(names)
    k = r.choice([0, 0, 1, -1, 2, -2, 3])
    if k == 0:
        return base
    if T.startswith("u") and r.random() < 0.5:
        return f"{base} + {abs(k)}"
    return f"{base} + {k}" if k > 0 else f"{base} - {-k}"


def cmp(r: random.Random, names: list[str], T: str) -> str:
    op = r.choice(["<", "<=", ">", ">=", "==", "!="])
    return f"{lin(r, names, T)} {op} {lin(r, names, T)}"


def guard(r: random.Random, names: list[str], T: str, depth: int = 0) -> str:
    kind = r.random()
    if depth < 2 and kind < 0.3:
        return " and ".join(guard(r, names, T, depth + 1) for _ in range(r.randint(2, 3)))
    if depth < 2 and kind < 0.4:
        return "(" + " or ".join(guard(r, names, T, depth + 1) for _ in range(2)) + ")"
    if depth < 2 and kind < 0.5:
        return f"not ({guard(r, names, T, depth + 1)})"
    return cmp(r, names, T)


def gen(seed: int) -> tuple[str, str]:
    """(module source defining kernel `k`, the integer type's name)."""
    r = random.Random(seed)
    T = r.choice(list(TYPES))
    lines = []
    # names usable in integer expressions of type T
    names = ["x", "y", f"{T}(n)", f"{T}(j)"]
    body = ["    i = thread.index_1d()", "    if i not in c:", "        return", "    n = len(a)", "    j = i.get()"]
    if r.random() < 0.5:
        body.append(f"    z = {lin(r, ['x', 'y'], T)}")
        names.append("z")
    if r.random() < 0.3:
        body.append("    w = x")
        body.append(f"    w += {r.choice([1, 2])}")
        names.append("w")
    style = r.random()
    g = guard(r, names, T)
    idx = lin(r, names, T)
    if r.random() < 0.7:
        v = r.choice([nm for nm in names if "(n)" not in nm])
        k1, k2 = r.choice([0, 1, 2, -1]), r.choice([0, 1, 2, -1])
        lower = r.choice([f"{v} >= {k1}", f"{k1} <= {v}", f"{v} > {k1 - 1}", f"not ({v} < {k1})"]).replace("+ -", "- ").replace("- -", "+ ")
        nn = r.choice([f"{T}(n)", "n"])
        up = r.choice([f"{v} < {nn} - {k2}", f"{v} + {k2} < {nn}", f"{v} <= {nn} - {k2 + 1}", f"{nn} - {k2} > {v}"])
        parts = [lower, up] + ([guard(r, names, T)] if r.random() < 0.3 else [])
        r.shuffle(parts)
        g = " and ".join(f"({p})" for p in parts)
        k = r.choice([0, 1, -1, 2, -2, k2, -k1])
        idx = v if k == 0 else (f"{v} + {k}" if k > 0 else f"{v} - {-k}")
    if style < 0.6:
        body.append(f"    if {g}:")
        body.append(f"        c[i] = a[{idx}]")
    elif style < 0.8:
        body.append(f"    if not ({g}):")
        body.append("        return")
        body.append(f"    c[i] = a[{idx}]")
    else:
        body.append(f"    for q in range({T}(0), {lin(r, names, T)}):")
        names2 = names + ["q"]
        body.append(f"        if {guard(r, names2, T)}:")
        body.append(f"            c[i] = a[{lin(r, names2, T)}] + c[i]")
    src = "\n".join(
        [
            "import anodize as az",
            "from anodize import DisjointSlice, Slice, f32, i32, i64, u32, u64, kernel, launch_contract, thread",
            "",
            "",
            "@launch_contract(domain=1, block=32)",
            "@kernel",
            f"def k(a: Slice[f32], x: {T}, y: {T}, c: DisjointSlice[f32]) -> None:",
            *body,
            "",
        ]
    )
    return src, T
