"""Multi-slot ownership of safe shared memory (az-shared-race, with safe_shared.py).

Outside `unsafe` a thread writes a shared array, between two barriers, only at slots it
owns.  Besides the block-local witness itself (`s[w]`, safe_shared.py), a thread owns a
fixed set of slots when the index is a sum of non-negative constant multiples of the
witness's parts (`w`, `w.get()`, `w.row`, `w.col`) and of the variables of enclosing
`for j in range(K)` loops (K a compile-time constant, `j` bound nowhere else), with no
constant offset: `s[w + j * BLOCK]`, `tile[w.row + j * 8, w.col]`,
`c[w.row * TM + i, w.col * TN + jj]`.

The proof is over machine integers and the contract's literal block:

- every subexpression is an integer of 32 bits or more, and every term is non-negative,
  so each partial value lies between 0 and the largest slot, which is in the array's
  bounds (checked per axis): no value wraps;
- the map (thread, loop values) -> slot is enumerated over the block and the loops'
  ranges (at most one point more than the array has slots: a longer one repeats a slot
  by pigeonhole), and no slot is reached by two threads.  That is exact, not a sufficient
  test: a slot set the enumeration accepts is disjoint from every other thread's.

Two owned accesses of one array meet only at one thread's slots when their slot-to-thread
maps agree on every slot both reach (`compatible`); otherwise the race walk's form analysis
decides, as for any other pair.  A 2-D array's slots are compared linearised
(`row * cols + col`, one-to-one on in-bounds indices).
"""

from __future__ import annotations

import ast
from anodize.language.records import dataclass
from functools import lru_cache
from typing import Any

from anodize.language import ir
from anodize.language.intrinsics import RANGE
from anodize.language.types import ScalarTy

_THREAD = ("tx", "ty", "tz")
_LIMIT = 1 << 31  # constants and coefficients stay below it: exact in every index type of 32 bits or more
_MAX_POINTS = 1 << 20  # (thread, loop values) points enumerated for one access at most


@dataclass(frozen=True)
class Slots:
    """The slots a thread owns in one static array: linear slot = sum of `thread[k] * tid_k`
    and of `coef * j` for each loop digit `(coef, extent, name)`, within `shape`."""

    shape: tuple[int, ...]
    block: tuple[int, int, int]
    thread: tuple[int, int, int]
    loops: tuple[tuple[int, int, str], ...]
    checked: bool  # a multi-slot form (in bounds, no offset); False: the witness itself


class Refused(Exception):
    """A multi-slot form the proof refuses, with why (a phrase for the diagnostic's note)."""


class _NotForm(Exception):
    """Not a slot form at all (the plain own-slot rule decides)."""


def owner_map(s: Slots) -> dict[int, int] | tuple[int, tuple[int, ...], int, tuple[int, ...], int]:
    """Slot -> owning thread (linear id in the block), over in-bounds points only; or, when two
    threads reach one slot, (thread a, loop values a, thread b, loop values b, slot)."""
    got: dict[int, int] | tuple[int, tuple[int, ...], int, tuple[int, ...], int] = _owner_map(s)
    return got


@lru_cache(maxsize=512)
def _owner_map(s: Slots) -> Any:
    bx, by, bz = s.block
    cols = s.shape[1] if len(s.shape) == 2 else 0
    size = s.shape[0] * (cols or 1)
    cx, cy, cz = s.thread
    seen: dict[int, int] = {}
    exts = [e for _, e, _ in s.loops]
    coefs = [c for c, _, _ in s.loops]
    for tz in range(bz):
        for ty in range(by):
            for tx in range(bx):
                t = tx + bx * (ty + by * tz)
                base = cx * tx + cy * ty + cz * tz
                for js in _points(exts):
                    slot = base + sum(c * j for c, j in zip(coefs, js))
                    if not 0 <= slot < size:
                        continue  # out of bounds (a witness's own slot past the end): it faults, touching nothing
                    other = seen.setdefault(slot, t)
                    if other != t:
                        return (other, _loops_at(s, other, slot), t, js, slot)
    return seen


def _points(exts: list[int]) -> Any:
    if not exts:
        yield ()
        return
    head, rest = exts[0], exts[1:]
    for j in range(head):
        for more in _points(rest):
            yield (j, *more)


