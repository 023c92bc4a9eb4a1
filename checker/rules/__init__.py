"""One rule per file; each carries its VALID and INVALID examples.

`ALL_RULES` is the order the engine runs them in (one batched walk, anodize/language/walk.py)."""

from __future__ import annotations

from .alias import Alias
from .atomic import Atomic
from .barrier_divergence import BarrierDivergence
from .base import EXAMPLE_HEADER, Rule, RuleContext
from .contract import Contract
from .disjoint_index import DisjointIndex
from .global_write import GlobalWrite
from .index_domain import IndexDomain
from .index_forge import IndexForge
from .launch_rank import LaunchRank
from .no_contract import NoContract
from .shared_race import SharedRace
from .shared_write import SharedWrite
from .signature import Signature
from .type_errors import Typing
from .unsafe import Unsafe
from .unsupported import Unsupported
from .warp_divergence import WarpDivergence

ALL_RULES: tuple[type[Rule], ...] = (
    Unsupported,
    Signature,
    SharedWrite,
    DisjointIndex,
    IndexForge,
    IndexDomain,
    Atomic,
    GlobalWrite,
    Unsafe,
    BarrierDivergence,
    WarpDivergence,
    SharedRace,
    Contract,
    NoContract,
    Alias,
    LaunchRank,
    Typing,
)

__all__ = ["ALL_RULES", "EXAMPLE_HEADER", "Rule", "RuleContext"]
