"""Forbids shared-memory accesses that may race between two barriers."""

from __future__ import annotations

import ast

from anodize.language import messages
from .. import safe_shared
from ..barrier_intervals import Intervals
from ..barrier_state import DynPart, DynSummary, Race
from ..index_forms import Block
from ..kernel_values import FunctionInfo
from ..shared_slots import Slots
from ..typed_ints import IntView, views_of
from .base import Rule, RuleContext


class SharedRace(Rule):
    """Forbids shared-memory accesses that may race between two barriers."""

    CODE = "az-shared-race"
    ORDER = 120
    VALID = [
        # a tree reduction: `tid < s` keeps the written [0, s) apart from the read [s, 2s)
        """
@launch_contract(domain=1, block=256)
@kernel
def k(x: Slice[f32], total: AtomicSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(256, f32)
        t = thread.tid_x()
        buf[t] = x[i] if i in x else 0.0
        az.syncthreads()
        s = 128
        while s > 0:
            if t < s:
                buf[t] += buf[t + s]
            az.syncthreads()
            s = s // 2
        if t == 0:
            total.add(0, buf[0])
""",
        # one writer per warp, 2-D tiles, a uniform value written by all, a helper's barrier
        """
@func
def sync() -> None:
    with az.unsafe():
        az.syncthreads()

@launch_contract(domain=2, block=(16, 16))
@kernel
def k(a: Slice2D[f32], c: DisjointSlice2D[f32]) -> None:
    ij = thread.index_2d()
    with az.unsafe():
        tile = az.shared.array((16, 17), f32)
        flat = az.shared.array(256, f32)
        flag = az.shared.array(1, i32)
        tx = thread.tid_x()
        ty = thread.tid_y()
        flag[0] = 1
        tile[ty, tx] = a[ij] if ij in a else 0.0
        flat[ty * 16 + tx] = 1.0
        sync()
        v = tile[tx, ty] + flat[255 - tx] + f32(flag[0])
        az.syncthreads()
        if tx % 8 == 0 and ty == 0:
            flat[tx // 8] = v
    if ij in c:
        c[ij] = v
""",
        # machine integers: a cast of a value that fits, a signed offset by a block-uniform value
        # (if it wraps it is negative: out of bounds), a power-of-two stride
        """
@launch_contract(domain=1, block=256)
@kernel
def k(c: DisjointSlice[f32], n: i32) -> None:
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(1024, f32)
        t = thread.tid_x()
        buf[i64(t) * 4] = 1.0
        az.syncthreads()
        if t < n:
            buf[t + n] = buf[t]
        az.syncthreads()
        v = buf[az.u32(t) * 2 % 1024]
    if i in c:
        c[i] = v
""",
        # the safe tier: each thread writes its own slot, then reads any slot after the barrier
        """
@launch_contract(domain=1, block=128)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    w = thread.index_in_block()
    s = az.shared.array(128, f32)
    s[w] = a[i] if i in a else 0.0
    az.syncthreads()
    if i in c:
        c[i] = s[127 - w.get()]
""",
    ]
    INVALID = [
        # the safe tier: a write at another thread's slot; a read of a slot written in the interval
        """
@launch_contract(domain=1, block=128)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    w = thread.index_in_block()
    s = az.shared.array(129, f32)
    t = az.shared.array(128, f32)
    s[w + 1] = 1.0  # E: az-shared-race
    t[w] = a[i] if i in a else 0.0
    v = t[(w.get() + 1) % 128]  # E: az-shared-race
    if i in c:
        c[i] = v
""",
        # i32 arithmetic wraps: `t * 65536 * 65536` is 0 for every thread; `i32(i64(t) + 2**32 + 1)`
        # is the neighbour's index
        """
@launch_contract(domain=1, block=256)
@kernel
def k(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(512, f32)
        t = thread.tid_x()
        buf[t * 65536 * 65536] = f32(t)  # E: az-shared-race
        az.syncthreads()
        buf[t] = f32(t)
        v = buf[i32(i64(t) + 4294967297)]  # E: az-shared-race
    if i in c:
        c[i] = v
""",
        # every dynamic array is one region, a helper's too: its read races with the kernel's write
        """
@func
def next_value() -> f32:
    with az.unsafe():
        dyn = az.shared.array(0, f32)
        v = dyn[thread.tid_x() + 1]
    return v

@launch_contract(domain=1, block=256)
@kernel
def k(c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        dyn = az.shared.array(0, f32)
        dyn[thread.tid_x()] = 1.0
        v = next_value()  # E: az-shared-race
    if i in c:
        c[i] = v
""",
        # the barrier after the first write is missing: thread 0 reads element 1 as thread 1 writes it
        """
@launch_contract(domain=1, block=64)
@kernel
def k(a: Slice[f32], c: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        tile = az.shared.array(64, f32)
        t = thread.tid_x()
        tile[t] = a[i] if i in a else 0.0
        v = tile[(t + 1) % 64]  # E: az-shared-race
        tile[0] = v  # E: az-shared-race
    if i in c:
        c[i] = v
""",
        # the loop's trailing barrier is missing: the next round's reads race with this round's writes
        """
@launch_contract(domain=1, block=256)
@kernel
def k(c: DisjointSlice[i32]) -> None:
    i = thread.index_1d()
    with az.unsafe():
        buf = az.shared.array(256, i32)
        tid = thread.tid_x()
        buf[tid] = tid
        az.syncthreads()
        off = 1
        while off < 256:
            t = i32(0)
            if tid >= off:
                t = buf[tid - off]  # E: az-shared-race
            az.syncthreads()
            buf[tid] = buf[tid] + t
            off = off * 2
    if i in c:
        c[i] = 0
""",
        # a helper's shared array: a second call may overwrite `s` while another thread still reads it
        """
@func
def broadcast(v: f32) -> f32:
    with az.unsafe():
        s = az.shared.array(1, f32)
        if thread.tid_x() == 0:
            s[0] = v  # E: az-shared-race
        az.syncthreads()
        r = s[0]
    return r
""",
    ]

    def __init__(self, ctx: RuleContext):
        super().__init__(ctx)
        self._with_shared: set[FunctionInfo] | None = None
        self._must_barrier: dict[str, bool] = {}
        self._dynamic: dict[str, DynSummary] = {}  # helpers that reach dynamic shared memory
        self._views: dict[int, list[IntView]] = {}  # each function's distinct typings

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        fn = self.model.by_node.get(node)
        if fn is None or not fn.is_device:
            return
        if self._with_shared is None:
            self._with_shared = {
                c.fn for call, kind in self.model.callees.items() if kind.kind == "shared_array" and (c := self.model.ctx.get(call))
            }
        must = self._barriers(fn)
        if fn not in self._with_shared and not any(h.name in self._dynamic for _, h in fn.helper_calls):
            return
        walk = self._walk(fn, self._block(fn), must)
        for name, array in walk.escapes.items():
            self.report(messages.shared_escape(self.span(name), array))
        # safe-tier writes not at the own slot (a multi-slot index must be proven in every typing)
        owned = {n for n, got in walk.slots.items() if all(not isinstance(g, str) for g in got)}
        own = safe_shared.unsafe_writes(self.model, fn, owned)
        for sub in own:
            why = next((g for g in walk.slots.get(sub, ()) if isinstance(g, str)), None)
            self.report(messages.shared_safe_write(self.span(sub), self._array_text(sub), self.model.code(sub.slice), why=why))
        for race in walk.races.values():
            a = race.access
            if a.node in own:
                continue
            if race.other is not None and (a.safe or race.other.safe) and isinstance(a.node, ast.Subscript):
                here, there = self.span(a.node), self.span(race.other.node)
                later = (there.line, there.col) >= (here.line, here.col)
                kind, other = ("write" if a.write else "read"), ("write" if race.other.write else "read")
                self.report(messages.shared_safe_race(here, self._array_text(a.node), kind, there, other, earlier_iteration=later))
                continue
            kind = "write" if a.write else "read"
            dynamic = not isinstance(a.node, ast.Subscript)  # a helper call: its dynamic shared memory
            array = self._array_text(a.node) if isinstance(a.node, ast.Subscript) else self._dynamic_text(a.node)
            if race.other is None:
                self.report(messages.shared_race(self.span(a.node), array, kind, None, kind, dynamic=dynamic))
            else:
                other = "write" if race.other.write else "read"
                here, there = self.span(a.node), self.span(race.other.node)
                later = (there.line, there.col) >= (here.line, here.col)  # reached around a loop's back edge
                self.report(messages.shared_race(here, array, kind, there, other, earlier_iteration=later, dynamic=dynamic))


    def _walk(self, fn: FunctionInfo, block: Block, must: dict[str, bool]) -> _Walks:
        """The race walk of `fn`'s body once per distinct typing of it (a generic kernel's
        members, a helper's argument types): a race or escape in any of them is reported."""
        out = _Walks()
        for view in views_of(self.model, fn, self._views):
            walk = Intervals(self.model, fn, block, must, self._dynamic, view)
            out.barrier = walk.run() and out.barrier
            for node, race in walk.races.items():
                out.races.setdefault(node, race)
            for name, array in walk.escapes.items():
                out.escapes.setdefault(name, array)
            for node, got in walk.st.slots.items():
                out.slots.setdefault(node, []).append(got)
            out.head = _union(out.head, walk.head)
            out.tail = _union(out.tail, walk.tail)
        return out

    def _dynamic_text(self, call: ast.AST) -> str:
        """The helper whose call stands for its accesses of dynamic shared memory, as written."""
        return self.model.code(call.func)  # type: ignore[attr-defined]

    def _array_text(self, sub: ast.Subscript) -> str:
        """The subscripted array's text, with the parentheses around it (`(buf)[t]` quotes `(buf)`)."""
        v = sub.value
        text = self.model.code(v)
        if v.lineno != sub.lineno or v.col_offset == sub.col_offset:
            return text
        full = self.model.code(sub)
        k = self.model.span(v).col - self.model.span(sub).col
        opened = full[:k].count("(")
        pos = k + len(text)
        while opened and pos < len(full):
            if full[pos] == ")":
                opened -= 1
            elif not full[pos].isspace():
                break
            pos += 1
        return full[:pos]

    def _block(self, fn: FunctionInfo) -> Block:
        """The block shape: the contract's for a kernel; for a helper, its callers' if they all agree."""
        if fn.kind == "kernel":
            return Block.of(fn.contract.block if fn.contract else None)
        shapes: set[Block] = set()
        seen: set[int] = set()
        todo = [fn]
        while todo:
            h = todo.pop()
            if id(h) in seen:
                continue
            seen.add(id(h))
            callers = [f for f in dict.fromkeys(self.model.functions.values()) if any(g is h for _, g in f.helper_calls)]
            if not callers:
                return Block.of(None)  # a helper nobody here calls may be called with any block
            for f in callers:
                if f.kind == "kernel":
                    shapes.add(Block.of(f.contract.block if f.contract else None))
                else:
                    todo.append(f)
        return shapes.pop() if len(shapes) == 1 else Block.of(None)

    def _barriers(self, fn: FunctionInfo) -> dict[str, bool]:
        """Helper name -> it reaches a barrier on every path (so a call to it separates intervals);
        on the way, `_dynamic`: the helpers whose dynamic shared accesses their callers must see
        (every dynamic array of a kernel is one region, its helpers' too)."""
        if self._with_shared is None:
            self._with_shared = {
                c.fn for call, kind in self.model.callees.items() if kind.kind == "shared_array" and (c := self.model.ctx.get(call))
            }
        for _, h in fn.helper_calls:
            if h.name not in self._must_barrier:
                self._must_barrier[h.name] = False  # recursion: assume not
                self._barriers(h)
                if h.has_barrier or h in self._with_shared or any(g.name in self._dynamic for _, g in h.helper_calls):
                    walk = self._walk(h, Block.of(None), self._must_barrier)
                    self._must_barrier[h.name] = walk.barrier and h.has_barrier
                    if walk.head is not None or walk.tail is not None:
                        self._dynamic[h.name] = (walk.head, walk.tail)
        return self._must_barrier


class _Walks:
    """The race walks of one function's typings, together."""

    def __init__(self) -> None:
        self.races: dict[ast.AST, Race] = {}
        self.escapes: dict[ast.Name, str] = {}
        self.slots: dict[ast.Subscript, list[Slots | str]] = {}  # multi-slot verdicts, one per typing
        self.barrier = True  # every path reaches a barrier, in every typing
        self.head: DynPart | None = None
        self.tail: DynPart | None = None


def _union(a: DynPart | None, b: DynPart | None) -> DynPart | None:
    if a is None or b is None:
        return a if b is None else b
    return a[0] or b[0], a[1] | b[1]
