"""Where the autotuner keeps its choices across processes and machines.

- **The persistent cache**: one JSON file per (kernel source, configuration list, key, GPU model,
  anodize version) under `<ANODIZE_CACHE_DIR>/tune/`, named by the SHA-256 of those inputs
  (content-addressed: the same kernel tuned on another machine of the same GPU model finds it;
  the file's path is not an input).  Off with the compile cache (`ANODIZE_CACHE=off`) or
  `@az.autotune(..., cache=False)`.
- **Seed files** for deployment: `Autotuned.export(path)` writes the winners a process knows;
  `@az.autotune(..., seed=path)` or `ANODIZE_TUNE_SEED=path` reads them before tuning.

What such a file can change is only *which declared configuration* runs: a loaded choice must be
equal to one of the decorator's configurations that passed the static rules, and it is checked
and compiled like any specialisation before it runs; anything else in the file is ignored.  A
damaged, foreign or oversized file is ignored (and the key tuned again).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING, Any

from anodize.language import VERSION
from anodize.runtime import diskcache
from anodize.runtime.compile import source_hash
from anodize.runtime.tune_config import Config

if TYPE_CHECKING:
    from anodize.runtime.tune_config import Config
    from anodize.runtime.tuning import Tuner, TuneReport

__all__ = ["load", "store", "seeded", "export", "device_model"]

FORMAT = 1


def device_model(dev: Any) -> str:
    """The GPU model a choice holds for (name and compute capability); "cpu"/"debug" otherwise."""
    if dev.kind != "cuda":
        return dev.kind
    cc = getattr(dev, "compute_capability", None) or (0, 0)
    return f"{getattr(dev, 'name', '?')} sm_{cc[0]}{cc[1]}"  # noqa: E501


def _jsonable(x: Any) -> Any:
    if isinstance(x, tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, (int, float, str, bool)) or x is None:
        return x
    return repr(x)


def _kernel_id(t: Tuner) -> str:
    return f"{t.base.__module__}.{t.base.__qualname__}"


def _digest(t: Tuner, key: tuple[Any, ...], dev: Any) -> str:
    parts = {
        "format": FORMAT,
        "kernel": source_hash(t.base),
        "configs": [c.to_json() for c in t.at.configs],
        "key": _jsonable(key),
        "device": device_model(dev),
        "anodize": VERSION,
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def _dir(create: bool = False) -> str | None:
    """The tuning folder inside the compile cache's directory, where diskcache allows that
    directory (on, the user's own and not writable by others, or shared on purpose)."""
    root = diskcache.usable_root(create)
    return None if root is None else os.path.join(root, "tune")


def _read_json(folder: str, name: str) -> Any:
    """A tuning file's JSON, read as the compile cache reads its entries' files (no link, no
    special file, bounded); None when it is missing, refused or damaged."""
    try:
        return json.loads(diskcache._read(None, folder, name).decode("utf-8"))
    except (OSError, ValueError):
        return None


def _config_in(t: Tuner, data: Any) -> Config | None:
    """The declared configuration `data` names, or None."""
    if not isinstance(data, dict):
        return None
    try:
        c = Config.from_json(data)
    except Exception:  # noqa: BLE001 - anything malformed is ignored, never trusted
        return None
    return c if c in t.static else None


def load(t: Tuner, key: tuple[Any, ...], dev: Any) -> Config | None:
    d = _dir()
    if d is None or not t.at.cache or dev.kind != "cuda":
        return None
    data = _read_json(d, _digest(t, key, dev) + ".json")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    return _config_in(t, data.get("config"))


def store(t: Tuner, key: tuple[Any, ...], dev: Any, report: TuneReport) -> None:
    d = _dir(create=True)
    if d is None or not t.at.cache or report.winner is None:
        return
    data = {
        "format": FORMAT,
        "kernel": _kernel_id(t),
        "device": device_model(dev),
        "key": _jsonable(key),
        "config": report.winner.to_json(),
        "times_ms": {json.dumps(r.config.to_json(), sort_keys=True): r.time_ms for r in report.records if r.time_ms is not None},
    }
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        final = os.path.join(d, _digest(t, key, dev) + ".json")
        tmp = f"{final}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
        os.replace(tmp, final)
    except OSError:  # an unwritable cache costs a re-tune next time, nothing else
        return


def _seed_entries(path: str) -> list[Any]:
    data = _read_json(os.path.dirname(path) or ".", os.path.basename(path))
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("entries"), list):
        return []
    return list(data["entries"])


def seeded(t: Tuner, key: tuple[Any, ...], dev: Any) -> Config | None:
    """The seed files' choice for this kernel, key and GPU model, if any."""
    paths = [p for p in (t.at.seed, os.environ.get("ANODIZE_TUNE_SEED")) if p]
    want_key, kid, model = _jsonable(key), _kernel_id(t), device_model(dev)
    for path in paths:
        for e in _seed_entries(path):
            if isinstance(e, dict) and e.get("kernel") == kid and e.get("key") == want_key and e.get("device") in (model, None):
                c = _config_in(t, e.get("config"))
                if c is not None:
                    return c
    return None


def export(t: Tuner, path: str) -> int:
    entries = []
    for key, report in t.reports.items():
        if report.winner is None:
            continue
        entries.append({"kernel": _kernel_id(t), "key": _jsonable(key), "device": report.device or None,
                        "config": report.winner.to_json()})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"format": FORMAT, "entries": entries}, f, indent=1, sort_keys=True)
    return len(entries)
