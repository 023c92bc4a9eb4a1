"""The compile cache trusts nothing it reads (issue 34): each tampering of the reliability probe,
planted in a real entry, is a rebuild (or a refusal of the cache directory), never a load of the
planted artifact; and every input of an artifact is in its key.

Storage-level damage (truncation, bit flips, a concurrent writer) is tests/test_diskcache.py and
tests/reliability/test_fault_injection.py; bench/RELIABILITY.md "Cache security" tabulates these."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sys
import threading
import warnings
from pathlib import Path

import pytest

from anodize.runtime import artifact_store, diskcache
from anodize.runtime import compile as rc

SOURCE = '''
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def add(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] + b[i]


@launch_contract(domain=1, block=256, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@kernel
def mul(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in c:
        c[i] = a[i] * b[i]
'''


@pytest.fixture()
def mod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(cache))
    monkeypatch.delenv("ANODIZE_CACHE_SHARED", raising=False)
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", "0")  # `_codegen_gpu` is the checker-first path's codegen
    (tmp_path / "sec_kernels.py").write_text(SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("sec_kernels", None)
    diskcache._warned.clear()
    import sec_kernels

    return sec_kernels


def _fresh(k):
    """What a new process would hold: a new Kernel over the same function."""
    from anodize.kernel import Kernel

    return Kernel(k.fn, k.contract_spec)


@pytest.fixture()
def builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kernels codegen built (a load from the cache builds nothing)."""
    out: list[str] = []
    real = rc._codegen_gpu

    def counting(kernel, *a, **kw):
        out.append(kernel.__name__)
        return real(kernel, *a, **kw)

    monkeypatch.setattr(rc, "_codegen_gpu", counting)
    return out


def _entry_of(k) -> Path:
    key = artifact_store.cache_key(k, "sm_90", {"bounds_checks": True, "line_info": False, "opt": 3, "tc_gemm": ""})
    return diskcache.cache_dir() / key[:2] / key


def _meta(e: Path) -> dict:
    return json.loads((e / "meta.json").read_text())


def _write_meta(e: Path, meta: dict, *, rehash: bool) -> None:
    """Rewrite meta.json; `rehash`: as an attacker who knows the format recomputes `content`."""
    if rehash:
        meta["content"] = diskcache.content_hash(meta)
    (e / "meta.json").write_text(json.dumps(meta))


def _flip_requires(e: Path, rehash: bool) -> None:
    meta = _meta(e)
    rel = meta["contract"]["requires"]["relations"][0]
    assert rel[1] == ["len", "a"]
    rel[1] = ["len", "c"]  # `len(c) == len(c)`: the check on `a` is gone
    _write_meta(e, meta, rehash=rehash)


def _swap_with_mul(e: Path, rehash: bool, mul_entry: Path) -> None:
    add_inputs = _meta(e)["inputs"]
    for p in e.iterdir():
        p.unlink()
    for p in mul_entry.iterdir():
        shutil.copy(p, e / p.name)
    meta = _meta(e)
    meta["key"] = e.name
    if rehash:  # the inputs rewritten too: add's inputs, mul's code and name
        meta["inputs"] = add_inputs
        assert diskcache.make_key(meta["inputs"]) == e.name
    _write_meta(e, meta, rehash=True)


def _swap_renamed(e: Path, rehash: bool, mul_entry: Path) -> None:
    """mul's entry with add's inputs and add's name: only the PTX's entry symbol tells."""
    _swap_with_mul(e, True, mul_entry)
    meta = _meta(e)
    meta["name"] = meta["entry"] = "add"
    _write_meta(e, meta, rehash=True)


def _dotdot_name(e: Path, rehash: bool) -> None:
    outside = e.parent.parent.parent / "secret.ptx"
    outside.write_bytes((e / "kernel.ptx").read_bytes())
    meta = _meta(e)
    meta["files"]["../../../secret.ptx"] = meta["files"].pop("kernel.ptx")
    _write_meta(e, meta, rehash=rehash)


def _link_out(e: Path, rehash: bool) -> None:
    outside = e.parent.parent.parent / "elsewhere.ptx"
    outside.write_bytes((e / "kernel.ptx").read_bytes())
    (e / "kernel.ptx").unlink()
    (e / "kernel.ptx").symlink_to(outside)


def _fifo(e: Path, rehash: bool) -> None:
    (e / "kernel.ptx").unlink()
    os.mkfifo(e / "kernel.ptx")


def _fifo_meta(e: Path, rehash: bool) -> None:
    (e / "meta.json").unlink()
    os.mkfifo(e / "meta.json")


