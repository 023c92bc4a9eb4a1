"""The message catalogue (re-exported by messages.py): the checker's shared-memory races
(checker/rules/shared_race.py) and the safe tier's phase discipline."""

from __future__ import annotations

from anodize.language.diagnostics import Diagnostic, Label, Span
from anodize.language.messages_base import make, phrase
from anodize.language.messages_rules import _WAY_OUT

# ---- checker: shared-memory races (checker/rules/shared_race.py) ---------------------------

_RACE_NOTE = (
    "the checker proves two accesses apart only for the same index injective in the thread id "
    "(`tid`, `tid + k`, `k * tid`, `(tid_y, tid_x)`), for index ranges that guards such as "
    "`if tid < s:` keep apart, and for `tid // 32` written under `lane == 0`"
)


def shared_race(
    span: Span,
    array: str,
    access: str,
    other: Span | None,
    other_access: str,
    *,
    earlier_iteration: bool = False,
    dynamic: bool = False,
) -> Diagnostic:
    """`array`: the array as written, or (`dynamic=True`) the helper whose accesses of
    dynamic shared memory race."""
    if dynamic:
        array = phrase("dynamic-array-in", {"callee": array})
    if other is None:
        return make(
            "az-shared-race",
            f"this {access} of shared `{array}` may race with the same {access} in another thread",
            span,
            label="two threads of the block may write this element between two barriers",
            notes=(_RACE_NOTE,),
            help="index it by the thread id, or guard it so one thread writes (`if tid == 0:`) "
            "and add `az.syncthreads()` before the element is used",
        )
    return make(
        "az-shared-race",
        f"this {access} of shared `{array}` may race with a {other_access} by another thread",
        span,
        label=f"no `az.syncthreads()` separates this {access} from the {other_access} on every path",
        secondary=(
            Label(other, f"the {other_access} it may race with" + (" (in an earlier loop iteration)" if earlier_iteration else "")),
        ),
        notes=(_RACE_NOTE,),
        help="add `az.syncthreads()` between them",
    )


_SAFE_NOTE = (
    "outside `unsafe`, between two barriers a thread writes a shared array only at its own slot "
    "(`buf[w]`, `w = thread.index_in_block()` or `index_in_block_2d()`), and reads an array "
    "written in that interval only at its own slot"
)


_SLOTS_NOTE = (
    "a thread owns several slots when the index adds constant multiples of the witness's parts "
    "and of `for j in range(K)` variables (K a constant), with no offset, in bounds, and no slot "
    "is reached by two threads of the contract's block: `s[w + j * BLOCK]`, "
    "`tile[w.row + j * 8, w.col]`, `t[w.row * TM + i, w.col * TN + jj]`"
)


def shared_safe_write(span: Span, array: str, index: str, *, why: str | None = None) -> Diagnostic:
    """A safe-tier write of a shared array not at the writer's own slot; `why`: what refuses a
    multi-slot index (checker/shared_slots.py)."""
    return make(
        "az-shared-race",
        f"this write of shared `{array}` at `{index}` is not at the thread's own slot"
        + (" set" if why is not None else ""),
        span,
        label="another thread of the block may write or read this element in the same barrier interval",
        notes=(_SAFE_NOTE,) if why is None else (f"not a provably disjoint slot set: {why}", _SLOTS_NOTE),
        help=f"write `{array}[w]` with `w = thread.index_in_block()` (`index_in_block_2d()` for a 2-D "
        f"array) and read other slots after `az.syncthreads()`; or prove it race-free by hand in `{_WAY_OUT}`",
    )


def shared_safe_race(span: Span, array: str, access: str, other: Span, other_access: str, *, earlier_iteration: bool = False) -> Diagnostic:
    """A safe-tier access that meets an access of another thread in one barrier interval."""
    return make(
        "az-shared-race",
        f"this {access} of shared `{array}` may meet a {other_access} of the same element by another thread "
        "in one barrier interval",
        span,
        label=(
            f"`{array}` is written in this barrier interval, so it is read here only at the thread's own slot"
            if access == "read"
            else f"another thread reads this slot of `{array}` in the same barrier interval"
        ),
        secondary=(
            Label(other, f"the {other_access}" + (" (in an earlier loop iteration)" if earlier_iteration else "")),
        ),
        notes=(_SAFE_NOTE,),
        help=f"put `az.syncthreads()` between the writes and the reads of other slots; or prove it "
        f"race-free by hand in `{_WAY_OUT}`",
    )


def shared_escape(span: Span, array: str) -> Diagnostic:
    return make(
        "az-shared-race",
        f"shared array `{array}` is used here in a way the race check cannot follow",
        span,
        label="only `name[index]` reads and writes of a shared array are checked",
        help=f"index `{array}` directly where it is used instead of passing or storing the array",
    )
