"""A kernel's source and a specialisation as cache keys: what the runtime keys compiled code by
(runtime/compile.py `source_hash`), light enough for the facade and a cached load (no parse)."""

from __future__ import annotations

import inspect
import linecache
import struct
from collections.abc import Callable
from typing import Any

__all__ = ["module_source", "constant_key", "spec_key", "spec_repr"]


def module_source(fn: Callable[..., Any]) -> tuple[str, str]:
    """(path, text) of the module that defines `fn`, as `linecache` holds it now."""
    code = getattr(fn, "__code__", None)
    try:
        path = inspect.getsourcefile(fn) or getattr(code, "co_filename", "") or ""
    except TypeError:
        path = getattr(code, "co_filename", "") or ""
    if not path:
        return "", ""
    linecache.checkcache(path)
    return path, "".join(linecache.getlines(path))


def constant_key(v: Any) -> Any:
    """A Constant's value as a cache key: a float by its exact bits (`-0.0 == 0.0` and they hash
    alike, but they are two specialisations; so are NaN and -NaN, and NaNs of other payloads),
    anything else as itself."""
    if isinstance(v, float):
        return ("f64", struct.pack("<d", v).hex())
    return v


def spec_key(spec: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, Any], ...]:
    """A specialisation as a cache key: each value by `constant_key`."""
    if not any(isinstance(v, float) for _, v in spec):
        return spec
    return tuple((n, constant_key(v)) for n, v in spec)


def spec_repr(kernel: Any) -> str:
    """A kernel's specialisation (its `spec`) as text for a key: floats by their bits (NaN and
    -NaN, 0.0 and -0.0 are two specialisations, and `repr` would print them alike)."""
    spec = getattr(kernel, "spec", None)
    if not spec:
        return repr(spec)
    return repr(spec_key(spec))
