"""Source positions for the nodes a module reports, one top-level statement at a time.

libcst's `PositionProvider` generates the code of the whole module and records a
`CodeRange` for every node in it, while a module reports on a handful of nodes.
`Positions` runs the same `PositionProvider` over a module made of just the one
top-level statement that holds the node asked about, and moves the ranges down by
the number of lines before that statement.  Top-level statements start at column 0,
so columns need no adjustment.

    pos = Positions(module, source)
    pos[node]            # the node's CodeRange, as PositionProvider gives it

Where a statement starts: its generated code is a piece of the source (libcst
round-trips exactly), found by searching the source when it occurs there once, else
counted from the code of the statements before it.  The engine's batched walk says
which statement it is in (`enter`), so a rule's node is looked up there first.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Mapping

import libcst as cst
from libcst import CSTNode
from libcst.metadata import CodePosition, CodeRange, PositionProvider

from .walk import Wrapper, nodes

__all__ = ["Positions"]

# the line breaks libcst's position tracking counts (libcst/_nodes/internal.py)
_NEWLINE = re.compile(r"\r\n?|\n")

_Resolved = tuple[Mapping[CSTNode, CodeRange], int]  # a statement's ranges, and their line shift


class Positions(Mapping[CSTNode, CodeRange]):
    def __init__(self, module: cst.Module, source: str | None = None) -> None:
        self.module = module
        self.source = source
        self.current: int | None = None  # the top-level statement the rules are visiting
        self._resolved: dict[int, _Resolved] = {}  # statement index -> its ranges
        self._owner: dict[CSTNode, int] | None = None  # node -> statement index (built on a miss)
        self._line_ends: list[int] | None = None  # offsets just past each line break of the source
        self._starts: list[int] = []  # first line of body[0], body[1], ... (counted as far as needed)
        self._full: Mapping[CSTNode, CodeRange] | None = None

    def enter(self, index: int) -> None:
        """The walk is entering top-level statement `index`."""
        self.current = index

    def __getitem__(self, node: CSTNode) -> CodeRange:
        return self.get_range(node)

    def get_range(self, node: CSTNode, top: int | None = None) -> CodeRange:
        """`self[node]`; `top`, if known, is the index of the statement that holds `node`."""
        found = self._find(node, top)
        if found is None:  # the module itself, or a comment line outside every statement
            return self._whole()[node]
        r, shift = found
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
    def _find(self, node: CSTNode, top: int | None) -> tuple[CodeRange, int] | None:
        n = len(self.module.body)
        for i in (top, self.current):  # the statement it was said to be in, then the walk's
            if i is not None and 0 <= i < n:
                ranges, shift = self._statement(i)
                r = ranges.get(node)
                if r is not None:
                    return r, shift
        for ranges, shift in self._resolved.values():  # statements reported on before
            r = ranges.get(node)
            if r is not None:
                return r, shift
        i = self._owners().get(node)
        if i is None:
            return None
        ranges, shift = self._statement(i)
        return ranges[node], shift

    def _statement(self, i: int) -> _Resolved:
        hit = self._resolved.get(i)
        if hit is None:
            hit = self._resolved[i] = self._resolve(i)
        return hit

    def _whole(self) -> Mapping[CSTNode, CodeRange]:
        if self._full is None:
            self._full = Wrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)
        return self._full

    def _owners(self) -> dict[CSTNode, int]:
        if self._owner is None:
            self._owner = {n: i for i, stmt in enumerate(self.module.body) for n in nodes(stmt)}
        return self._owner

    def _resolve(self, i: int) -> _Resolved:
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

    def _start(self, i: int) -> int:
        """The line on which top-level statement `i`'s text (its leading lines included) starts."""
        m = self.module
        src = self.source
        if src is not None:
            code = m.code_for_node(m.body[i])
            at = src.find(code) if code else -1
            if at >= 0 and src.find(code, at + 1) < 0:  # found exactly once: it is this statement
                if self._line_ends is None:
                    self._line_ends = [x.end() for x in _NEWLINE.finditer(src)]
                return 1 + bisect.bisect_right(self._line_ends, at)
        if not self._starts:
            header = "".join(m.code_for_node(h) for h in m.header)
            self._starts.append(1 + len(_NEWLINE.findall(header)))
        while len(self._starts) <= i:
            j = len(self._starts) - 1
            self._starts.append(self._starts[j] + len(_NEWLINE.findall(m.code_for_node(m.body[j]))))
        return self._starts[i]
