"""The persistent compile cache: content-addressed, JSON + raw files, atomic renames.

An entry is a folder named by its key, the SHA-256 of its inputs (everything that
determines the artifact: the kernel's source, the target and compile options, the
compiler's versions and digest, libdevice and every environment switch that changes
code; runtime/artifact_store.py).  It holds

    meta.json     the artifact's description (params, contract, fault sites, resources),
                  the inputs themselves, a SHA-256 of each payload file, and `content`:
                  the SHA-256 of all of the above
    kernel.ptx    the PTX
    kernel.cubin  the cubin built ahead of time (when ptxas/nvJitLink was available)

A load trusts nothing it reads (docs/architecture.md, "The compile cache"): the entry's
inputs must hash to its folder's name (a copied or renamed entry is another kernel's), its
`content` must cover every byte of meta.json and the payloads, file names are plain names
inside the entry, and each file is opened without following a link and without blocking
(a FIFO, a device or a link is not a cache file).  Anything else is a miss: the entry is
removed and rebuilt.  The cache directory must be the user's own and not writable by
others (`ANODIZE_CACHE_SHARED=1` accepts a directory shared on purpose); an unusable one
is skipped, with one warning per process, and the compile goes on without a cache.

No pickle: an entry is data, never code.  Entries are written into a temporary folder
(`.tmp-*`) and renamed into place, so concurrent writers of one key leave one complete
entry and readers never see a partial one; the temporary folders of interrupted writes are
counted by `info` and removed by `clear` (and by a later write once an hour old).  The
root holds a `CACHEDIR.TAG` written by anodize: `clear` removes entries only under a root
that has it, and only folders laid out as anodize writes them.

`ANODIZE_CACHE_DIR` moves the cache; `ANODIZE_CACHE=off` disables it.

`tempfile`, `shutil` and `pathlib` (tens of milliseconds to import, between them) are imported by
the functions that write, evict or clear: a cached load only reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import time
import warnings
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path



def _fs() -> tuple[Any, Any, Any]:
    """(pathlib, shutil, tempfile), loaded where entries are written, listed or removed: a
    cached load (`load`) only reads, with `os`, and stays light."""
    import pathlib, shutil, tempfile  # noqa: E401  (one lazy load of the three)

    return pathlib, shutil, tempfile

FORMAT = 2
TAG = "CACHEDIR.TAG"
TAG_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by anodize (its compile cache).\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
MAX_FILE_BYTES = 512 << 20
STALE_TEMP_SECONDS = 3600.0
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_HEX = frozenset("0123456789abcdef")
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_warned: set[str] = set()


class Unusable(Exception):
    """The cache directory (or a folder in it) is not one anodize may use."""


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
    pathlib, _, _ = _fs()
    return pathlib.Path(_root())


def enabled() -> bool:
    return os.environ.get("ANODIZE_CACHE", "on").lower() not in ("off", "0", "no", "false")


def shared() -> bool:
    """`ANODIZE_CACHE_SHARED=1`: the cache directory is shared on purpose (a team's cache on a
    group-writable folder), so its owner and mode are not checked."""
    return os.environ.get("ANODIZE_CACHE_SHARED", "").lower() in ("1", "on", "yes", "true")


def make_key(parts: dict[str, Any]) -> str:
    """The key of an entry: the SHA-256 of its inputs (the folder's name)."""
    return hashlib.sha256(_canonical({"format": FORMAT, **parts})).hexdigest()


def _canonical(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, default=str, ensure_ascii=True).encode()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def content_hash(meta: dict[str, Any]) -> str:
    """The entry's content hash: every field of meta.json but `content` (which includes each
    payload's SHA-256, so it covers the payloads too)."""
    return _sha(_canonical({k: v for k, v in meta.items() if k != "content"}))


# ---- the directory: whose it is, and a warning when it cannot be used --------------------------


def _check_dir(path: str, *, follow: bool) -> os.stat_result:
    """A folder anodize may read entries from: a directory (a link only where `follow`),
    the user's own and not writable by others (unless the cache is shared on purpose)."""
    st = os.stat(path) if follow else os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise Unusable(f"{path} is not a directory")
    if shared() or not hasattr(os, "getuid"):
        return st
    if st.st_uid != os.getuid():
        raise Unusable(f"{path} belongs to another user (uid {st.st_uid}); set ANODIZE_CACHE_SHARED=1 if it is shared on purpose")
    if st.st_mode & 0o022:
        raise Unusable(f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):o}); "
                       "`chmod go-w` it, or set ANODIZE_CACHE_SHARED=1 if it is shared on purpose")
    return st


