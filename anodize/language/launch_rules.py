"""The launch-site decisions, made in one place for every front end.

    problem = launch_shape_problem(domain, block, config_rank, config_block, grid)

`anodize check` (checker/rules/launch_rank.py, from literal configs), the mypy plugin
(checker/mypy/launches.py, from typed configs) and the runtime (runtime/launch.py, from
the real config, every launch) ask this function, and each renders the answer in its
own medium (a diagnostic, or a `ContractViolation`): one rule, one decision.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from anodize.language.records import dataclass
from typing import Literal

__all__ = ["ShapeProblem", "launch_shape_problem", "alias_pairs", "pad3", "trim"]

_AXES = ("x", "y", "z")


@dataclass(frozen=True)
class ShapeProblem:
    kind: Literal["rank", "block", "extra"]
    domain: int
    config_rank: int | None = None
    config_block: tuple[int, ...] | None = None  # as written (trailing 1s trimmed)
    want_block: tuple[int, ...] | None = None
    what: str = ""  # extra: "grid" | "block"
    axis: str = ""  # extra: "y" | "z"
    size: int = 0  # extra: the dimension's size


def pad3(t: tuple[int, ...] | list[int]) -> tuple[int, int, int]:
    p = (tuple(t) + (1, 1, 1))[:3]
    return (int(p[0]), int(p[1]), int(p[2]))


def trim(t: tuple[int, ...], keep: int = 1) -> tuple[int, ...]:
    """(128, 1, 1) -> (128,): a block as one writes it."""
    dims = list(t)
    while len(dims) > keep and dims[-1] == 1:
        dims.pop()
    return tuple(dims)


def launch_shape_problem(
    domain: int,
    block: tuple[int, ...] | None,
    config_rank: int | None,
    config_block: tuple[int, ...] | None,
    grid: tuple[int, ...] | None = None,
) -> ShapeProblem | None:
    """What is wrong with launching a kernel of contract `(domain, block)` with a config of
    rank `config_rank`, block `config_block` and grid `grid` (None: not known here)."""
    if config_rank is not None and config_rank != domain:
        return ShapeProblem("rank", domain, config_rank=config_rank)
    if block is not None and config_block is not None and pad3(block) != pad3(config_block):
        return ShapeProblem("block", domain, config_block=trim(tuple(config_block)), want_block=tuple(block))
    # A runtime config of the domain's rank has 1s beyond it (its rank is its number of
    # extents); this catches configs whose rank is not known here (the checker, mypy).
    return _extra_dimension(domain, config_block, grid)


def _extra_dimension(domain: int, config_block: tuple[int, ...] | None, grid: tuple[int, ...] | None) -> ShapeProblem | None:
    """Every dimension beyond the domain is 1: else two threads share one witness."""
    for what, dims in (("block", config_block), ("grid", grid)):
        if dims is None:
            continue
        full = pad3(dims)
        for k in range(domain, 3):
            if full[k] != 1:
                return ShapeProblem("extra", domain, what=what, axis=_AXES[k], size=full[k])
    return None


def alias_pairs(outputs: Sequence[bool], keys: Sequence[Hashable | None]) -> list[tuple[int, int]]:
    """The aliasing a launch must refuse: (output index, other index) for arguments that are
    one buffer (equal keys; None: unknown), an output among them.  Each output is reported
    with its first partner, each pair once (two outputs: at the earlier one).  How a key is
    found is the front end's (a name's binding, a mypy expression, a pointer range)."""
    out: list[tuple[int, int]] = []
    seen: set[frozenset[int]] = set()
    for o, key in enumerate(keys):
        if key is None or not outputs[o]:
            continue
        for j, other in enumerate(keys):
            pair = frozenset((o, j))
            if j != o and other == key and pair not in seen:
                seen.add(pair)
                out.append((o, j))
                break
    return out