def _shape(value: object):
    def plant(e: Path, rehash: bool) -> None:
        if isinstance(value, str):
            meta = _meta(e)
            meta[value] = {"not": "the shape"} if value != "files" else ["kernel.ptx"]
            _write_meta(e, meta, rehash=rehash)
        else:
            (e / "meta.json").write_text(json.dumps(value))

    return plant


def _entry_is_link(e: Path, rehash: bool) -> None:
    real = e.parent.parent.parent / "planted_entry"
    shutil.move(str(e), real)
    e.symlink_to(real)


TAMPER = {
    "requires_flipped": _flip_requires,
    "swapped_key_rewritten": _swap_with_mul,
    "swapped_name_rewritten": _swap_renamed,
    "dotdot_file_name": _dotdot_name,
    "payload_links_out": _link_out,
    "payload_is_fifo": _fifo,
    "meta_is_fifo": _fifo_meta,
    "meta_a_list": _shape([1, 2, 3]),
    "meta_a_number": _shape(7),
    "params_wrong_shape": _shape("params"),
    "files_a_list": _shape("files"),
    "resources_wrong_shape": _shape("resources"),
    "entry_is_a_link": _entry_is_link,
}


@pytest.mark.parametrize("rehash", [False, True], ids=["as-is", "rehashed"])
@pytest.mark.parametrize("tamper", sorted(TAMPER))
def test_tampered_entry_is_rebuilt_never_loaded(mod, builds, tamper: str, rehash: bool) -> None:
    first = _fresh(mod.add).compile("sm_90")
    mul_first = _fresh(mod.mul).compile("sm_90")
    assert builds == ["add", "mul"]
    entry = _entry_of(mod.add)
    assert entry.is_dir()
    plant = TAMPER[tamper]
    done = threading.Event()
    got: list[object] = []

    def compile_again() -> None:  # a FIFO must not hang the compile: it runs on a thread we can time out
        try:
            got.append(_fresh(mod.add).compile("sm_90"))
        except BaseException as e:  # pragma: no cover - reported below
            got.append(e)
        done.set()

    if plant in (_swap_with_mul, _swap_renamed):
        plant(entry, rehash, _entry_of(mod.mul))
    else:
        plant(entry, rehash)
    t = threading.Thread(target=compile_again, daemon=True)
    t.start()
    assert done.wait(60), "the compile blocked on the planted entry"
    (again,) = got
    assert not isinstance(again, BaseException), again
    assert builds == ["add", "mul", "add"], "a tampered entry must be rebuilt"
    assert again.ptx == first.ptx and again.ptx != mul_first.ptx
    assert again.contract == mod.add.contract
    # the rebuilt entry is valid and is what the next process loads
    third = _fresh(mod.add).compile("sm_90")
    assert builds == ["add", "mul", "add"] and third.from_cache and third.ptx == first.ptx


def test_untampered_entry_is_a_hit(mod, builds) -> None:
    first = _fresh(mod.add).compile("sm_90")
    again = _fresh(mod.add).compile("sm_90")
    assert builds == ["add"] and again.from_cache and again.ptx == first.ptx and again.contract == mod.add.contract


def test_content_hash_covers_every_field(mod) -> None:
    _fresh(mod.add).compile("sm_90")
    entry = _entry_of(mod.add)
    meta = _meta(entry)
    for field in meta:
        if field in ("content",):
            continue
        changed = dict(meta, **{field: "x"})
        assert diskcache.content_hash(changed) != meta["content"], field
    assert diskcache.content_hash(meta) == meta["content"]


def test_the_contract_comes_from_the_source(mod, builds) -> None:
    """A cached load returns the contract parsed from the source, not the entry's copy: one whose
    copy is planted to agree with a rehash is still compared (and differs)."""
    _fresh(mod.add).compile("sm_90")
    k = _fresh(mod.add)
    _flip_requires(_entry_of(mod.add), rehash=True)
    again = k.compile("sm_90")
    assert again.contract is k.contract and builds == ["add", "add"]


# ---- the cache directory: whose, and what anodize may remove -----------------------------------


def _compile_warns(mod) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            ck = _fresh(mod.add).compile("sm_90")
            assert ".entry add(" in ck.ptx and not ck.from_cache
    return [w for w in caught if "compile cache" in str(w.message)]


