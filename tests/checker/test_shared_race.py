"""`az-shared-race`: the unsafe-tier examples pass, and deleting any of their barriers is rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from anodize.checker.api import check_source
from anodize.checker.index_forms import TX, TY, Block, Div, Lin, Mod, injective, separated

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ("transpose", "reduce_sum_unsafe", "sgemm", "sgemm_slots", "softmax_unsafe", "scan")
SYNC = "az.syncthreads()"


def _races(src: str, path: str = "m.py") -> list[int]:
    return sorted({d.span.line for d in check_source(src, path) if d.code == "az-shared-race"})


def _deletions() -> list[tuple[str, int, str]]:
    out = []
    for name in EXAMPLES:
        lines = (ROOT / "examples" / f"{name}.py").read_text().splitlines(keepends=True)
        for n, line in enumerate(lines):
            if line.strip().split("#")[0].strip() == SYNC:
                out.append((name, n + 1, "".join(lines[:n] + lines[n + 1 :])))
    return out


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_have_no_race(name: str) -> None:
    path = ROOT / "examples" / f"{name}.py"
    assert _races(path.read_text(), str(path)) == []


@pytest.mark.parametrize(("name", "line", "src"), _deletions(), ids=[f"{n}-L{ln}" for n, ln, _ in _deletions()])
def test_every_barrier_deletion_is_rejected(name: str, line: int, src: str) -> None:
    assert _races(src, f"{name}.py"), f"deleting the barrier on line {line} of {name}.py went unnoticed"


def test_there_are_seventeen_barriers() -> None:
    # sgemm's three (the first tile's, and one a step of its double-buffered round), sgemm_slots' three
    assert len(_deletions()) == 17


HEAD = """
import anodize as az
from anodize import AtomicSlice, DisjointSlice, Slice, f32, func, i32, kernel, launch_contract, thread
"""


def _kernel(body: str, block: str = "256") -> str:
    lines = "\n".join("        " + ln for ln in body.strip().splitlines())
    domain = 2 if "," in block else 1  # a 2-D block needs a 2-D contract (its tid_y range is known)
    return HEAD + f"""
@launch_contract(domain={domain}, block={block})
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    with az.unsafe():
        s = az.shared.array(512, f32)
        t = thread.tid_x()
{lines}
"""


def test_same_injective_index_is_no_race() -> None:
    assert _races(_kernel("s[t] = 1.0\ns[t] = s[t] + 2.0\naz.syncthreads()\ns[2 * t + 1] = s[2 * t + 1] * 2.0")) == []
    assert _races(_kernel("s[t] = 1.0\nv = s[2 * t + 1]")) == [13]


def test_neighbour_read_races() -> None:
    assert _races(_kernel("s[t] = 1.0\nv = s[t + 1]")) == [13]


def test_tid_x_is_not_injective_in_a_2d_block() -> None:
    assert _races(_kernel("s[t] = f32(thread.tid_y())", block="(32, 8)")) == [12]
    assert _races(_kernel("s[thread.tid_y() * 32 + t] = f32(thread.tid_y())", block="(32, 8)")) == []


def test_constant_index_written_by_every_thread_with_different_values_races() -> None:
    assert _races(_kernel("s[0] = f32(t)")) == [12]
    assert _races(_kernel("s[0] = 1.0")) == []  # the same uniform value: benign
    assert _races(_kernel("if t == 0:\n    s[0] = f32(t)\nv = s[0]")) == [14]
    assert _races(_kernel("if t == 0:\n    s[0] = f32(t)\nif t == 0:\n    v = s[0]")) == []


def test_uniform_barrier_on_one_path_does_not_separate() -> None:
    assert _races(_kernel("s[t] = 1.0\nif n > 0:\n    az.syncthreads()\nv = s[t + 1]")) == [15]
    assert _races(_kernel("s[t] = 1.0\nfor r in range(n):\n    az.syncthreads()\nv = s[t + 1]")) == [15]


def test_guard_invalidated_by_reassignment() -> None:
    ok = "m = 64\nif t < m:\n    s[t] = s[t + m]"
    assert _races(_kernel(ok)) == []
    bad = "m = n\nif t < m:\n    m = m + 1\n    s[t] = s[t + m]"
    assert _races(_kernel(bad)) == [15]


def test_helper_barrier_counts_only_on_every_path() -> None:
    src = HEAD + """
@func
def always() -> None:
    with az.unsafe():
        az.syncthreads()

@func
def sometimes(n: i32) -> None:
    with az.unsafe():
        if n > 0:
            az.syncthreads()

@launch_contract(domain=1, block=256)
@kernel
def k(n: i32) -> None:
    with az.unsafe():
        s = az.shared.array(256, f32)
        t = thread.tid_x()
        s[t] = 1.0
        always()
        v = s[(t + 1) % 256]
        sometimes(n)
        s[t] = v
