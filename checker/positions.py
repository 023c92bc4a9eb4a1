"""Source positions for the nodes a module reports, one top-level statement at a time.

libcst's `PositionProvider` generates the code of the whole module and records a
`CodeRange` for every node in it, while a module reports on a handful of nodes.
`Positions` runs the same `PositionProvider` over a module made of just the one
top-level statement that holds the node asked about, and moves the ranges down by
the number of lines before that statement (counted in the statements' generated
code, which is the source text: libcst round-trips exactly).  Top-level statements
start at column 0, so columns need no adjustment.

    pos = Positions(module)
    pos[node]            # the node's CodeRange, as PositionProvider gives it
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import libcst as cst
from libcst import CSTNode, MaybeSentinel
from libcst.metadata import CodePosition, CodeRange, PositionProvider

from .walk import Wrapper, child_fields

__all__ = ["Positions"]

# the line breaks libcst's position tracking counts (libcst/_nodes/internal.py)
_NEWLINE = re.compile(r"\r\n?|\n")
_SEQUENCES = (tuple, list)


class Positions(Mapping[CSTNode, CodeRange]):
    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._owner: dict[CSTNode, int] | None = None  # node -> index of its top-level statement
        self._ranges: dict[int, tuple[Mapping[CSTNode, CodeRange], int]] = {}  # index -> (ranges, line shift)
        self._starts: list[int] = []  # first line of body[0], body[1], ... (computed as far as needed)
        self._full: Mapping[CSTNode, CodeRange] | None = None

    def __getitem__(self, node: CSTNode) -> CodeRange:
        owner = self._owners()
        i = owner.get(node)
        if i is None:  # the module itself, or a comment line outside every statement
            return self._whole()[node]
        hit = self._ranges.get(i)
        if hit is None:
            hit = self._ranges[i] = self._resolve(i)
        ranges, shift = hit
        r = ranges[node]
        if not shift:
            return r
        return CodeRange(CodePosition(r.start.line + shift, r.start.column), CodePosition(r.end.line + shift, r.end.column))

    def __iter__(self) -> Iterator[CSTNode]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def __contains__(self, node: object) -> bool:
        return node in self._owners() or node in self._whole()

    # -- internals ---------------------------------------------------------------------------
    def _whole(self) -> Mapping[CSTNode, CodeRange]:
        if self._full is None:
            self._full = Wrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        return self._full

    def _owners(self) -> dict[CSTNode, int]:
        if self._owner is None:
            owner: dict[CSTNode, int] = {}
            for i, stmt in enumerate(self.module.body):
                stack: list[CSTNode] = [stmt]
                while stack:
                    n = stack.pop()
                    owner[n] = i
                    for name in child_fields(n):
                        v = getattr(n, name)
                        if v is None or v is MaybeSentinel.DEFAULT:
                            continue
                        if v.__class__ in _SEQUENCES:
                            stack.extend(v)
                        else:
                            stack.append(v)
            self._owner = owner
        return self._owner

    def _start(self, i: int) -> int:
        m = self.module
        if not self._starts:
            header = "".join(m.code_for_node(h) for h in m.header)
            self._starts.append(1 + len(_NEWLINE.findall(header)))
        while len(self._starts) <= i:
            j = len(self._starts) - 1
            self._starts.append(self._starts[j] + len(_NEWLINE.findall(m.code_for_node(m.body[j]))))
        return self._starts[i]

    def _resolve(self, i: int) -> tuple[Mapping[CSTNode, CodeRange], int]:
        m = self.module
        one = cst.Module(
            body=[m.body[i]],
            encoding=m.encoding,
            default_indent=m.default_indent,
            default_newline=m.default_newline,
            has_trailing_newline=True,
        )
        ranges = Wrapper(one, unsafe_skip_copy=True).resolve(PositionProvider)
        return ranges, self._start(i) - 1
