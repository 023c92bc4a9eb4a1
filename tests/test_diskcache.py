"""The persistent cache's storage layer: hits, misses, corruption, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from pathlib import Path

import pytest

from anodize.runtime import diskcache


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ANODIZE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ANODIZE_CACHE", raising=False)
    return tmp_path / "cache"


def _entry(tag: str) -> tuple[dict[str, object], dict[str, bytes]]:
    return {"name": tag, "inputs": {"src": tag}}, {"kernel.ptx": f".version 8.0 // {tag}".encode(), "kernel.cubin": os.urandom(64)}


def test_miss_then_hit_roundtrip() -> None:
    key = diskcache.make_key({"src": "a"})
    assert diskcache.load(key) is None
    meta, files = _entry("a")
    assert diskcache.store(key, meta, files) is not None
    got = diskcache.load(key)
    assert got is not None
    assert got[0]["name"] == "a"
    assert got[1] == files


def test_key_changes_with_every_part() -> None:
    base = {"src": "x", "arch": "sm_90", "anodize": "0.1.0", "llvmlite": "0.50.0", "driver": 13000}
    k0 = diskcache.make_key(base)
    for field, other in [("src", "y"), ("arch", "sm_80"), ("anodize", "0.2.0"), ("llvmlite", "0.51.0"), ("driver", 12080)]:
        assert diskcache.make_key({**base, field: other}) != k0, field
    assert diskcache.make_key(dict(base)) == k0


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "meta"])
def test_corrupted_entry_is_a_miss_and_removed(damage: str, _cache_dir: Path) -> None:
    key = diskcache.make_key({"src": damage})
    meta, files = _entry(damage)
    folder = diskcache.store(key, meta, files)
    assert folder is not None
    ptx = folder / "kernel.ptx"
    if damage == "truncate":
        ptx.write_bytes(ptx.read_bytes()[:5])
    elif damage == "flip":
        data = bytearray(ptx.read_bytes())
        data[0] ^= 0xFF
        ptx.write_bytes(bytes(data))
    elif damage == "delete":
        ptx.unlink()
    else:
        (folder / "meta.json").write_text("{not json")
    assert diskcache.load(key) is None
    assert not folder.exists()
    # rebuilt: a new store works and loads
    assert diskcache.store(key, meta, files) is not None
    assert diskcache.load(key) is not None


def _writer(args: tuple[str, str, int]) -> bool:
    cache, key, i = args
    os.environ["ANODIZE_CACHE_DIR"] = cache
    meta = {"writer": i, "inputs": {"src": "race"}}
    return diskcache.store(key, meta, {"kernel.ptx": b"same payload"}) is not None


def test_concurrent_writers_leave_one_valid_entry(_cache_dir: Path) -> None:
    key = diskcache.make_key({"src": "race"})
    with mp.get_context("spawn").Pool(4) as pool:
        results = pool.map(_writer, [(str(_cache_dir), key, i) for i in range(8)])
    assert all(results)
    entries = list(_cache_dir.glob("*/*/meta.json"))
    assert len(entries) == 1
    assert not [p for p in _cache_dir.rglob(".*") if p.is_dir()]  # no temp folders left behind
    got = diskcache.load(key)
    assert got is not None and got[1]["kernel.ptx"] == b"same payload"
    assert json.loads(entries[0].read_text())["key"] == key


def test_info_and_clear() -> None:
    for tag in "abc":
        diskcache.store(diskcache.make_key({"src": tag}), *_entry(tag))
    info = diskcache.info()
    assert info["entries"] == 3 and info["bytes"] > 0
    assert diskcache.clear() == (3, 0)
    assert diskcache.info()["entries"] == 0


def test_disabled_cache_stores_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANODIZE_CACHE", "off")
    key = diskcache.make_key({"src": "off"})
    assert diskcache.store(key, *_entry("off")) is None
    assert diskcache.load(key) is None
