"""The tensor-core attention's tile configuration, decided in the language.

The attention form (language/tile_forms.py) keeps its tiles in registers and its operands in
shared memory the tensor-core routine owns -- when that routine takes the form.  Whether it
does depends on the tile shape, the head dimension and the warps alone (`AttnConfig`, the
emitter's configuration: codegen/tensorcore/attention.py lowers it) and on a block's shared memory;
`attention_choice` makes that choice for the lowering (codegen/tile/attention.py) and, with
the least shared memory any arch with tensor cores gives a block (`tile_plan.STAGING_LIMIT`),
for the typer: a form `attention_on_tensor_cores` accepts is lowered onto tensor cores on
every such GPU, so the on-chip bound need not count its tiles; any other attention-shaped
kernel is counted like every tile kernel.
"""

from __future__ import annotations

from typing import Any

from anodize.language.records import dataclass
from anodize.language.tile_storage import STATIC_SHARED_MAX_BYTES as STATIC_SHARED

__all__ = ["REG_BUDGET", "AttnConfig", "attention_choice", "attention_on_tensor_cores"]

REG_BUDGET = 232  # f32/b32 registers a thread may hold in fragments (S, P, O, Q) before we say no


@dataclass(frozen=True)
class AttnConfig:
    tile_m: int
    tile_n: int
    head_dim: int
    num_warps: int
    stages: int = 1  # K/V buffers: 1 (K[j+1] copied during the softmax and P V), 2 (a ring)
    lazy: bool = False  # rescale O only when a row of the warp has a new maximum
    q_regs: bool = True  # Q's fragments in registers for the whole loop (else ldmatrix'd from shared every key tile)
    groups: int = 1  # warp groups splitting the key tiles (each all BM rows, its own K/V ring and barrier), merged at the end

    def __post_init__(self) -> None:
        m, n, d, w = self.tile_m, self.tile_n, self.head_dim, self.num_warps
        if self.stages not in (1, 2):
            raise ValueError("stages must be 1 or 2")
        for name, v in (("BN", n), ("D", d)):
            if v < 16 or v & (v - 1):
                raise ValueError(f"{name} must be a power of two, at least 16")
        if d > 256 or n > 128:
            raise ValueError("D at most 256, BN at most 128")
        if self.groups not in (1, 2) or w % self.groups:
            raise ValueError("one or two warp groups")
        if m % (16 * (w // self.groups)) or self.mt not in (1, 2):
            raise ValueError("BM must be 16 or 32 rows a warp")
        t = w * 32
        if (n * d // 8) % (t // self.groups) or (m * d // 8) % t:
            raise ValueError("tiles do not split into 16-byte copies over the block")
        if self.regs() > REG_BUDGET:
            raise ValueError("too many fragment registers")
        if self.groups > 1 and self.merge_bytes() > self.groups * self.stages * self.kv_bytes() + self.q_bytes():
            raise ValueError("the merge does not fit in the K/V and Q buffers")

    @property
    def mt(self) -> int:
        return self.tile_m // (16 * (self.num_warps // self.groups))

    def merge_bytes(self) -> int:
        """A group's (m, l, O) fragments, handed to group 0 through shared memory at the end."""
        return self.threads // self.groups * self.mt * (self.head_dim // 8 + 1) * 16

    @property
    def threads(self) -> int:
        return self.num_warps * 32

    def regs(self) -> int:
        d, n = self.head_dim, self.tile_n
        q = d // 4 if self.q_regs else 4  # Q: all its fragments, or one k-step's
        return self.mt * (d // 2 + q + n // 2 + n // 4)  # O, Q, S, P per thread

    def min_blocks(self) -> int:
        """Blocks per SM to ask ptxas for (`.minnctapersm`): as many as 64K registers hold at the
        fragments plus 32 registers a thread (addresses, softmax temporaries).  Without the hint
        ptxas spends registers freely and a block too many stops fitting (H200: 8 warps at d 64
        took 146 registers, one block per SM; capped at 128, two)."""
        return max(1, 65536 // (self.threads * (self.regs() + 32)))

    def kv_bytes(self) -> int:
        """One stage: a K and a V tile."""
        return 2 * self.tile_n * self.head_dim * 2

    def q_bytes(self) -> int:
        return self.tile_m * self.head_dim * 2

    def smem_bytes(self, avail: int) -> int:
        """K and V buffers, and Q's staging beside them when it fits in `avail`, else over them
        (Q read from shared every key tile: always beside them, however large)."""
        kv = self.groups * self.stages * self.kv_bytes()
        n = kv + self.q_bytes() if kv + self.q_bytes() <= avail or not self.q_regs else max(kv, self.q_bytes())
        return max(n, self.merge_bytes()) if self.groups > 1 else n


def attention_choice(bm: int, bn: int, d: int, warps: int, used: int, limit: int, own_dynamic: bool, *,
                     groups: tuple[int, ...] = (1,), q_regs: tuple[bool, ...] = (True, False),
                     stages: tuple[int, ...] = (2, 1), lazy: bool = True, dynamic: bool = True) -> tuple[Any, int, bool] | None:
    """(AttnConfig, its shared bytes, whether they are the compiler's dynamic buffer) for a
    (BM, BN, D) tile over `warps` warps, or None.  `used`: the kernel's static shared bytes;
    `limit`: a block's opt-in shared limit.  Q's fragments stay in registers when the register
    budget holds them (else Q is read from shared every key tile); K/V take a two-stage ring
    when it fits, else one stage; the buffers are static shared memory up to 48 KiB, else the
    compiler's dynamic buffer -- when the kernel has no dynamic array of its own and the SM
    holds the blocks the registers allow (`AttnConfig.min_blocks`)."""
    for g in groups:
        for q in q_regs:
            for st in stages:
                try:
                    cfg = AttnConfig(bm, bn, d, warps, st, lazy=lazy, q_regs=q, groups=g)
                except ValueError:
                    continue
                nbytes = cfg.smem_bytes(STATIC_SHARED - used)
                if used + nbytes <= STATIC_SHARED:
                    return cfg, nbytes, False
                nbytes = cfg.smem_bytes(limit - used)
                if dynamic and not own_dynamic and (used + nbytes + 1024) * cfg.min_blocks() <= limit + 1024:
                    return cfg, nbytes, True
    return None


def attention_on_tensor_cores(tile: tuple[int, int, int], warps: int, limit: int) -> bool:
    """Does every GPU with tensor cores (a block's opt-in shared memory at least `limit`) lower an
    attention form of this (BM, BN, D) tile over `warps` warps onto them (the defaults of
    `attention_choice`, no shared array of the kernel's own: a tile kernel declares none)?"""
    bm, bn, d = tile
    return attention_choice(bm, bn, d, warps, 0, limit, False) is not None
