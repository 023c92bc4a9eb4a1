"""Foreign device functions given as LTO-IR, linked with a kernel's PTX through nvJitLink.

A kernel calling a foreign device function (`az.foreign.device_function`) is compiled to
relocatable PTX with an `.extern .func` per function.  A function given as PTX is linked by
the loader (cuda.core's Linker); one given as LTO-IR (NVVM IR in NVIDIA's container: nvcc or
NVRTC with `-dlto`) is linked here, by nvJitLink (`cuda.bindings.nvjitlink`: the library
comes from the `nvidia-nvjitlink` wheel or the CUDA toolkit) with link-time optimisation,
into a cubin for the GPU's architecture.  nvJitLink is a compiler: nothing here needs a GPU.

Two steps, each cached:

- `ltoir_signature`: the function's real signature (each parameter's and the result's width
  in bits), read from the PTX nvJitLink makes of the LTO-IR and a probe (NVRTC-compiled LTO-IR
  holding the symbol's address, so link-time optimisation keeps the function as a `.func`);
  `func_signature` reads it from PTX text, so both kinds of code are checked alike
  against the declaration (anodize/foreign.py).
- `link_cubin`: the kernel's PTX, its PTX functions and its LTO-IR functions linked into a
  cubin; kept for the process and in the disk cache under a key of the PTX's and every
  input's SHA-256, nvJitLink's version and the architecture.

nvJitLink's refusals are `LinkFailure`s with a reason ("library", "symbol", "arch", "input",
"link") and nvJitLink's log; the declaration turns them into located diagnostics.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

from anodize.runtime import diskcache, lazy
from anodize.runtime.nvrtc import NvrtcFailure, compile_ltoir

__all__ = ["LTOIR_MAGIC", "LinkFailure", "nvjitlink_version", "func_signature", "ltoir_signature", "link_cubin", "link_inputs"]

LTOIR_MAGIC = b"\xedCN\x7f"  # the first bytes of an NVVM LTO-IR container (nvcc / NVRTC `-dlto`)

Signature = tuple[tuple[int, ...], int | None]  # (each parameter's width in bits, the result's: None for void)


class LinkFailure(Exception):
    """nvJitLink (or NVRTC, for the probe) refused: `reason` is "library" (not installed),
    "symbol" (not defined), "arch" (LTO-IR for a newer GPU), "input" (not LTO-IR) or "link"."""

    def __init__(self, reason: str, log: str):
        super().__init__(f"{reason}: {log}")
        self.reason = reason
        self.log = log


def _nvjitlink() -> Any:
    try:
        module = lazy.cuda_nvjitlink()
        module.version()  # loads the library itself
    except Exception as e:  # ImportError, or cuda.pathfinder's DynamicLibNotFoundError (a RuntimeError)
        raise LinkFailure("library", f"nvJitLink: {e}") from None
    return module


@lru_cache(maxsize=1)
def nvjitlink_version() -> str:
    """nvJitLink's version ("13.5"); LinkFailure("library") without it."""
    major, minor = _nvjitlink().version()
    return f"{major}.{minor}"


def _link(inputs: list[tuple[str, bytes, str]], arch: str, *, ptx: bool) -> bytes:
    """nvJitLink over `inputs` ((kind "ptx" | "ltoir", data, name) each; `-lto` when one is
    LTO-IR): the linked cubin, or the linked PTX (`ptx`: every input LTO-IR)."""
    nvj = _nvjitlink()
    lto = any(kind == "ltoir" for kind, _, _ in inputs)
    options = [f"-arch={arch}"] + (["-lto"] if lto else []) + (["-ptx"] if ptx else [])
    handle = nvj.create(len(options), options)
    try:
        for kind, data, name in inputs:
            try:
                nvj.add_data(handle, nvj.InputType.LTOIR if kind == "ltoir" else nvj.InputType.PTX, data, len(data), name)
            except nvj.nvJitLinkError as e:
                raise _failure(nvj, handle, e, default="input") from None
        try:
            nvj.complete(handle)
        except nvj.nvJitLinkError as e:
            raise _failure(nvj, handle, e, default="link") from None
        size = nvj.get_linked_ptx_size(handle) if ptx else nvj.get_linked_cubin_size(handle)
        out = bytearray(size)
        (nvj.get_linked_ptx if ptx else nvj.get_linked_cubin)(handle, out)
        return bytes(out).rstrip(b"\0") if ptx else bytes(out)
    finally:
        nvj.destroy(handle)


def _failure(nvj: Any, handle: Any, e: Exception, *, default: str) -> LinkFailure:
    size = nvj.get_error_log_size(handle)
    buf = bytearray(size)
    if size:
        nvj.get_error_log(handle, buf)
    log = " ".join(bytes(buf).decode(errors="replace").replace("\0", " ").split()) or str(e)
    status = getattr(e, "status", None)
    if status == int(nvj.Result.ERROR_ARCH_MISMATCH):
        return LinkFailure("arch", log)
    if "Undefined reference" in log or "undefined reference" in log:
        return LinkFailure("symbol", log)
    if status in (int(nvj.Result.ERROR_INCORRECT_INPUT_TYPE), int(nvj.Result.ERROR_INVALID_INPUT)):
        return LinkFailure("input", log)
    return LinkFailure(default, log)


