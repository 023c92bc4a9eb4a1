"""A kernel's parameters and fault sites as the compiled artifact records them (codegen/artifact.py):
the part of the typed model a cached load reads, kept apart from the IR (language/ir.py, which
re-exports both) so that loading a cached kernel does not build the IR's classes."""

from __future__ import annotations

from anodize.language.records import dataclass
from anodize.language.vocab import ScalarInfo, SliceKindInfo

__all__ = ["FaultSite", "ParamSpec"]


@dataclass(frozen=True)
class ParamSpec:
    name: str
    slice_kind: SliceKindInfo | None  # None for a scalar
    scalar: ScalarInfo  # element type of a slice, or the scalar's type

    @property
    def is_slice(self) -> bool:
        return self.slice_kind is not None

    @property
    def rank(self) -> int:
        return self.slice_kind.rank if self.slice_kind else 0

    @property
    def is_output(self) -> bool:
        return bool(self.slice_kind and self.slice_kind.output)

    @property
    def readonly(self) -> bool:
        return bool(self.slice_kind and not self.slice_kind.output)


@dataclass(frozen=True)
class FaultSite:
    path: str
    line: int
    col: int
    kind: str  # "read" | "write" | "atomic" | "rank" (a witness from a launch of the wrong rank) | "assert"
    param: str  # the slice (or "" for rank and assert faults)
    message: str = ""  # an `assert`'s message (its string literal), else ""
