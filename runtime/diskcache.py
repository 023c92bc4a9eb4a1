"""The persistent compile cache: content-addressed, JSON + raw files, atomic renames.

An entry is a folder named by the SHA-256 of everything that determines the
artifact: the kernel's source and its helpers' sources, the target arch and
compile options, and the anodize, llvmlite and CUDA driver versions.  It holds

    meta.json     the artifact's description (params, contract source, fault sites,
                  resources) and a SHA-256 of each payload file
    kernel.ptx    the PTX
    kernel.cubin  the cubin built ahead of time (when ptxas/nvJitLink was available)

No pickle: a cache entry is data, never code.  Entries are written into a
temporary folder and renamed into place, so concurrent writers of one key leave
one complete entry and readers never see a partial one.  An entry whose payload
hash does not match (corrupted or truncated) is treated as a miss, removed and
rebuilt.

`ANODIZE_CACHE_DIR` moves the cache; `ANODIZE_CACHE=off` disables it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

# pathlib, shutil and tempfile are imported where entries are written, listed or removed:
# a cached load (`load`) only reads, with `os.path`, and stays light.

FORMAT = 1


def _root() -> str:
    """The platform's user cache directory for anodize, as a string."""
    env = os.environ.get("ANODIZE_CACHE_DIR")
    if env:
        return env
    home = os.path.expanduser("~")
    if sys.platform == "darwin":
        return os.path.join(home, "Library", "Caches", "anodize")
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.join(home, "AppData", "Local")
        return os.path.join(base, "anodize", "Cache")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
    return os.path.join(base, "anodize")


def cache_dir() -> Path:
    """The platform's user cache directory for anodize."""
    from pathlib import Path

    return Path(_root())


def enabled() -> bool:
    return os.environ.get("ANODIZE_CACHE", "on").lower() not in ("off", "0", "no", "false")


def make_key(parts: dict[str, Any]) -> str:
    blob = json.dumps({"format": FORMAT, **parts}, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def store(key: str, meta: dict[str, Any], files: dict[str, bytes]) -> Path | None:
    """Write an entry atomically; return its folder (None when caching is off or fails)."""
    if not enabled():
        return None
    root = cache_dir()
    final = root / key[:2] / key
    if final.is_dir():
        return final
    import shutil
    import tempfile
    from pathlib import Path

    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-", dir=final.parent))
        meta = dict(meta, format=FORMAT, key=key, files={n: _sha(d) for n, d in files.items()})
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        (tmp / "meta.json").write_text(json.dumps(meta, sort_keys=True))
        try:
            os.rename(tmp, final)  # atomic; fails if another writer got there first
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not final.is_dir():
                return None
        return final
    except OSError:
        return None


def load(key: str) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """The entry's meta and payload files, or None on a miss (a corrupt entry is removed)."""
    if not enabled():
        return None
    folder = os.path.join(_root(), key[:2], key)
    if not os.path.isdir(folder):
        return None
    try:
        with open(os.path.join(folder, "meta.json"), encoding="utf-8") as f:
            meta = json.loads(f.read())
        if meta.get("format") != FORMAT or meta.get("key") != key:
            raise ValueError("foreign entry")
        files: dict[str, bytes] = {}
        for name, digest in meta["files"].items():
            with open(os.path.join(folder, name), "rb") as f:
                data = f.read()
            if _sha(data) != digest:
                raise ValueError(f"{name} does not match its hash")
            files[name] = data
        return meta, files
    except (OSError, ValueError, KeyError, TypeError, json.JSONDecodeError):
        evict(key)
        return None


def evict(key: str) -> None:
    folder = cache_dir() / key[:2] / key
    if folder.exists():
        import shutil

        # Rename first so a concurrent reader sees a miss, not a half-deleted folder.
        trash = folder.with_name(f".trash-{key}-{os.getpid()}")
        try:
            os.rename(folder, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)


def info() -> dict[str, Any]:
    root = cache_dir()
    entries = 0
    size = 0
    if root.is_dir():
        for meta in root.glob("*/*/meta.json"):
            entries += 1
            size += sum(f.stat().st_size for f in meta.parent.iterdir() if f.is_file())
    return {"directory": str(root), "enabled": enabled(), "entries": entries, "bytes": size}


def clear() -> int:
    """Remove every entry; return how many were removed."""
    import shutil

    root = cache_dir()
    n = 0
    if root.is_dir():
        for meta in root.glob("*/*/meta.json"):
            shutil.rmtree(meta.parent, ignore_errors=True)
            n += 1
        for sub in root.iterdir():
            if sub.is_dir() and not any(sub.iterdir()):
                sub.rmdir()
    return n


def dataclass_json(obj: Any) -> Any:
    """A JSON-ready dict of a dataclass tree (for meta.json)."""
    from dataclasses import asdict

    return json.loads(json.dumps(asdict(obj), default=str))
