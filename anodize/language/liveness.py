"""Liveness of the safe tier: a spin-wait is a `while` loop whose exit depends on memory other
threads write, with nothing in its body that makes every thread progress (a barrier, a block
collective, `az.grid.sync()`).  Outside `with az.unsafe():` it is `az-spin-wait`: whether it
ends depends on the scheduler (blocks of a grid need not be co-resident; a GPU's independent
thread scheduling is not the CPU backend's), never on the language.

Memory other threads write, as the typed model says it:

* any atomic operation's result (`AtomicSlice` methods, `az.shared.atomic_array` methods):
  atomics exist for memory others write;
* a plain read of a shared array that unsafe code writes somewhere in the kernel (safe-tier
  writes are phase-disciplined: a read in a barrier-free loop cannot see another thread's
  safe write change, since that would be `az-shared-race`).

A loop's exits are its condition and the tests of the `if`s that lead to a `break` of it or a
`return`; a local assigned in the loop from such memory (or from such a local) carries the
dependence.  A loop whose own test does not depend on such memory and reads a local its body
assigns without it (a probe counter: `while probes < slots: ... probes += 1`) ends by itself
and is no spin-wait.  A helper's result depends on memory when its body reads such memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from anodize.language import ir
from anodize.language.diagnostics import Span
from anodize.language.ir_walk import children

__all__ = ["spin_read"]


def _walk(node: object) -> Iterator[object]:
    """`node` and every IR node below it (a helper call's body included)."""
    stack = [node]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(children(n))
        if isinstance(n, ir.Call):
            stack.extend(n.func.body)


def _syncs(body: Iterable[ir.Stmt]) -> bool:
    """Whether the body makes every thread progress (a barrier or a block collective)."""
    body = tuple(body)
    if any(isinstance(s, ir.Barrier) for s in body):  # (the common case, found without a walk)
        return True
    return any(isinstance(n, ir.Barrier) or (isinstance(n, ir.Collective) and n.kind.startswith("block.")) for s in body for n in _walk(s))


def _memory(e: object, tainted: dict[str, Span | None], shared_unsafe: frozenset[str]) -> tuple[bool, Span | None]:
    for n in _walk(e):
        if isinstance(n, (ir.Atomic, ir.SharedAtomic)):
            return True, n.span
        if isinstance(n, ir.SharedRead) and n.array.name in shared_unsafe:
            return True, n.span
        if isinstance(n, ir.Local) and n.name in tainted:
            return True, tainted[n.name]
    return False, None


def _exits(body: Iterable[ir.Stmt], nested: bool) -> bool:
    for s in body:
        if isinstance(s, ir.Return) or (isinstance(s, ir.Break) and not nested):
            return True
        if isinstance(s, ir.If) and (_exits(s.body, nested) or _exits(s.orelse, nested)):
            return True
        if isinstance(s, (ir.While, ir.ForRange, ir.GridStride)) and _exits(s.body, True):
            return True
    return False


def _exit_tests(body: Iterable[ir.Stmt], nested: bool = False) -> Iterator[ir.Expr]:
    for s in body:
        if isinstance(s, ir.If):
            if _exits(s.body, nested) or _exits(s.orelse, nested):
                yield s.cond
            yield from _exit_tests(s.body, nested)
            yield from _exit_tests(s.orelse, nested)
        elif isinstance(s, (ir.While, ir.ForRange, ir.GridStride)):
            yield from _exit_tests(s.body, True)


def _assigns(body: Iterable[ir.Stmt]) -> Iterator[tuple[tuple[str, ...], object]]:
    for s in body:
        for n in _walk(s):
            if isinstance(n, ir.Assign):
                yield (n.name,), n.value
            elif isinstance(n, ir.Unpack):
                yield n.names, n.value
            elif isinstance(n, ir.LocalArrayWrite):
                yield (n.array.name,), n.value


def spin_read(loop: ir.While, shared_unsafe: frozenset[str] = frozenset()) -> tuple[bool, Span | None]:
    """(True, the read's span) when `loop` is a spin-wait (module docstring), else (False, None)."""
    if _syncs(loop.body):
        return False, None
    tainted: dict[str, Span | None] = {}
    assigns = list(_assigns(loop.body))
    changed = True
    while changed:
        changed = False
        for names, value in assigns:
            if all(n in tainted for n in names):
                continue
            hit, span = _memory(value, tainted, shared_unsafe)
            if hit:
                for n in names:
                    tainted.setdefault(n, span)
                changed = True
    test_hit, _ = _memory(loop.cond, tainted, shared_unsafe)
    if not test_hit:
        # a loop whose own test reads a local the body steps without memory (`while probes <
        # slots: ... probes += 1`) ends by itself: its memory-dependent exits only end it sooner
        read = {n.name for n in _walk(loop.cond) if isinstance(n, ir.Local)}
        stepped = {name for names, value in assigns for name in names if name in read and name not in tainted}
        if stepped:
            return False, None
    for test in (loop.cond, *_exit_tests(loop.body)):
        hit, span = _memory(test, tainted, shared_unsafe)
        if not hit:
            # a local array read carries the dependence of the array's writes
            for n in _walk(test):
                if isinstance(n, ir.LocalArrayRead) and n.array.name in tainted:
                    hit, span = True, tainted[n.array.name]
                    break
        if hit:
            return True, span
    return False, None
