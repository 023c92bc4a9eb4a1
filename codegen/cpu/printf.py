"""`print(...)` on the CPU backend: the generated code calls `__az_cpu_print(fmt, args)`
with the same printf format and packed 8-byte argument slots that the GPU hands
`vprintf` (codegen/llvm/effects.py), and this module formats them the way C's printf
does and writes the line to `sys.stdout` (one write per call, so lines from the
threaded backend's threads never interleave).
"""

from __future__ import annotations

import ctypes
import functools
import re
import struct
import sys
from collections.abc import Callable

import llvmlite.binding as llvm

SYMBOL = "__az_cpu_print"
_SPEC = re.compile(r"%(%|lld|llu|g|s)")


def format_printf(fmt: str, slot: Callable[[int], bytes]) -> str:
    """`fmt` with each conversion filled from the 8-byte argument slots (`slot(i)`)."""
    out: list[str] = []
    pos = 0
    i = 0
    for m in _SPEC.finditer(fmt):
        out.append(fmt[pos : m.start()])
        pos = m.end()
        conv = m.group(1)
        if conv == "%":
            out.append("%")
            continue
        raw = slot(i)
        i += 1
        if conv == "lld":
            out.append(str(struct.unpack("<q", raw)[0]))
        elif conv == "llu":
            out.append(str(struct.unpack("<Q", raw)[0]))
        elif conv == "g":
            out.append("%g" % struct.unpack("<d", raw)[0])
        else:
            out.append(ctypes.string_at(struct.unpack("<Q", raw)[0]).decode("utf-8", "replace"))
    out.append(fmt[pos:])
    return "".join(out)


def _print(fmt: int, args: int) -> None:
    try:
        text = ctypes.string_at(fmt).decode("utf-8", "replace")
        line = format_printf(text, lambda i: ctypes.string_at(args + 8 * i, 8))
        sys.stdout.write(line)
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - never unwind into JIT-compiled frames
        pass


_PRINT_T = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
_CALLBACK = _PRINT_T(_print)


@functools.cache
def register_symbols() -> None:
    """Make `__az_cpu_print` resolvable by MCJIT (once per process)."""
    llvm.add_symbol(SYMBOL, ctypes.cast(_CALLBACK, ctypes.c_void_p).value)
