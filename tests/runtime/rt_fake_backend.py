"""A stand-in CPU codegen for runtime tests: the test kernels, written with NumPy over the kernel ABI.

It produces real `CompiledKernel`s (params from the annotations, the parsed
contract, fault sites, a `cpu_entry` that reads the flat ABI arguments from raw
pointers and records faults in the arena exactly as generated code does), so
the runtime's launch, validation and fault paths run unchanged.  The
end-to-end tests run the same kernels through the real codegen.
"""

from __future__ import annotations

import ctypes
import inspect
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from anodize.language.vocab import SCALARS, SLICE_KINDS
from anodize.codegen.artifact import CompiledKernel, FaultSite, ParamSpec
from anodize.kernel import Kernel
from anodize.runtime import compile as rt_compile
from anodize.runtime.faults import RECORD

Impl = Callable[..., None]


def params_of(k: Kernel) -> tuple[ParamSpec, ...]:
    out = []
    for name, ann in k.fn.__annotations__.items():
        if name == "return":
            continue
        text = ann if isinstance(ann, str) else getattr(ann, "__name__", str(ann))
        m = re.fullmatch(r"(\w+)\[(\w+)\]", text)
        if m:
            out.append(ParamSpec(name, SLICE_KINDS[m.group(1)], SCALARS[m.group(2)]))
        else:
            out.append(ParamSpec(name, None, SCALARS[text]))
    return tuple(out)