def test_world_writable_dir_is_refused_with_one_warning(mod, builds) -> None:
    root = diskcache.cache_dir()
    root.mkdir(mode=0o700)
    os.chmod(root, 0o777)
    found = _compile_warns(mod)
    assert len(found) == 1 and "writable by other users" in str(found[0].message)
    assert builds == ["add"] * 3 and list(root.iterdir()) == []  # nothing written, nothing read


def test_foreign_owned_dir_is_refused(mod, builds, monkeypatch: pytest.MonkeyPatch) -> None:
    root = diskcache.cache_dir()
    root.mkdir(mode=0o700)
    _fresh(mod.add).compile("sm_90")  # an entry, then the folder "belongs to someone else"
    real = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real + 4242)
    found = _compile_warns(mod)
    assert len(found) == 1 and "belongs to another user" in str(found[0].message)
    assert builds == ["add"] * 4
    monkeypatch.setenv("ANODIZE_CACHE_SHARED", "1")  # the documented opt-in for a shared cache
    assert _fresh(mod.add).compile("sm_90").from_cache


def test_foreign_world_writable_dir_refused_when_root(mod, builds, tmp_path: Path) -> None:
    """The probe's case for real: a folder another uid owns, mode 777 (needs root to plant)."""
    if os.getuid() != 0:
        pytest.skip("planting a folder of another owner needs root; test_foreign_owned_dir_is_refused patches the uid")
    root = diskcache.cache_dir()
    root.mkdir()
    os.chown(root, 4242, 4242)
    os.chmod(root, 0o777)
    assert len(_compile_warns(mod)) == 1 and builds == ["add"] * 3


@pytest.mark.parametrize("kind", ["a_file", "a_dangling_link"])
def test_unusable_dir_is_skipped_with_one_warning(mod, builds, kind: str) -> None:
    root = diskcache.cache_dir()
    if kind == "a_file":
        root.write_text("not a folder")
    else:
        root.symlink_to(root.parent / "nowhere")
    found = _compile_warns(mod)
    assert len(found) == 1 and builds == ["add"] * 3


def test_full_disk_while_writing_the_entry_is_no_entry(mod, builds, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(self, data):  # noqa: ANN001
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    ck = _fresh(mod.add).compile("sm_90")  # the compile succeeds; the cache just has no entry
    assert ".entry add(" in ck.ptx and diskcache.info()["entries"] == 0
    assert diskcache.info()["unfinished"] == 0  # the temporary folder went too
    monkeypatch.undo()


def test_clear_removes_only_what_anodize_wrote(mod, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "data" / "run1").mkdir(parents=True)
    (project / "data" / "run1" / "meta.json").write_text("{}")  # a project's data, not an entry
    (project / "ab" / "notakey").mkdir(parents=True)
    (project / "ab" / "notakey" / "meta.json").write_text("{}")
    os.chmod(project, 0o700)
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(project))
    assert diskcache.clear() == (0, 0)  # no tag: not an anodize cache
    _fresh(mod.add).compile("sm_90")  # writes an entry and the tag
    assert (project / diskcache.TAG).read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")
    entry = _entry_of(mod.add)
    stale = entry.parent / ".tmp-0123456789abcdef-xyz"  # an interrupted write
    stale.mkdir()
    (stale / "kernel.ptx").write_bytes(b"half")
    info = diskcache.info()
    assert info["entries"] == 1 and info["unfinished"] == 1
    assert diskcache.clear() == (1, 1)
    assert not entry.exists() and not stale.exists()
    assert (project / "data" / "run1" / "meta.json").exists() and (project / "ab" / "notakey" / "meta.json").exists()


def test_stale_temp_folders_are_swept_by_a_later_write(mod) -> None:
    _fresh(mod.add).compile("sm_90")
    pre = _entry_of(mod.add).parent
    old, new = pre / ".tmp-aaaa-old", pre / ".tmp-bbbb-new"
    old.mkdir(), new.mkdir()
    os.utime(old, (0, 0))
    assert diskcache.sweep(str(pre), diskcache.STALE_TEMP_SECONDS) == 1
    assert not old.exists() and new.exists()  # a write in progress elsewhere is left alone


def test_cli_cache_clear_reports_what_it_removed(mod, capsys: pytest.CaptureFixture[str]) -> None:
    from anodize.cli import main

    _fresh(mod.add).compile("sm_90")
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "entries    1" in out and "unfinished 0" in out
    assert main(["cache", "clear"]) == 0
    assert "removed 1 cache entry and 0 unfinished writes" in capsys.readouterr().out