def _loops_at(s: Slots, t: int, slot: int) -> tuple[int, ...]:
    """The loop values at which thread `t` reaches `slot` (for the diagnostic)."""
    bx, by, _ = s.block
    tx, ty, tz = t % bx, (t // bx) % by, t // (bx * by)
    base = s.thread[0] * tx + s.thread[1] * ty + s.thread[2] * tz
    for js in _points([e for _, e, _ in s.loops]):
        if base + sum(c * j for (c, _, _), j in zip(s.loops, js)) == slot:
            return tuple(js)
    return ()


@lru_cache(maxsize=1024)
def compatible(a: Slots, b: Slots) -> bool:
    """Whether two owned accesses of one array reach a common slot only from one thread."""
    if a.shape != b.shape or a.block != b.block:
        return False
    ma, mb = owner_map(a), owner_map(b)
    if not isinstance(ma, dict) or not isinstance(mb, dict):
        return False
    if len(mb) < len(ma):
        ma, mb = mb, ma
    return all(mb.get(slot, t) == t for slot, t in ma.items())


class SlotReader:
    """Reads the index of a safe-tier shared access as an owned slot set (`read`), over one
    function's typing (an `IntView`) and the race walk's block."""

    def __init__(self, model: Any, fn: Any, block: tuple[int | None, int | None, int | None], types: Any, const: Any):
        self.const = const  # a constant int as the front end reads it (barrier_state._module_int)
        self.m = model
        self.fn = fn
        self.block = block
        self.types = types
        self._loops: dict[str, list[ast.For]] | None = None
        self._counts: dict[str, int] = {}  # loop variable -> its count, for the index being read
        self._bodies: dict[ast.For, set[int]] = {}

    # ---- the loops whose variables index slots ---------------------------------------------
    def loop_of(self, name: str, sub: ast.Subscript) -> tuple[int | None, str] | None:
        """The `for name in range(...)` whose body holds `sub` and binds `name` nowhere else (so
        `name` there is the loop's value): its constant count (None when not `range(K)` or
        `range(0, K)` of a compile-time constant K) and the range's text; None when none."""
        _module_int = self.const
        if self._loops is None:
            self._loops = {}
            for node in ast.walk(self.fn.node):
                if isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                    self._loops.setdefault(node.target.id, []).append(node)
        for loop in self._loops.get(name, ()):
            if not self._inside(sub, loop):
                continue
            if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for s in loop.body for n in ast.walk(s)):
                continue  # rebound in the body: not the loop's value there
            it = loop.iter
            if not isinstance(it, ast.Call):
                return None
            c = self.m.callees.get(it)
            args = it.args
            if c is None or c.tag != RANGE or it.keywords or not 1 <= len(args) <= 2 or any(isinstance(a, ast.Starred) for a in args):
                return None
            start = _module_int(self.m, args[0], self.fn) if len(args) == 2 else 0
            stop = _module_int(self.m, args[-1], self.fn)
            return (stop if start == 0 and stop is not None and stop >= 0 else None), self.m.code(it)
        return None

    def _inside(self, node: ast.AST, loop: ast.For) -> bool:
        body = self._bodies.get(loop)
        if body is None:
            body = self._bodies[loop] = {id(n) for s in loop.body for n in ast.walk(s)}
        return id(node) in body

    # ---- the index ------------------------------------------------------------------------
    def read(self, sub: ast.Subscript, shape: tuple[int, ...] | None, rank: int, witness: int) -> Slots | str | None:
        """The access's slot set (Slots): a multi-slot index (one that reads a loop variable),
        or the block-local witness itself (`witness`, its rank) in an array the block fits; a
        phrase saying why a multi-slot index is refused; None for any other index (the plain
        rule's)."""
        sl = sub.slice
        self._counts = {}
        try:
            if rank == 2 and not isinstance(sl, ast.Tuple):
                axes = [self._witness2(sl, "row"), self._witness2(sl, "col")]
            elif isinstance(sl, ast.Tuple):
                axes = [self._affine(e, sub) for e in sl.elts]
            else:
                axes = [self._affine(sl, sub)]
        except _NotForm:
            return None
        except Refused as why:
            return str(why)
        multi = any(k not in _THREAD for terms, _ in axes for k in terms)
        if not multi and not witness:
            return None
        try:
            return self._slots(sub, axes, shape, multi)
        except Refused as why:
            return str(why) if multi else None

    def _witness2(self, node: ast.expr, part: str) -> tuple[dict[Any, int], int]:
        v = self.m.values.get(node)
        if v is None or v.kind != "local_witness" or v.domain != 2:
            raise _NotForm
        return ({"ty" if part == "row" else "tx": 1}, 0)

    def _slots(self, sub: ast.Subscript, axes: list[tuple[dict[Any, int], int]], shape: tuple[int, ...] | None, multi: bool) -> Slots:
        bx, by, bz = self.block
        if bx is None or by is None or bz is None:
            raise Refused("the block is not fixed by the contract (`@launch_contract(block=...)` with literal sizes)")
        if shape is None or any(n <= 0 for n in shape):
            raise Refused("the array's shape is not a compile-time constant here")
        if len(axes) != len(shape):
            raise _refuse_rank(len(axes), len(shape))
        ext: dict[str, int] = {"tx": bx, "ty": by, "tz": bz}
        loops = self._counts
        if not any(k in ext and (ext[k] > 1) for terms, _ in axes for k, c in terms.items() if c):
            if bx * by * bz > 1:
                raise Refused("the index does not depend on the thread's slot, so every thread reaches the same slots")
        consts = [c for _, c in axes]
        if not multi and (any(consts) or any(ext[k] > n for k, n in zip(("ty", "tx") if len(shape) == 2 else ("tx",), shape)) or (len(shape) == 1 and bx * by * bz > shape[0])):
            raise Refused("the block does not fit the array")  # the plain own-slot rule decides
        if multi and any(consts):
            raise Refused(f"the slots are offset by {consts[0] if len(consts) == 1 else tuple(consts)} from the thread's own slot")
        if multi:
            for n, ((terms, const), size) in enumerate(zip(axes, shape)):
                top = const + sum(c * ((ext[k] if k in ext else loops[k]) - 1) for k, c in terms.items())
                if top >= size:
                    where = f"index {top}" if len(shape) == 1 else f"index {top} on axis {n}"
                    raise Refused(f"the slots reach {where}, past the end of the array ({size})")
        cols = shape[1] if len(shape) == 2 else 1
        lin: dict[Any, int] = {}
        for n, (terms, _) in enumerate(axes):
            scale = cols if n == 0 and len(shape) == 2 else 1
            for k, c in terms.items():
                lin[k] = lin.get(k, 0) + c * scale
        thread = (lin.get("tx", 0), lin.get("ty", 0), lin.get("tz", 0))
        digits = tuple(sorted((c, loops[k], k) for k, c in lin.items() if k not in ext and c and loops[k] != 1))
        points = bx * by * bz
        for _, e, _ in digits:
            points *= e
        if points > _MAX_POINTS:
            raise Refused(f"the slot set has {points} points, more than the check enumerates ({_MAX_POINTS})")
        got = Slots(tuple(shape), (bx, by, bz), thread, digits, multi)
        m = owner_map(got)
        if not isinstance(m, dict):
            a, ja, b, jb, slot = m
            raise Refused(self._collision(got, a, ja, b, jb, slot))
        return got

    def _collision(self, s: Slots, a: int, ja: tuple[int, ...], b: int, jb: tuple[int, ...], slot: int) -> str:
        where = f"[{slot // s.shape[1]}, {slot % s.shape[1]}]" if len(s.shape) == 2 else f"[{slot}]"

        bx, by, bz = s.block

        def at(t: int, js: tuple[int, ...]) -> str:
            loops = ", ".join(f"{name} = {j}" for (_, _, name), j in zip(s.loops, js))
            who = f"thread {t}" if by == bz == 1 else f"thread (row {t // bx % by}, col {t % bx})" if bz == 1 else f"thread {t}"
            return who + (f" at {loops}" if loops else "")

        return f"two threads reach one slot: {at(a, ja)} and {at(b, jb)} both reach slot {where}"

    def _affine(self, node: ast.expr, sub: ast.Subscript) -> tuple[dict[Any, int], int]:
        """`node` as non-negative constant multiples of thread and loop digits plus a constant,
        every constant and coefficient below 2**31 (so converting one to the index's type, of 32
        bits or more, is exact) and a constant the typer folded equal to it (no wrap there)."""
        terms, value = self._affine_raw(node, sub)
        if value >= _LIMIT or any(c >= _LIMIT for c in terms.values()):
            raise Refused(f"`{self.m.code(node)}` reaches 2**31 or more, so it may wrap")
        if not terms:
            e = self.types.expr(node)
            if isinstance(e, ir.Const) and type(e.value) is int and e.value != value:
                raise Refused(f"`{self.m.code(node)}` wraps on the machine (it is {e.value}, not {value})")
        return terms, value

    def _affine_raw(self, node: ast.expr, sub: ast.Subscript) -> tuple[dict[Any, int], int]:
        _module_int = self.const
        m = self.m
        if isinstance(node, ast.Constant):
            if type(node.value) is not int:
                raise _NotForm
            if node.value < 0:
                raise Refused("a negative constant in a slot index")
            return {}, node.value
        if isinstance(node, ast.Name):
            rank = _local(m, node)
            if rank == 1:
                return self._linear(), 0
            if rank:
                raise _NotForm
            loop = self.loop_of(node.id, sub)
            if loop is not None:
                if loop[0] is None:
                    raise Refused(f"`{loop[1]}` is not a range from 0 to a compile-time constant, so `{node.id}`'s slots are not fixed")
                self._wide(node, node.id)
                self._counts[node.id] = loop[0]
                return {node.id: 1}, 0
            n = _module_int(m, node, self.fn)
            if n is None or n < 0:
                raise _NotForm
            return {}, n
        if isinstance(node, ast.Attribute) and node.attr in ("row", "col") and _local(m, node.value) == 2:
            return {"ty" if node.attr == "row" else "tx": 1}, 0
        if isinstance(node, ast.Call):
            c = m.callees.get(node)
            if c is not None and c.kind == "witness_get" and isinstance(node.func, ast.Attribute) and _local(m, node.func.value) == 1 and not node.args:
                return self._linear(), 0
            raise _NotForm
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            left, right = self._affine(node.left, sub), self._affine(node.right, sub)
            if left[0] or right[0]:
                self._wide(node, m.code(node))
            if isinstance(node.op, ast.Add):
                terms = dict(left[0])
                for k, c in right[0].items():
                    terms[k] = terms.get(k, 0) + c
                return terms, left[1] + right[1]
            if left[0] and right[0]:
                raise Refused(f"`{m.code(node)}` multiplies two varying values")
            (terms, base), k = (left, right[1]) if left[0] else (right, left[1])
            return {x: c * k for x, c in terms.items()}, base * k
        if isinstance(node, (ast.BinOp, ast.UnaryOp)) and isinstance(self.types.expr(node), ir.Const):
            n = _module_int(m, node, self.fn)  # constant arithmetic the typer folded (checked above)
            if n is not None and n >= 0:
                return {}, n
        raise _NotForm

    def _linear(self) -> dict[Any, int]:
        bx, by, _ = self.block
        if bx is None or by is None:
            raise Refused("the block is not fixed by the contract (`@launch_contract(block=...)` with literal sizes)")
        return {"tx": 1, "ty": bx, "tz": bx * by}

    def _wide(self, node: ast.expr, text: str) -> None:
        t = self.types.int_ty(node)
        if not isinstance(t, ScalarTy) or t.is_bool or not t.is_int or t.bits < 32:
            raise Refused(f"`{text}` is not an integer of 32 bits or more, so its slots may wrap")


def _local(model: Any, node: ast.expr) -> int:
    """The rank of the block-local witness `node` evaluates to (0: none)."""
    v = model.values.get(node)
    return v.domain if v is not None and v.kind == "local_witness" else 0


def _refuse_rank(got: int, want: int) -> Refused:
    return Refused(f"the index has {got} axes, the array {want}")


__all__ = ["Slots", "SlotReader", "compatible", "owner_map"]