def view(ptr: int, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) if shape else 1
    if n == 0:
        return np.empty(shape, dt)
    raw = (ctypes.c_char * (n * dt.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dt).reshape(shape)


def record(addr: int, site: int, index: int, length: int, count: int) -> None:
    rec = np.frombuffer((ctypes.c_char * RECORD.itemsize).from_address(addr), dtype=RECORD)
    if rec["count"][0] == 0:
        rec["site"] = site
        rec["index"] = index
        rec["length"] = length
    rec["count"] += count


def _threads_1d(grid: tuple[int, ...], block: tuple[int, ...]) -> np.ndarray:
    return np.arange(grid[0] * block[0])


def _vecadd(grid: Any, block: Any, flat: list[Any], fault: int, rank: int, shared: int) -> None:
    pa, na, pb, nb, pc, nc = (int(x) for x in flat)
    a, b, c = view(pa, (na,), np.float32), view(pb, (nb,), np.float32), view(pc, (nc,), np.float32)
    i = _threads_1d(grid, block)
    i = i[i < nc]
    for site, (n, src) in enumerate(((na, "a"), (nb, "b"))):
        bad = i[i >= n]
        if bad.size:
            record(fault, site, int(bad[0]), n, int(bad.size))
    ok = i[(i < na) & (i < nb)]
    c[ok] = a[ok] + b[ok]


def _shift_read(grid: Any, block: Any, flat: list[Any], fault: int, rank: int, shared: int) -> None:
    pa, na, pc, nc = (int(x) for x in flat)
    a, c = view(pa, (na,), np.float32), view(pc, (nc,), np.float32)
    i = _threads_1d(grid, block)
    i = i[i < nc]
    bad = i[i + 1 >= na]
    if bad.size:
        record(fault, 0, int(bad[0]) + 1, na, int(bad.size))
    ok = i[i + 1 < na]
    c[ok] = a[ok + 1]


def _fill(grid: Any, block: Any, flat: list[Any], fault: int, rank: int, shared: int) -> None:
    po, no, value, rows, cols = flat
    out = view(int(po), (int(no),), np.int32)
    i = _threads_1d(grid, block)
    out[i[i < int(no)]] = np.int32(value)


def _scale2d(grid: Any, block: Any, flat: list[Any], fault: int, rank: int, shared: int) -> None:
    pm, mr, mc, po, orows, ocols, k = flat
    m = view(int(pm), (int(mr), int(mc)), np.float32)
    out = view(int(po), (int(orows), int(ocols)), np.float32)
    r = np.arange(grid[1] * block[1])[:, None]
    c = np.arange(grid[0] * block[0])[None, :]
    inside = (r < int(orows)) & (c < int(ocols))
    readable = inside & (r < int(mr)) & (c < int(mc))
    if (inside & ~readable).any():
        rr, cc = np.nonzero(inside & ~readable)
        record(fault, 0, int(rr[0]) * int(mc) + int(cc[0]), int(mr) * int(mc), int(rr.size))
    rr, cc = np.nonzero(readable)
    out[rr, cc] = m[rr, cc] * np.float32(k)


def _histogram(grid: Any, block: Any, flat: list[Any], fault: int, rank: int, shared: int) -> None:
    px, nx, ph, nh = (int(x) for x in flat)
    x, h = view(px, (nx,), np.int32), view(ph, (nh,), np.int32)
    i = _threads_1d(grid, block)
    bins = x[i[i < nx]].astype(np.int64)
    bad = bins[(bins < 0) | (bins >= nh)]
    if bad.size:
        record(fault, 0, int(bad[0]), nh, int(bad.size))
    np.add.at(h, bins[(bins >= 0) & (bins < nh)], 1)


def _future_only(grid: Any, block: Any, flat: list[Any], fault: int, rank: int, shared: int) -> None:
    pc, nc = (int(x) for x in flat)
    c = view(pc, (nc,), np.float32)
    i = _threads_1d(grid, block)
    c[i[i < nc]] = 1.0


def _copy_nc(grid: Any, block: Any, flat: list[Any], fault: int, rank: int, shared: int) -> None:
    pa, na, pc, nc = (int(x) for x in flat)
    if rank != 1 or tuple(grid)[1:] != (1, 1) or tuple(block)[1:] != (1, 1):
        # a witness from a launch of the wrong rank, or with y or z extents, admits no write
        record(fault, 0, 0, 0, int(np.prod(grid) * np.prod(block)))
        return
    a, c = view(pa, (na,), np.float32), view(pc, (nc,), np.float32)
    i = _threads_1d(grid, block)
    i = i[i < nc]
    bad = i[i >= na]
    if bad.size:
        record(fault, 1, int(bad[0]), na, int(bad.size))
    ok = i[i < na]
    c[ok] = a[ok]


def _empty(grid: Any, block: Any, flat: list[Any], fault: int, rank: int, shared: int) -> None:
    pass


IMPLS: dict[str, tuple[Impl, tuple[tuple[str, str, str], ...]]] = {
    # name -> (entry, fault sites as (kind, param, source text on the line))
    "vecadd": (_vecadd, (("read", "a", "a[i] + b[i]"), ("read", "b", "a[i] + b[i]"))),
    "shift_read": (_shift_read, (("read", "a", "a[i.get() + 1]"),)),
    "fill": (_fill, ()),
    "scale2d": (_scale2d, (("read", "m", "m[ij.row, ij.col]"),)),
    "histogram": (_histogram, (("atomic", "h", "h.add("),)),
    "future_only": (_future_only, ()),
    "copy_nc": (_copy_nc, (("rank", "", "thread.index_1d()"), ("read", "a", "c[i] = a[i]"))),
    "empty": (_empty, ()),
}

compile_count: dict[str, int] = {}


def compile_cpu(k: Kernel, *, bounds_checks: bool = True) -> CompiledKernel:
    impl, site_specs = IMPLS[k.__name__]
    compile_count[k.__name__] = compile_count.get(k.__name__, 0) + 1
    lines, first = inspect.getsourcelines(k.fn)
    path = inspect.getsourcefile(k.fn) or ""
    sites = []
    for kind, param, text in site_specs:
        off = next(n for n, line in enumerate(lines) if text in line)
        sites.append(FaultSite(path, first + off, lines[off].index(text) + 1, kind, param))
    contract = k.contract
    return CompiledKernel(
        name=k.__name__,
        entry=k.__name__,
        params=params_of(k),
        contract=contract,
        domain=contract.domain if contract else 1,
        arch="cpu",
        llvm_ir="; fake",
        fault_sites=tuple(sites),
        cpu_entry=impl,
        source_path=path,
        source_line=first,
    )


def install(monkeypatch: Any) -> None:
    """Route the runtime's CPU compile path (and the checker gate) to the fakes."""
    monkeypatch.setattr(rt_compile, "_codegen_cpu", compile_cpu)
    monkeypatch.setattr(rt_compile, "_enforce", lambda k: None)
