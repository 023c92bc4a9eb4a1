"""Tracebacks a user reads: a refused launch or a failed check shows the user's frames only.

The public entry points (`k[cfg](...)`, `k[cfg]`, `.compile()`, `.unsafe_launch`) raise the
user errors (`CheckError`, `LaunchError` and its subclasses, `OutOfMemoryError`,
`KernelFault`) with no anodize frames below them, but the entry point's own frame would
still be printed.  `install()` wraps `sys.excepthook` so that, for those errors only, frames
running anodize's own modules are left out of the printed traceback; any other exception,
an anodize internal error included, prints in full.  pytest and IPython hide the same
frames through the `__tracebackhide__` local the entry points set.  `ANODIZE_TRACEBACK=full`
turns the filter off.
"""

from __future__ import annotations

import os
import sys
import types
from typing import Any


def _ours() -> tuple[type[BaseException], ...]:
    """The errors whose tracebacks are filtered.  `import anodize` loads no error class: none
    of them can have been raised before their module was loaded, so none is then."""
    errors = sys.modules.get("anodize.language.errors")
    if errors is None:
        return ()
    return (*errors.USER_ERRORS, errors.KernelFault)


def _internal(frame: types.FrameType) -> bool:
    name = frame.f_globals.get("__name__", "")
    return isinstance(name, str) and (name == "anodize" or name.startswith("anodize."))


def user_frames(tb: types.TracebackType | None) -> types.TracebackType | None:
    """The traceback `tb` without the frames of anodize's own modules."""
    kept = []
    while tb is not None:
        if not _internal(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    out: types.TracebackType | None = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


def _hook(previous: Any) -> Any:
    def excepthook(kind: type[BaseException], value: BaseException, tb: types.TracebackType | None) -> None:
        if isinstance(value, _ours()):
            tb = user_frames(tb)
            value.__traceback__ = tb
        previous(kind, value, tb)

    excepthook.__anodize__ = True  # type: ignore[attr-defined]
    return excepthook


def install() -> None:
    """Wrap `sys.excepthook` once (idempotent); a no-op under `ANODIZE_TRACEBACK=full`."""
    if os.environ.get("ANODIZE_TRACEBACK", "").lower() == "full":
        return
    if getattr(sys.excepthook, "__anodize__", False):
        return
    sys.excepthook = _hook(sys.excepthook)
