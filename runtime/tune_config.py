"""An autotuning configuration, `az.Config` (declared here, where the tuner reads it;
anodize/autotuning.py exports it)."""

from __future__ import annotations

import json
from typing import Any

from anodize.language.errors import ArgumentError

__all__ = ["Config"]

# the options a configuration may set beside Constants, and the kernels they apply to
_OPTIONS = ("num_warps", "num_stages", "block")


class Config:
    """One autotuning configuration: `az.Config(BM=128, BN=256, BK=64, num_warps=8, num_stages=3)`.

    Keyword arguments other than the options bind the kernel's `az.Constant` parameters of those
    names; `cfg.BM` reads one back (in a grid function: `lambda cfg: ...for_tiles(..., (cfg.BM,
    cfg.BN))`).  Options: `num_warps` and `num_stages` (tile kernels: the block is `num_warps * 32`
    threads; `num_stages` the software-pipelining depth of loops that carry a matmul), `block`
    (SIMT kernels whose contract declares no block: the launch's block)."""

    __slots__ = ("constants", "num_warps", "num_stages", "block", "_key", "__dict__")

    def __init__(self, *, num_warps: int | None = None, num_stages: int | None = None,
                 block: int | tuple[int, ...] | None = None, **constants: Any):
        for name, v in (("num_warps", num_warps), ("num_stages", num_stages)):
            if v is not None and (type(v) is not int or v < 1):
                raise ArgumentError(f"az.Config: `{name}` must be a positive int, got {v!r}")
        if block is not None:
            dims = (block,) if isinstance(block, int) else tuple(block)
            if not dims or len(dims) > 3 or any(type(d) is not int or d < 1 for d in dims):
                raise ArgumentError(f"az.Config: `block` must be a positive int or a tuple of 1-3 of them, got {block!r}")
        for name, v in constants.items():
            if not isinstance(v, (bool, int, float)):
                raise ArgumentError(f"az.Config: `{name}` binds an `az.Constant`: an int, float or bool, got {v!r}")
        object.__setattr__(self, "constants", dict(sorted(constants.items())))
        object.__setattr__(self, "num_warps", num_warps)
        object.__setattr__(self, "num_stages", num_stages)
        object.__setattr__(self, "block", block)
        object.__setattr__(self, "_key", json.dumps(self.to_json(), sort_keys=True))
        # each constant also an instance attribute, so `cfg.BM` in a grid function (called on
        # every launch of an autotuned kernel) is a plain lookup, not a failed one and __getattr__
        self.__dict__.update((k, v) for k, v in self.constants.items() if not hasattr(type(self), k))

    def __getattr__(self, name: str) -> Any:
        constants = object.__getattribute__(self, "constants")
        if name in constants:
            return constants[name]
        raise AttributeError(f"az.Config has no constant or option `{name}` ({self!r})")

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("az.Config is immutable")

    def to_json(self) -> dict[str, Any]:
        """The configuration as JSON-ready data (the persistent cache and seed files store this)."""
        out: dict[str, Any] = dict(self.constants)
        for name in _OPTIONS:
            v = getattr(self, name)
            if v is not None:
                out[name] = list(v) if isinstance(v, tuple) else v
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Config:
        """The configuration `to_json` wrote (raises on anything else)."""
        data = dict(data)
        block = data.pop("block", None)
        return cls(block=tuple(block) if isinstance(block, list) else block, **data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{k}={v!r}" for k, v in self.to_json().items()) + ")"
