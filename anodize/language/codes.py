"""The diagnostic codes and their one-line summaries (`anodize check --explain`, mypy's
error codes): a table of its own, so that the mypy plugin registers the codes without
loading the message catalogue."""

from __future__ import annotations

# code -> one-line summary (shown by `anodize check --explain` and registered with mypy)
CODES: dict[str, str] = {
    "az-syntax": "the file does not parse as Python",
    "az-unsupported": "a construct outside the kernel subset",
    "az-type": "a type error inside a kernel",
    "az-signature": "a kernel or helper signature the language does not allow",
    "az-shared-write": "a write to a shared, read-only slice",
    "az-disjoint-index": "a disjoint slice indexed by anything but this thread's witness",
    "az-index-forge": "a forged or smuggled index witness",
    "az-index-domain": "a witness of the wrong index space for the kernel's domain",
    "az-atomic": "a plain read or write of an atomic slice, or an atomic scope or ordering that cannot hold",
    "az-global-write": "a kernel writing state outside its arguments",
    "az-unsafe": "an unsafe-tier operation outside `with az.unsafe():`",
    "az-barrier-divergence": "a barrier reachable under thread-dependent control flow",
    "az-spin-wait": "a loop whose exit waits on memory other threads write, outside `with az.unsafe():`",
    "az-warp-divergence": "a full-warp operation under lane-dependent control flow, or without a block of whole warps",
    "az-contract": "a malformed launch contract",
    "az-no-contract": "a safe launch of a kernel that has no launch contract",
    "az-alias": "one buffer passed as an output and as another argument",
    "az-launch-rank": "a launch configuration of the wrong rank or block for the contract",
    "az-requires": "a launch that visibly violates a contract's `requires`",
    "az-shared-race": "shared-memory accesses that may race (no barrier between them)",
    "az-rebound": "a kernel reads or calls a module-level name that is bound more than once",
    "az-reserved": "a name the compiler reserves for itself",
    "az-stale-artifact": "a package built by `anodize build` whose kernels' source changed since the build",
    "az-internal": "an internal compiler error (a bug in anodize, not in the kernel)",
    "az-foreign-link": "a foreign device function that does not link with the kernel calling it (no such symbol, another signature, a newer GPU's LTO-IR, no linker)",
    "az-fma-matmul": "a `tile.matmul` that runs on FP32 FMAs on a GPU with tensor cores (a warning of the compile)",
    "az-ignore": "an ignore comment that cannot apply: inside a kernel, without codes, with an unknown code, or unused",
}