def test_non_utf8_folder_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, builds) -> None:
    if sys.platform == "darwin":
        pytest.skip("macOS folder names are UTF-8")
    folder = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.mkdir(folder)
    with open(os.path.join(folder, b"sec_latin.py"), "w") as f:
        f.write(SOURCE)
    monkeypatch.setenv("ANODIZE_CACHE", "on")
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ANODIZE_COMPILE_OVERLAP", "0")
    monkeypatch.syspath_prepend(os.fsdecode(folder))
    sys.modules.pop("sec_latin", None)
    import sec_latin

    first = _fresh(sec_latin.add).compile("sm_90")
    again = _fresh(sec_latin.add).compile("sm_90")
    assert builds == ["add"] and again.from_cache and again.ptx == first.ptx


# ---- every input in the key --------------------------------------------------------------------


OPTIONS = {"bounds_checks": True, "line_info": False, "opt": 3, "tc_gemm": ""}


@pytest.mark.parametrize("switch,value", [("ANODIZE_COARSEN_CHUNKS", "8"), ("ANODIZE_ATTN_QREGS", "1"), ("ANODIZE_ATTN_STAGES", "2"),
                                          ("ANODIZE_ATTN_GROUPS", "2"), ("ANODIZE_ATTN_LAZY", "1"), ("ANODIZE_ATTN_DYNAMIC", "0"),
                                          ("ANODIZE_ATTN_MINB", "2"), ("ANODIZE_TC_GEMM", "mma"),
                                          ("ANODIZE_RECORD_ALIGN", "0")])
def test_every_code_switch_is_in_the_key(mod, monkeypatch: pytest.MonkeyPatch, switch: str, value: str) -> None:
    monkeypatch.delenv(switch, raising=False)
    before = artifact_store.cache_key(mod.add, "sm_90", OPTIONS)
    monkeypatch.setenv(switch, value)
    assert artifact_store.cache_key(mod.add, "sm_90", OPTIONS) != before


def test_libdevice_is_in_the_key(mod, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lib = tmp_path / "libdevice.10.bc"
    lib.write_bytes(b"BC\xc0\xde one")
    monkeypatch.setenv("ANODIZE_LIBDEVICE", str(lib))
    one = artifact_store.cache_key(mod.add, "sm_90", OPTIONS)
    lib.write_bytes(b"BC\xc0\xde another, longer")
    assert artifact_store.cache_key(mod.add, "sm_90", OPTIONS) != one


def test_every_switch_the_compiler_reads_is_classified() -> None:
    """A new `ANODIZE_*` switch in the compiler is either in the key or declared not to change code."""
    import re

    from anodize.codegen import toolchain

    root = Path(artifact_store.__file__).resolve().parent.parent
    names: set[str] = set()
    for _, path in artifact_store.compiler_files():
        names |= set(re.findall(r"ANODIZE_[A-Z0-9_]+", Path(path).read_text()))
    for sub in ("runtime", "anodize"):
        for p in (root / sub).glob("*.py"):
            names |= set(re.findall(r"ANODIZE_[A-Z0-9_]+", p.read_text()))
    names = {n for n in names if not n.endswith("_")}
    unknown = names - set(toolchain.CODE_SWITCHES) - set(toolchain.NON_CODE_SWITCHES)
    assert not unknown, f"classify these switches in codegen/toolchain.py: {sorted(unknown)}"


def test_nan_and_negative_nan_are_two_specialisations() -> None:
    import struct

    from anodize.language.front import constant_key, spec_key

    nan = float("nan")
    neg = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
    assert constant_key(nan) != constant_key(neg)
    assert constant_key(0.0) != constant_key(-0.0)
    assert constant_key(1.5) == constant_key(1.5)
    assert repr(spec_key((("x", nan),))) != repr(spec_key((("x", neg),)))


def test_specialisation_keys_see_the_nan_sign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import struct

    import anodize as az

    src = '''
import anodize as az
from anodize import DisjointSlice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=64, requires=lambda out, v: len(out) >= 1)
@kernel
def fill(out: DisjointSlice[f32], v: az.Constant[float]) -> None:
    i = thread.index_1d()
    if i in out:
        out[i] = v
'''
    (tmp_path / "sec_nan.py").write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("sec_nan", None)
    import sec_nan

    neg = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
    a, b = sec_nan.fill.specialize(v=float("nan")), sec_nan.fill.specialize(v=neg)
    assert a is not b
    assert rc.source_hash(a) != rc.source_hash(b)
    assert artifact_store.cache_key(a, "sm_90", OPTIONS) != artifact_store.cache_key(b, "sm_90", OPTIONS)
    assert az is not None and hashlib is not None