def _warn(root: str, why: str) -> None:
    if root in _warned:
        return
    _warned.add(root)
    warnings.warn(f"anodize: the compile cache at {root} is not used: {why}; compiling without it", RuntimeWarning, stacklevel=3)


def usable_root(create: bool) -> str | None:
    """The cache directory when anodize may use it (made, with the tag, when `create`);
    None when the cache is off, absent (and not `create`) or unusable (warned once)."""
    if not enabled():
        return None
    root = _root()
    try:
        if create and not os.path.isdir(root):
            os.makedirs(root, mode=0o700, exist_ok=True)
        elif not os.path.lexists(root):
            return None
        _check_dir(root, follow=True)
        if not os.access(root, os.R_OK | os.W_OK | os.X_OK):
            raise Unusable("it cannot be read and written")
        if create and not os.path.isfile(os.path.join(root, TAG)):
            with open(os.path.join(root, TAG), "x", encoding="ascii") as f:
                f.write(TAG_TEXT)
    except FileExistsError:
        pass  # another process wrote the tag
    except (Unusable, OSError, ValueError) as e:
        _warn(root, str(e))
        return None
    return root


# ---- writing ----------------------------------------------------------------------------------


def store(key: str, meta: dict[str, Any], files: dict[str, bytes]) -> Path | None:
    """Write an entry atomically; return its folder (None when caching is off or fails).

    `meta["inputs"]` are the entry's inputs: `key` must be `make_key(inputs)`."""
    if make_key(meta["inputs"]) != key:
        raise ValueError("a cache entry's key is the hash of its inputs")
    if not all(_plain_name(n) for n in files):
        raise ValueError(f"cache file names must be plain names: {sorted(files)}")
    root = usable_root(create=True)
    if root is None:
        return None
    pathlib, shutil, tempfile = _fs()
    final = pathlib.Path(root) / key[:2] / key
    tmp = None
    try:
        if final.is_dir():
            return final
        final.parent.mkdir(mode=0o700, exist_ok=True)
        _check_dir(str(final.parent), follow=False)
        sweep(str(final.parent), STALE_TEMP_SECONDS)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=final.parent))
        meta = dict(meta, format=FORMAT, key=key, files={n: _sha(d) for n, d in files.items()})
        meta["content"] = content_hash(meta)
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        (tmp / "meta.json").write_bytes(_canonical(meta))
        try:
            os.rename(tmp, final)  # atomic; fails if another writer got there first
        except OSError:
            if not final.is_dir():
                return None
        return final
    except (OSError, Unusable, ValueError):  # a full disk, a folder we may not use: no entry
        return None
    finally:
        if tmp is not None and tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _plain_name(name: object) -> bool:
    return isinstance(name, str) and 0 < len(name) <= 64 and name[0] != "." and set(name) <= _NAME_CHARS


def _is_key(name: str) -> bool:
    return len(name) == 64 and set(name) <= _HEX


def _is_temp(name: str) -> bool:
    return name.startswith((".tmp-", ".trash-"))


def sweep(folder: str, older_than: float) -> int:
    """Remove the temporary folders of interrupted writes (and evictions) in one prefix folder
    that are older than `older_than` seconds; return how many."""
    _, shutil, _ = _fs()
    n = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    now = time.time()
    for name in names:
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if _is_temp(name) and stat.S_ISDIR(st.st_mode) and now - st.st_mtime >= older_than:
            shutil.rmtree(path, ignore_errors=True)
            n += not os.path.lexists(path)
    return n


# ---- reading: trust nothing -------------------------------------------------------------------