# ---- the signature -----------------------------------------------------------------------

_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.[a-z]+?(\d+)\s+[\w$%]+\s*(?:\[(\d+)\])?")


def _widths(text: str) -> tuple[int, ...]:
    parts = [p for p in text.split(",") if p.strip()]
    out: list[int] = []
    for part in parts:
        m = _PARAM.search(part)
        out.append(int(m.group(1)) * int(m.group(2) or 1) if m else -1)  # -1: a parameter no scalar passes in
    return tuple(out)


def func_signature(ptx: str, symbol: str) -> Signature | None:
    """The signature of the `.func symbol` PTX text defines (with a body: an `.extern`
    declaration defines nothing), or None."""
    sym = re.escape(symbol)
    for m in re.finditer(rf"^[ \t]*((?:\.\w+[ \t]+)*)\.func\s*(?:\(([^)]*)\))?\s*{sym}\s*\(([^)]*)\)\s*(?:\.\w+\s*)*(;|\{{)", ptx, re.M):
        if ".extern" in m.group(1) or m.group(4) == ";":
            continue
        ret = _widths(m.group(2) or "")
        return _widths(m.group(3)), (ret[0] if len(ret) == 1 else None if not ret else -1)
    return None


@lru_cache(maxsize=64)
def _probe(symbol: str, arch: str) -> bytes:
    """LTO-IR that keeps `symbol` alive through link-time optimisation (a global holds its
    address), compiled by NVRTC for `arch`; its declared type is no part of what is read."""
    source = f'extern "C" __device__ void {symbol}();\n__device__ void (*__az_keep_{symbol})() = {symbol};\n'
    try:
        return compile_ltoir(source, arch, ())
    except NvrtcFailure as e:
        raise LinkFailure("library" if e.missing else "link", e.log) from None


@lru_cache(maxsize=256)
def _ltoir_signature(digest: str, ltoir: bytes, symbol: str, arch: str) -> Signature | None:
    ptx = _link([("ltoir", ltoir, "function"), ("ltoir", _probe(symbol, arch), "probe")], arch, ptx=True)
    return func_signature(ptx.decode(errors="replace"), symbol)


def ltoir_signature(ltoir: bytes, symbol: str, arch: str) -> Signature | None:
    """The signature of `symbol` as the LTO-IR defines it for `arch` (None: it defines no such
    function); LinkFailure when nvJitLink or NVRTC refuse."""
    if not ltoir.startswith(LTOIR_MAGIC):
        raise LinkFailure("input", "the bytes do not start with the LTO-IR container's magic (0x7f4e43ed)")
    try:
        return _ltoir_signature(hashlib.sha256(ltoir).hexdigest(), ltoir, symbol, arch)
    except LinkFailure as e:
        if e.reason == "symbol":  # the probe's reference found no definition
            return None
        raise


# ---- the link ----------------------------------------------------------------------------

_LINKED: dict[str, bytes] = {}


def link_inputs(ptx: str, links: tuple[str | bytes, ...], arch: str) -> dict[str, Any]:
    """The key's parts of a link: the SHA-256 of the kernel's PTX and of each function's code
    (PTX text or LTO-IR bytes, by kind), nvJitLink's version and the architecture."""
    def sha(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    return {"kind": "foreign-link", "ptx": sha(ptx.encode()), "arch": arch, "nvjitlink": nvjitlink_version(),
            "links": [["ltoir", sha(x)] if isinstance(x, bytes) else ["ptx", sha(x.encode())] for x in links]}


def link_cubin(ptx: str, links: tuple[str | bytes, ...], arch: str, name: str = "kernel") -> bytes:
    """The cubin of the kernel's PTX linked with its foreign functions' code (PTX text or LTO-IR
    bytes) for `arch`, from the process's or the disk's cache when linked before."""
    inputs = link_inputs(ptx, links, arch)
    key = diskcache.make_key(inputs)
    hit = _LINKED.get(key)
    if hit is None and diskcache.enabled():
        got = diskcache.load(key)
        if got is not None and got[0].get("inputs") == inputs and got[1].get("linked.cubin", b"").startswith(b"\x7fELF"):
            hit = got[1]["linked.cubin"]
    if hit is None:
        parts = [("ptx", ptx.encode(), name)]
        parts += [("ltoir", x, f"{name}.foreign{i}") if isinstance(x, bytes) else ("ptx", x.encode(), f"{name}.foreign{i}")
                  for i, x in enumerate(links)]
        hit = _link(parts, arch, ptx=False)
        if diskcache.enabled():
            diskcache.store(key, {"inputs": inputs}, {"linked.cubin": hit})
    _LINKED[key] = hit
    return hit
