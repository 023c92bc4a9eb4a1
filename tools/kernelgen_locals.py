"""The kernel generator's local values (a mixin of kernelgen._Gen): local arrays (declarations,
reads, writes, constant loops over them; now and then a bad shape or a constant index out of
range, which check and compile must both refuse), tuple unpacking into names and elements,
calls of tuple-returning helpers and of helpers filling a caller's local array."""

from __future__ import annotations

from typing import Any


class LocalsGen:
    ch: Any
    locals: dict[str, str]
    slices: dict[str, tuple[str, str]]
    arrays: dict[str, tuple[str, tuple[int, ...]]]
    tuple_helpers: list[tuple[str, str, str]]
    fill_helpers: list[tuple[str, str]]

    def local_access(self, a: str, depth: int) -> str:
        """`a[...]`: constant indices (now and then one out of range: a static error), loop
        variables, or any int expression (bounds-checked at run time)."""
        ch = self.ch
        _, shape = self.arrays[a]
        parts = []
        for n in shape:
            k = ch.choice(("const", "const", "expr", "var"))
            if k == "const":
                parts.append(str(ch.integer(0, n - 1) if ch.coin(0.97) else ch.choice((n, -1))))
            elif k == "var" and [v for v, t in self.locals.items() if t in _ints()]:
                v = ch.choice([v for v, t in self.locals.items() if t in _ints()])
                parts.append(f"{v} % {n}" if ch.coin(0.5) else v)
            else:
                parts.append(self.int_index(max(depth - 1, 0)))
        return f"{a}[{', '.join(parts)}]"

    def local_stmt(self, k: str, ind: int, depth: int) -> None:
        ch = self.ch
        if k == "local_decl":
            a = self.fresh("la")
            t = ch.choice(_scalars())
            shape = ch.choice(((4,), (3,), (2, 3), (2, 2, 2), (1,), (8,)))
            text = str(shape[0]) if len(shape) == 1 and ch.coin(0.5) else repr(shape)
            if ch.coin(0.02):
                text = ch.choice(("0", "(2, 0)", "(1, 1, 1, 1)", "len(" + ch.choice(list(self.slices)) + ")" if self.slices else "0"))
            self.emit(ind, f"{a} = az.local.array({text}, {t})")
            self.arrays[a] = (t, shape)
        elif k == "local_write":
            a = ch.choice(list(self.arrays))
            t = self.arrays[a][0]
            op = "=" if t == "bool_" or ch.coin(0.7) else ch.choice(("+=", "-=", "*="))
            self.emit(ind, f"{self.local_access(a, 1)} {op} {self.expr(t, 2)}")
        elif k == "local_loop":  # constant bounds over the array's first axis (unrolled)
            a = ch.choice(list(self.arrays))
            t, shape = self.arrays[a]
            r = self.fresh("q")
            self.emit(ind, f"for {r} in range({shape[0] if ch.coin(0.6) else f'len({a})'}):")
            self.locals[r] = "i64"
            rest = ", ".join(str(ch.integer(0, n - 1)) for n in shape[1:])
            self.emit(ind + 1, f"{a}[{r}{', ' + rest if rest else ''}] = {self.expr(t, 1)}")
        elif k == "unpack":
            cands = [(x, y) for x in self.locals for y in self.locals if x != y and self.locals[x] == self.locals[y]]
            if cands and ch.coin(0.4):
                x, y = ch.choice(cands)
                self.emit(ind, f"{x}, {y} = {y}, {x}")
                return
            if self.arrays and ch.coin(0.3):  # into an element and a name
                arr = ch.choice(list(self.arrays))
                t = self.arrays[arr][0]
                v = self.fresh()
                self.emit(ind, f"{self.local_access(arr, 1)}, {v} = {t}({self.expr(t, 1)}), {self.local_access(arr, 1)}")
                self.locals[v] = t
                return
            t1, t2 = ch.choice(_scalars()), ch.choice(_scalars())
            a, b = self.fresh(), self.fresh()
            self.emit(ind, f"{a}, {b} = {t1}({self.expr(t1, 1)}), {t2}({self.expr(t2, 1)})")
            self.locals[a], self.locals[b] = t1, t2
        elif k == "tuple_call":
            name, t1, t2 = ch.choice(self.tuple_helpers)
            a, b = self.fresh(), self.fresh()
            self.emit(ind, f"{a}, {b} = {name}({self.expr(t1, 1)}, {self.expr(t2, 1)})")
            self.locals[a], self.locals[b] = t1, t2
        elif k == "fill_call":
            pairs = [(a, h) for a, (e, s) in self.arrays.items() if len(s) == 1 for h, fe in self.fill_helpers if fe == e]
            a, h = ch.choice(pairs)
            self.emit(ind, f"{h}({a}, {self.expr(self.arrays[a][0], 1)})")


def _ints() -> tuple[str, ...]:
    from kernelgen import INTS

    return INTS


def _scalars() -> tuple[str, ...]:
    from kernelgen import SCALARS

    return SCALARS