def _read(dir_fd: int | None, folder: str, name: str) -> bytes:
    """One regular file of an entry: not a link, not a FIFO or device (opened non-blocking,
    then checked), at most MAX_FILE_BYTES."""
    flags = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | getattr(os, "O_BINARY", 0)
    fd = os.open(name, flags, dir_fd=dir_fd) if dir_fd is not None else os.open(os.path.join(folder, name), flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{name} is not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise ValueError(f"{name} is too large")
        chunks = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def load(key: str) -> tuple[dict[str, Any], dict[str, bytes]] | None:
    """The entry's meta and payload files, or None on a miss (a damaged entry is removed)."""
    if not _is_key(key):
        return None
    root = usable_root(create=False)
    if root is None:
        return None
    folder = os.path.join(root, key[:2], key)
    if not os.path.lexists(folder):
        return None
    dir_fd = None
    try:
        _check_dir(os.path.join(root, key[:2]), follow=False)  # Unusable: warned, left alone
        try:
            _check_dir(folder, follow=False)
        except Unusable as e:  # a link, a file or another's folder planted as the entry: removed
            raise ValueError(str(e)) from None
        if os.open in os.supports_dir_fd:
            dir_fd = os.open(folder, os.O_RDONLY | _O_NOFOLLOW | _O_DIRECTORY)
        meta = json.loads(_read(dir_fd, folder, "meta.json").decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("key") != key:
            raise ValueError("not an entry of this key and format")
        if meta.get("content") != content_hash(meta):
            raise ValueError("meta.json does not match its content hash")
        if not isinstance(meta.get("inputs"), dict) or make_key(meta["inputs"]) != key:
            raise ValueError("the entry's inputs are not its key's")
        listed = meta.get("files")
        if not isinstance(listed, dict) or not all(_plain_name(n) and n != "meta.json" and isinstance(d, str) for n, d in listed.items()):
            raise ValueError("the entry's file list is malformed")
        files: dict[str, bytes] = {}
        for name, digest in listed.items():
            data = _read(dir_fd, folder, name)
            if _sha(data) != digest:
                raise ValueError(f"{name} does not match its hash")
            files[name] = data
        return meta, files
    except Unusable as e:
        _warn(folder, str(e))
        return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError, MemoryError):
        evict(key)
        return None
    finally:
        if dir_fd is not None:
            os.close(dir_fd)


def evict(key: str) -> None:
    """Remove an entry (a link planted as one is unlinked, never followed)."""
    if not _is_key(key) or not enabled():
        return
    folder = os.path.join(_root(), key[:2], key)
    try:
        st = os.lstat(folder)
    except OSError:
        return
    # Rename first so a concurrent reader sees a miss, not a half-deleted folder.
    trash = os.path.join(os.path.dirname(folder), f".trash-{key}-{os.getpid()}")
    try:
        os.rename(folder, trash)
        if stat.S_ISDIR(st.st_mode):
            _, shutil, _ = _fs()
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.unlink(trash)
    except OSError:
        return


# ---- housekeeping: `anodize cache info` and `anodize cache clear` -------------------------------


def _entries(root: str) -> list[tuple[str, bool]]:
    """(path, is_entry) of each folder anodize wrote under `root`: entries (`ab/ab...`, a real
    folder holding a meta.json) and temporary folders of unfinished writes."""
    out: list[tuple[str, bool]] = []
    try:
        prefixes = sorted(os.listdir(root))
    except OSError:
        return out
    for pre in prefixes:
        pdir = os.path.join(root, pre)
        if len(pre) != 2 or not set(pre) <= _HEX or os.path.islink(pdir) or not os.path.isdir(pdir):
            continue
        for name in sorted(os.listdir(pdir)):
            path = os.path.join(pdir, name)
            if os.path.islink(path) or not os.path.isdir(path):
                continue
            if _is_key(name) and name.startswith(pre) and os.path.isfile(os.path.join(path, "meta.json")):
                out.append((path, True))
            elif _is_temp(name):
                out.append((path, False))
    return out


def info() -> dict[str, Any]:
    root = _root()
    entries = temp = size = 0
    for path, is_entry in _entries(root) if os.path.isdir(root) else []:
        if not is_entry:
            temp += 1
            continue
        entries += 1
        for name in os.listdir(path):
            p = os.path.join(path, name)
            if os.path.isfile(p) and not os.path.islink(p):
                size += os.lstat(p).st_size
    return {"directory": root, "enabled": enabled(), "entries": entries, "bytes": size, "unfinished": temp,
            "tagged": os.path.isfile(os.path.join(root, TAG))}


def clear() -> tuple[int, int]:
    """Remove every entry and unfinished write anodize made; return (entries, unfinished).

    Only under a root tagged by anodize (`CACHEDIR.TAG`), and only folders laid out as anodize
    writes them: whatever else `ANODIZE_CACHE_DIR` holds stays."""
    _, shutil, _ = _fs()
    root = _root()
    if not os.path.isfile(os.path.join(root, TAG)):
        return 0, 0
    n = t = 0
    for path, is_entry in _entries(root):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.lexists(path):
            n += is_entry
            t += not is_entry
    for pre in os.listdir(root):
        pdir = os.path.join(root, pre)
        if len(pre) == 2 and set(pre) <= _HEX and not os.path.islink(pdir) and os.path.isdir(pdir) and not os.listdir(pdir):
            os.rmdir(pdir)
    return n, t


def dataclass_json(obj: Any) -> Any:
    """A JSON-ready dict of a dataclass tree (for meta.json)."""
    return json.loads(json.dumps(asdict(obj), default=str))
