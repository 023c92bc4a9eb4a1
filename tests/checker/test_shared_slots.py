"""Multi-slot ownership of safe shared memory (checker/shared_slots.py): the notes that say why
a slot set is refused, the agreement of two slot sets of one array, a helper's block taken from
its callers, and the compile gate refusing what `anodize check` refuses, with the same code and line."""

from __future__ import annotations

import pytest

from anodize.checker.api import check_source
from anodize.checker.shared_slots import Slots, compatible, owner_map

HEAD = """import anodize as az
from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, f32, func, i32, kernel, launch_contract, thread

BLOCK = 128
"""


def _kernel(body: str, block: str = "BLOCK", params: str = "a: Slice[f32], c: DisjointSlice[f32]", domain: int = 1) -> str:
    lines = "\n".join("    " + ln for ln in body.strip().splitlines())
    return HEAD + f"\n@launch_contract(domain={domain}, block={block})\n@kernel\ndef k({params}) -> None:\n    w = thread.index_in_block()\n{lines}\n"


def _errors(src: str) -> list[tuple[int, str, str]]:
    out = []
    for d in check_source(src, "m.py"):
        if d.severity == "error":
            out.append((d.span.line, d.code, " ".join(d.notes)))
    return out


@pytest.mark.parametrize(
    ("body", "note"),
    [
        ("s = az.shared.array(512, f32)\nfor j in range(4):\n    s[w + j * 64] = 1.0", "thread 0 at j = 1 and thread 64 at j = 0 both reach slot [64]"),
        ("s = az.shared.array(512, f32)\nfor j in range(5):\n    s[w + j * BLOCK] = 1.0", "the slots reach index 639, past the end of the array (512)"),
        ("s = az.shared.array(513, f32)\nfor j in range(4):\n    s[w + j * BLOCK + 1] = 1.0", "offset by 1"),
        ("s = az.shared.array(512, f32)\nfor j in range(1, 4):\n    s[w + j * BLOCK] = 1.0", "`range(1, 4)` is not a range from 0"),
        ("s = az.shared.array(512, f32)\nfor j in range(4):\n    s[w + j * az.u8(BLOCK)] = 1.0", None),
        ("s = az.shared.array(512, f32)\nfor j in range(4):\n    s[w * j + j] = 1.0", "multiplies two varying values"),
        ("s = az.shared.array(512, f32)\nfor j in range(4):\n    s[j * BLOCK] = 1.0", "does not depend on the thread's slot"),
        ("s = az.shared.array(512, f32)\nfor j in range(4):\n    s[w + j * 65536 * 65536 * 128] = 1.0", "reaches 2**31 or more, so it may wrap"),
    ],
)
def test_a_refused_slot_set_says_why(body: str, note: str | None) -> None:
    errs = _errors(_kernel(body))
    assert len(errs) == 1 and errs[0][1] == "az-shared-race", errs
    if note is not None:
        assert note in errs[0][2], errs[0][2]


def test_narrow_loop_variable_may_wrap() -> None:
    src = _kernel("s = az.shared.array(512, f32)\nfor j in range(az.u8(4)):\n    s[w + j * BLOCK] = 1.0")
    errs = _errors(src)
    assert [e[1] for e in errs] == ["az-shared-race"], errs


def test_slot_sets_of_one_ownership_meet_only_in_one_thread() -> None:
    src = _kernel(
        "s = az.shared.array(512, f32)\ns[w] = 1.0\nfor j in range(4):\n    s[w + j * BLOCK] += s[w + j * BLOCK]\n"
        "v = s[w]\naz.syncthreads()\nx = s[511 - w.get()]"
    )
    assert _errors(src) == []


def test_slot_sets_of_two_ownerships_race() -> None:
    src = _kernel("s = az.shared.array(512, f32)\nfor j in range(4):\n    s[w * 4 + j] = 1.0\nv = s[w]")
    errs = _errors(src)
    assert [(e[0], e[1]) for e in errs] == [(13, "az-shared-race")], errs


def test_3d_block_linear_witness() -> None:
    src = _kernel("s = az.shared.array(256, f32)\nfor j in range(2):\n    s[w + j * 128] = 1.0", block="(8, 4, 4)", domain=3)
    assert _errors(src) == []
    src = _kernel("s = az.shared.array(256, f32)\nfor j in range(2):\n    s[w + j * 64] = 1.0", block="(8, 4, 4)", domain=3)
    assert [e[1] for e in _errors(src)] == ["az-shared-race"]


def test_helper_takes_its_callers_block() -> None:
    src = HEAD + """
@func
def stage(v: f32) -> f32:
    w = thread.index_in_block()
    s = az.shared.array(256, f32)
    for j in range(2):
        s[w + j * 128] = v
    az.syncthreads()
    r = s[(w.get() + 1) % 256]
    az.syncthreads()
    return r


@launch_contract(domain=1, block=128)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    v = stage(a[i] if i in a else 0.0)
    if i in c:
        c[i] = v
"""
    assert _errors(src) == []
    # called from a kernel of 256 threads as well: the callers disagree, so no block is fixed
    src2 = src + """

@launch_contract(domain=1, block=256)
@kernel
def k2(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    v = stage(a[i] if i in a else 0.0)
    if i in c:
        c[i] = v
"""
    errs = _errors(src2)
    assert [(e[0], e[1]) for e in errs] == [(11, "az-shared-race")] and "block is not fixed" in errs[0][2], errs


def test_owner_maps() -> None:
    strided = Slots((512,), (128, 1, 1), (1, 128, 128), ((128, 4, "j"),), True)
    own = Slots((512,), (128, 1, 1), (1, 128, 128), (), False)
    tiled = Slots((512,), (128, 1, 1), (4, 512, 512), ((1, 4, "j"),), True)
    assert isinstance(owner_map(strided), dict) and len(owner_map(strided)) == 512  # type: ignore[arg-type]
    assert compatible(strided, own) and compatible(own, strided)
    assert not compatible(strided, tiled)
    clash = Slots((512,), (128, 1, 1), (1, 128, 128), ((64, 4, "j"),), True)
    got = owner_map(clash)
    assert not isinstance(got, dict) and got[4] == 64


def test_compile_refuses_what_check_refuses(tmp_path: object) -> None:
    import importlib.util
    from pathlib import Path

    from anodize import CheckError
    from anodize.checker.api import enforce_kernel

    src = _kernel("s = az.shared.array(512, f32)\nfor j in range(4):\n    s[w + j * 64] = 1.0")
    path = Path(str(tmp_path)) / "slots_compile.py"
    path.write_text(src)
    assert [(e[0], e[1]) for e in _errors(src)] == [(12, "az-shared-race")]
    spec = importlib.util.spec_from_file_location("_slots_compile", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(CheckError) as e:
        enforce_kernel(mod.k)
    assert "az-shared-race" in str(e.value) and ":12:" in str(e.value)