"""
    assert _races(src) == [26]  # `s[t] = v` after the helper that may skip its barrier


def test_escape_is_reported() -> None:
    src = _kernel("x = (s, t)\ns[t] = 1.0")
    assert [d.code for d in check_source(src, "m.py") if d.code == "az-shared-race"]


def test_index_forms() -> None:
    b = Block.of((256,))
    x = Lin.make({TX: 1})
    s = Lin.sym("s")
    guard = (("hi", TX, s - Lin((), 1)),)
    assert separated(x, guard, x + s, guard, b)
    assert not separated(x, (), x + s, guard, b)
    assert injective((x,), (), (), b)
    assert not injective((x,), (), (), Block.of((32, 8)))
    assert injective((Lin.make({TY: 1}), x), (), (), Block.of((32, 8)))
    lane0 = (("mod", TX, 32, 0),)
    assert injective((Div(x, 32),), lane0, lane0, b)
    assert not injective((Div(x, 32),), (), (), b)
    assert injective((Mod(x, 256),), (), (), b)
    assert not injective((Mod(x, 32),), (), (), b)


def test_strided_loops_write_each_thread_its_own_residue() -> None:
    ok_while = "j = t\nwhile j < 512:\n    s[j] = f32(j)\n    j += 256\naz.syncthreads()\nv = s[(t + 1) % 512]"
    assert _races(_kernel(ok_while)) == []
    ok_for = "for j in range(t, 512, 256):\n    s[j] = s[j] + 1.0"
    assert _races(_kernel(ok_for)) == []
    too_small = "for j in range(t, 512, 128):\n    s[j] = f32(j)"  # 256 threads, stride 128: j collide
    assert _races(_kernel(too_small)) == [13]
    neighbour = "j = t\nwhile j < 512:\n    s[j] = s[j + 1]\n    j += 256"
    assert _races(_kernel(neighbour)) == [14]


def test_dynamic_arrays_share_one_region() -> None:
    base = "d = az.shared.array(0, f32)\ne = az.shared.array(0, f32)\n"
    assert _races(_kernel(base + "d[t] = 1.0\nv = e[t + 1]")) == [15]  # `e` is `d`
    assert _races(_kernel(base + "d[t] = 1.0\nv = e[t]")) == []
    mixed = "d = az.shared.array(0, f32)\ne = az.shared.array(0, i32)\nd[t] = 1.0\nw = e[t]"
    assert _races(_kernel(mixed)) == [15]  # different element sizes over the same bytes
    assert _races(_kernel("d = az.shared.array(64, f32)\nd[t % 64] = f32(t)\nv = s[t]")) == [13]  # 4 threads per element
    assert _races(_kernel("d = az.shared.array(256, f32)\nd[t] = f32(t)\nv = s[t + 1]")) == []  # another array


# ---- machine integers ------------------------------------------------------------------------


def test_injective_only_while_differences_stay_below_2_to_32() -> None:
    b = Block.of((256,))
    assert injective((Lin.make({TX: 1 << 22}),), (), (), b)  # wraps in i32, but stays distinct
    assert not injective((Lin.make({TX: 1 << 32}),), (), (), b)  # 0 modulo 2**32 for every thread
    assert not injective((Lin.make({TY: 1 << 32, TX: 1}),), (), (), Block.of((16, 16)))


def test_separation_needs_exact_values_or_a_span_below_2_to_32() -> None:
    b = Block.of((256,))
    x, s = Lin.make({TX: 1}), Lin.make({"s": 1})
    guard = (("hi", TX, s + Lin((), -1)),)
    assert separated(x, guard, x + s, (), b, True)  # both exact or out of bounds
    assert not separated(x, guard, x + s, (), b, False)  # `u32(t) + s` may wrap onto [0, s)
    big = Lin((), 1 << 32)
    assert separated(x, (), x + Lin((), 256), (), b, False)  # the whole span is 512 wide
    assert not separated(x, (), x + big, (), b, False)  # t + 2**32 is t again


def _src(body: str, params: str = "", block: str = "256") -> str:
    lines = "\n".join("        " + ln for ln in body.strip().splitlines())
    return HEAD + f"""
@launch_contract(domain=1, block={block})
@kernel
def k(c: DisjointSlice[f32]{params}) -> None:
    i = thread.index_1d()
    with az.unsafe():
        s = az.shared.array(512, f32)
        t = thread.tid_x()
{lines}
    if i in c:
        c[i] = 1.0
"""


def test_wrapping_products_and_casts_race() -> None:
    assert _races(_src("s[t * 65536 * 65536] = f32(t)"))
    assert _races(_src("s[az.i32(az.i64(t) * 4294967296)] = f32(t)"))
    assert _races(_src("s[t] = f32(t)\nv = s[az.i32(az.i64(t) + 4294967297)]"))
    assert not _races(_src("s[t] = f32(t)\nv = s[az.i32(az.i64(t) + 256)]"))
    assert not _races(_src("s[t * 2] = f32(t)"))


def test_unsigned_guards_give_no_facts() -> None:
    racy = "d = az.u32(t) - az.u32(1)\nif d < 127:\n    s[t] = f32(t)\nelse:\n    s[t + 127] = f32(t)"
    safe = "d = az.u32(t) + az.u32(1)\nif d <= 128:\n    s[t] = f32(t)\nelse:\n    s[t + 128] = f32(t)"
    assert _races(_src(racy))
    assert not _races(_src(safe))


def test_both_sides_of_an_if_are_compared() -> None:
    racy = "if t < 128:\n    s[t] = 1.0\nelse:\n    s[t - 127] = 2.0"
    safe = "if t < 128:\n    s[t] = 1.0\nelse:\n    s[t + 128] = 2.0"
    assert _races(_src(racy))
    assert not _races(_src(safe))


def test_a_helper_value_returned_under_divergence_is_thread_dependent() -> None:
    helper = """
@func
def pick(c: DisjointSlice[f32]) -> i32:
    i = thread.index_1d()
    if i in c:
        return 7
    return 5
"""
    src = _src("n = pick(c)\nv = f32(0.0)\nif t < n:\n    s[t] = f32(t)\n    v = s[t + n]")
    assert _races(src + helper)
    uniform = helper.replace("    if i in c:\n        return 7\n", "")
    assert not _races(src + uniform)
