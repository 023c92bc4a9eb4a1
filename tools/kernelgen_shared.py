"""The kernel generator's safe cooperation (a mixin of kernelgen._Gen): block-shared arrays
under the phase discipline (a write at the thread's block-local slot, a barrier, reads of any
slot), now and then with a classic bug the checker must refuse and compile must refuse too
(a missing barrier, a barrier under thread-dependent control, a write at another thread's
slot, a read of a slot being written), block-shared atomics, and per-thread tiles in 2-D
kernels (`thread.tile_2d`, `t.at(r, s)`)."""

from __future__ import annotations

from typing import Any


class SharedGen:
    ch: Any
    locals: dict[str, str]
    slices: dict[str, tuple[str, str]]

    def safe_shared(self, ind: int) -> None:
        ch = self.ch
        sm, w, v = self.fresh("sh"), self.fresh("w"), self.fresh()
        t = ch.choice(("f32", "i32", "f64", "u32"))
        size = ch.choice(("BLOCK", "BLOCK", "512", "32")) if self.witness1 else ch.choice(("256", "512", "64"))
        self.emit(ind, f"{w} = thread.index_in_block()")
        self.emit(ind, f"{sm} = az.shared.array({size}, {t})")
        bug = ch.choice(("",) * 8 + ("no_barrier", "branch_barrier", "other_slot", "write_after"))
        slot = f"({w}.get() + 1) % {size}" if bug == "other_slot" else w
        self.emit(ind, f"{sm}[{slot}] = {self.expr(t, 1)}")
        if bug == "branch_barrier":
            self.emit(ind, f"if {w}.get() < 16:")
            self.emit(ind + 1, "az.syncthreads()")
        elif bug != "no_barrier":
            self.emit(ind, "az.syncthreads()")
        read = ch.choice((f"{sm}[0]", f"{sm}[({w}.get() + {ch.integer(1, 40)}) % {size}]", f"{sm}[{w}]"))
        self.emit(ind, f"{v}: {t} = {read}")
        self.locals[v] = t
        if bug == "write_after":
            self.emit(ind, f"{sm}[{w}] = {v}")
        elif ch.coin(0.4):
            self.emit(ind, "az.syncthreads()")
            self.emit(ind, f"{sm}[{w}] = {v}")

    def shared_atomic(self, ind: int) -> None:
        ch = self.ch
        h, v = self.fresh("bins"), self.fresh("old")
        t = ch.choice(("i32", "u32", "i64"))
        n = ch.choice((16, 256))
        self.emit(ind, f"{h} = az.shared.atomic_array({n}, {t})")
        self.emit(ind, f"{v} = {h}.add({self.int_index(1)} % {n}, {t}(1))")
        self.locals[v] = t

    def thread_tile(self, ind: int) -> None:
        ch = self.ch
        outs = self.outputs(True)
        if not outs:
            return self.emit(ind, "pass")
        c = ch.choice(outs)
        tr, tc = ch.choice((1, 2, 4)), ch.choice((1, 2, 4, 8))
        tt, r, s = self.fresh("tt"), self.fresh("r"), self.fresh("s")
        groups = f", {tr}, {tc}" if ch.coin(0.2) else ""
        self.emit(ind, f"{tt} = thread.tile_2d({tr}, {tc}{groups})")
        self.emit(ind, f"for {r} in range({tr}):")
        self.emit(ind + 1, f"for {s} in range({tc}):")
        self.locals[r] = self.locals[s] = "i64"
        at = f"{tt}.at({r}, {s})" if ch.coin(0.95) else f"{tt}.at({s}, {r})"
        if ch.coin(0.5):
            self.emit(ind + 2, f"if {at} in {c}:")
            self.emit(ind + 3, f"{c}[{at}] = {self.expr(self.slices[c][1], 1)}")
        else:
            self.emit(ind + 2, f"{c}[{at}] = {self.expr(self.slices[c][1], 1)}")
