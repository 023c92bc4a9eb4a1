"""Random anodize kernel modules, inside the supported subset and just outside it.

    gen_module(ch, outside=False) -> str        one module's source text

`ch` is a `Chooser`: `RandomChooser(seed)` for scripts (tools/fuzz.py) and
`HypothesisChooser(data)` for Hypothesis tests (`st.data()`), so one generator
serves both and Hypothesis can shrink what it finds.

Inside the subset the generator tracks each local's scalar type, so most programs
are accepted; `outside=True` injects one construct the language rejects (a lambda,
a comprehension, `try`, a foreign `with`, an f-string, a class, `yield`, `*args`,
a default, a wrong annotation, a write to a `Slice`, `c[i + 1]`, garbage tokens...).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

__all__ = ["Chooser", "RandomChooser", "HypothesisChooser", "gen_module", "OUTSIDE_KINDS"]


class Chooser(Protocol):
    def integer(self, lo: int, hi: int) -> int: ...

    def choice(self, seq: Sequence[T]) -> T: ...

    def coin(self, p: float = 0.5) -> bool: ...


class RandomChooser:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.r.randint(lo, hi)

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self.r.randrange(len(seq))]

    def coin(self, p: float = 0.5) -> bool:
        return self.r.random() < p


class HypothesisChooser:
    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return int(self.data.draw(self.st.integers(lo, hi)))

    def choice(self, seq: Sequence[T]) -> T:
        return seq[self.integer(0, len(seq) - 1)]

    def coin(self, p: float = 0.5) -> bool:
        return self.integer(0, 999) < int(p * 1000)


INTS = ("i32", "i64", "u32", "u64", "i8", "i16", "u8", "u16")
FLOATS = ("f32", "f64", "f16", "bf16")
SCALARS = INTS + FLOATS + ("bool_",)
MATH1 = ("sqrt", "exp", "log", "sin", "cos", "tanh", "fabs", "floor", "ceil", "rsqrt")
MATH2 = ("pow", "fmin", "fmax")

from kernelgen_locals import LocalsGen  # noqa: E402  (needs the tables above)
from kernelgen_records import RecordsGen  # noqa: E402
from kernelgen_shared import SharedGen  # noqa: E402


class _Gen(LocalsGen, SharedGen, RecordsGen):
    """One module: kernel parameters, typed locals, and an indented line buffer."""

    def __init__(self, ch: Chooser) -> None:
        self.ch = ch
        self.lines: list[str] = []
        self.n = 0
        self.locals: dict[str, str] = {}  # name -> scalar type
        self.slices: dict[str, tuple[str, str]] = {}  # name -> (kind, elem)
        self.helpers: list[tuple[str, str]] = []  # (name, type) scalar helpers (x: T, y: T) -> T
        self.writers: list[tuple[str, str]] = []  # (name, elem) helpers (c, i, v) writing c[i]
        self.witness1: str | None = None
        self.witness2: str | None = None
        self.loop_depth = 0
        self.in_helper = False
        self.tiled = False  # a per-thread tile was generated (one mapping per output: at most one)
        self.arrays: dict[str, tuple[str, tuple[int, ...]]] = {}  # local arrays: name -> (elem, shape)
        self.tuple_helpers: list[tuple[str, str, str]] = []  # (name, t1, t2): (x: t1, y: t2) -> tuple[t1, t2]
        self.fill_helpers: list[tuple[str, str]] = []  # (name, elem): (acc: LocalArray[elem], v: elem) -> None
        self.records: dict[str, list[tuple[str, str, str, int]]] = {}  # kernelgen_records.py
        self.rec_slices: dict[str, tuple[str, str]] = {}
        self.rec_locals: dict[str, str] = {}
        self.rec_helpers: list[tuple[str, str, str]] = []

    def fresh(self, stem: str = "v") -> str:
        self.n += 1
        return f"{stem}{self.n}"

    # ---- expressions ------------------------------------------------------------------
    def literal(self, t: str) -> str:
        ch = self.ch
        if t == "bool_":
            return ch.choice(("True", "False"))
        if t in FLOATS:
            return ch.choice(("0.0", "1.0", "2.5", "-3.25", "1e-3", "1e30", "0.5", "7.0"))
        if t.startswith("u"):
            return str(ch.choice((0, 1, 2, 3, 7, 31, 32, 63, 255, 65535, 4294967295)))
        return str(ch.choice((0, 1, 2, -1, 3, -7, 31, 32, 64, 1000, 2147483647, -2147483648)))

    def int_index(self, depth: int) -> str:
        """A plain int expression used as a read index."""
        opts = ["0", "1"]
        if self.witness1:
            opts += [f"{self.witness1}.get()", f"{self.witness1}.get() + 1", f"{self.witness1}.get() - 1"]
        if self.witness2:
            opts += [f"{self.witness2}.row", f"{self.witness2}.col"]
        ints = [v for v, t in self.locals.items() if t in INTS]
        opts += ints
        if depth > 0 and self.ch.coin(0.3):
            return f"({self.expr('i64', depth - 1)})"
        return self.ch.choice(opts)

    def leaf(self, t: str, depth: int) -> str:
        ch = self.ch
        same = [v for v, vt in self.locals.items() if vt == t]
        other = [v for v, vt in self.locals.items() if vt != t]
        reads = [s for s, (k, e) in self.slices.items() if e == t and k in ("Slice", "Slice2D", "DisjointSlice", "DisjointSlice2D")]
        opts: list[str] = ["lit", "lit"]
        if same:
            opts += ["var", "var", "var"]
        if other:
            opts.append("cast")
        if reads:
            opts += ["read", "read"]
        if t == "i64" and self.slices:
            opts.append("len")
        if t == "i64" and self.witness1:
            opts.append("get")
        if any(e == t for e, _ in self.arrays.values()):
            opts += ["local", "local"]
        k = ch.choice(opts)
        if k == "local":
            return self.local_access(ch.choice([a for a, (e, _) in self.arrays.items() if e == t]), depth)
        if k == "var":
            return ch.choice(same)
        if k == "cast":
            return f"{t}({ch.choice(other)})"
        if k == "len":
            s = ch.choice(list(self.slices))
            kind = self.slices[s][0]
            return f"{s}.shape[{ch.integer(0, 1)}]" if kind.endswith("2D") else f"len({s})"
        if k == "get":
            return f"{self.witness1}.get()"
        if k == "read":
            s = ch.choice(reads)
            kind = self.slices[s][0]
            if kind.startswith("Disjoint"):
                w = self.witness2 if kind.endswith("2D") else self.witness1
                if w is None:
                    return self.literal(t)
                return f"{s}[{w}]"
            if kind.endswith("2D"):
                if self.witness2 and ch.coin(0.3):
                    return f"{s}[{self.witness2}]"
                return f"{s}[{self.int_index(depth)}, {self.int_index(depth)}]"
            if self.witness1 and ch.coin(0.3):
                return f"{s}[{self.witness1}]"
            return f"{s}[{self.int_index(depth)}]"
        lit = self.literal(t)
        return f"{t}({lit})" if ch.coin(0.3) else lit

    def expr(self, t: str, depth: int) -> str:
        ch = self.ch
        if depth <= 0 or ch.coin(0.3):
            return self.leaf(t, depth)
        d = depth - 1
        if t == "bool_":
            k = ch.choice(("cmp", "cmp", "chain", "logic", "not", "bits", "leaf"))
            if k == "cmp":
                u = ch.choice(SCALARS[:-1])
                return f"({self.expr(u, d)} {ch.choice(('<', '<=', '>', '>=', '==', '!='))} {self.expr(u, d)})"
            if k == "chain":
                u = ch.choice(("i64", "f32", "i32"))
                return f"({self.expr(u, d)} <= {self.expr(u, d)} < {self.expr(u, d)})"
            if k == "logic":
                return f"({self.expr('bool_', d)} {ch.choice(('and', 'or'))} {self.expr('bool_', d)})"
            if k == "not":
                return f"(not {self.expr('bool_', d)})"
            if k == "bits":
                return f"({self.expr('bool_', d)} {ch.choice(('&', '|', '^'))} {self.expr('bool_', d)})"
            return self.leaf(t, depth)
        kinds = ["bin", "bin", "bin", "un", "ifexp", "call"]
        if self.helpers and any(ht == t for _, ht in self.helpers):
            kinds.append("helper")
        if t in FLOATS:
            kinds += ["math", "math"]
        k = ch.choice(kinds)
        if k == "bin":
            ops = ("+", "-", "*", "//", "%", "<<", ">>", "&", "|", "^") if t in INTS else ("+", "-", "*", "/", "//", "%", "**")
            op = ch.choice(ops)
            rhs = self.expr(t, d)
            if op == "**" and ch.coin(0.5):
                rhs = ch.choice(("2.0", "0.5", "3"))
            if op == "/" and t == "f32":
                return f"f32({self.expr(t, d)} / {rhs})"
            return f"({self.expr(t, d)} {op} {rhs})"
        if k == "un":
            return f"({ch.choice(('-', '~') if t in INTS else ('-', '+'))}{self.expr(t, d)})"
        if k == "ifexp":
            return f"({self.expr(t, d)} if {self.expr('bool_', d)} else {self.expr(t, d)})"
        if k == "call":
            f = ch.choice(("abs", "min", "max"))
            if f == "abs":
                return f"abs({self.expr(t, d)})"
            return f"{f}({', '.join(self.expr(t, d) for _ in range(ch.integer(2, 3)))})"
        if k == "helper":
            name = ch.choice([h for h, ht in self.helpers if ht == t])
            return f"{name}({self.expr(t, d)}, {self.expr(t, d)})"
        mod = ch.choice(("math", "az.math"))
        if ch.coin(0.7):
            return f"{mod}.{ch.choice(MATH1)}({self.expr(t, d)})"
        if ch.coin(0.3):
            return f"{mod}.fma({self.expr(t, d)}, {self.expr(t, d)}, {self.expr(t, d)})"
        return f"{mod}.{ch.choice(MATH2)}({self.expr(t, d)}, {self.expr(t, d)})"

    # ---- statements -------------------------------------------------------------------
    def emit(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def outputs(self, two_d: bool) -> list[str]:
        want = "DisjointSlice2D" if two_d else "DisjointSlice"
        return [s for s, (k, _) in self.slices.items() if k == want]

    def stmt(self, ind: int, depth: int) -> None:
        ch = self.ch
        opts = ["assign", "assign", "reassign", "aug", "write", "write", "if"]
        if depth > 0:
            opts += ["if", "while", "for"]
            if self.witness1 and self.outputs(False) and not self.in_helper:
                opts.append("gridstride")
        if self.loop_depth:
            opts += ["break", "continue"]
        if any(k == "AtomicSlice" for k, _ in self.slices.values()):
            opts.append("atomic")
        if self.writers and self.witness1:
            opts.append("writer")
        if not self.in_helper and self.loop_depth == 0 and ind == 1:
            opts.append("unsafe")
            if ch.coin(0.25):
                opts += ["safe_shared", "shared_atomic"]
            if self.witness2 and not self.tiled and ch.coin(0.2):
                opts.append("thread_tile")
        opts += ["local_decl", "unpack"]
        if self.arrays:
            opts += ["local_write", "local_write", "local_loop"]
        if self.tuple_helpers:
            opts.append("tuple_call")
        if (self.rec_slices or self.rec_helpers) and not self.in_helper:
            opts += ["record", "record"]
        if self.fill_helpers and any(len(s) == 1 and e == fe for e, s in self.arrays.values() for _, fe in self.fill_helpers):
            opts.append("fill_call")
        # mostly where every thread reaches it (the kernel's top level); now and then anywhere
        if ch.coin(0.3 if (ind == 1 and not self.in_helper and self.loop_depth == 0) else 0.05):
            opts.append("collective")
        k = ch.choice(opts)
        if k == "assign" or (k in ("reassign", "aug") and not self.locals):
            t = ch.choice(SCALARS)
            v = self.fresh()
            e = self.expr(t, 2)
            self.emit(ind, f"{v}: {t} = {e}" if ch.coin(0.7) else f"{v} = {t}({e})")
            self.locals[v] = t
        elif k == "reassign":
            v = ch.choice(list(self.locals))
            self.emit(ind, f"{v} = {self.expr(self.locals[v], 2)}")
        elif k == "aug":
            v = ch.choice(list(self.locals))
            t = self.locals[v]
            ops = ("+=", "-=", "*=", "//=", "%=", "<<=", ">>=", "&=", "|=", "^=") if t in INTS else ("+=", "-=", "*=")
            if t == "bool_":
                ops = ("&=", "|=", "^=")
            self.emit(ind, f"{v} {ch.choice(ops)} {self.expr(t, 1)}")
        elif k == "write":
            two = self.witness2 is not None and (self.witness1 is None or ch.coin(0.5))
            outs = self.outputs(two)
            w = self.witness2 if two else self.witness1
            if not outs or w is None:
                self.emit(ind, "pass")
                return
            c = ch.choice(outs)
            e = self.expr(self.slices[c][1], 2)
            if ch.coin(0.6):
                self.emit(ind, f"if {w} in {c}:")
                ind += 1
            if ch.coin(0.2):
                self.emit(ind, f"{c}[{w}] += {e}")
            else:
                self.emit(ind, f"{c}[{w}] = {e}")
        elif k == "if":
            self.emit(ind, f"if {self.expr('bool_', 2)}:")
            self.block(ind + 1, depth - 1)
            if ch.coin(0.3):
                self.emit(ind, f"elif {self.expr('bool_', 1)}:")
                self.block(ind + 1, depth - 1)
            if ch.coin(0.4):
                self.emit(ind, "else:")
                self.block(ind + 1, depth - 1)
        elif k == "while":
            c = self.fresh("k")
            self.emit(ind, f"{c} = 0")
            self.emit(ind, f"while {c} < {ch.integer(0, 4)}:")
            self.emit(ind + 1, f"{c} += 1")
            self.locals[c] = "i64"
            self.loop_depth += 1
            self.block(ind + 1, depth - 1)
            self.loop_depth -= 1
        elif k == "for":
            r = self.fresh("r")
            args = ch.choice((f"{ch.integer(0, 5)}", f"{ch.integer(-3, 2)}, {ch.integer(0, 6)}", f"{ch.integer(5, 8)}, 0, -{ch.integer(1, 3)}", "len(" + ch.choice(list(self.slices)) + ")" if self.slices else "3"))
            self.emit(ind, f"for {r} in range({args}):")
            self.locals[r] = "i64"
            self.loop_depth += 1
            self.block(ind + 1, depth - 1)
            self.loop_depth -= 1
        elif k == "gridstride":
            c = ch.choice(self.outputs(False))
            g = self.fresh("g")
            self.emit(ind, f"for {g} in thread.grid_stride({c}):")
            self.emit(ind + 1, f"{c}[{g}] = {self.expr(self.slices[c][1], 1)}")
        elif k in ("break", "continue"):
            if ch.coin(0.5):
                self.emit(ind, f"if {self.expr('bool_', 1)}:")
                ind += 1
            self.emit(ind, k)
        elif k == "atomic":
            h = ch.choice([s for s, (kd, _) in self.slices.items() if kd == "AtomicSlice"])
            t = self.slices[h][1]
            v = self.fresh("old")
            self.emit(ind, f"{v} = {h}.{ch.choice(('add', 'min', 'max', 'exchange'))}({self.int_index(1)}, {self.expr(t, 1)})")
            self.locals[v] = t
        elif k == "writer":
            name, elem = ch.choice(self.writers)
            outs = [s for s, (kd, e) in self.slices.items() if kd == "DisjointSlice" and e == elem]
            if outs:
                self.emit(ind, f"{name}({ch.choice(outs)}, {self.witness1}, {self.expr(elem, 1)})")
            else:
                self.emit(ind, "pass")
        elif k == "unsafe":
            self.unsafe(ind)
        elif k in ("local_decl", "local_write", "local_loop", "unpack", "tuple_call", "fill_call"):
            self.local_stmt(k, ind, depth)
        elif k == "collective":
            self.collective(ind)
        elif k == "safe_shared":
            self.safe_shared(ind)
        elif k == "shared_atomic":
            self.shared_atomic(ind)
        elif k == "thread_tile":
            self.tiled = True
            self.thread_tile(ind)
        elif k == "record":
            self.record_stmt(ind)

    def collective(self, ind: int) -> None:
        """`v = az.warp.reduce(...)` / `az.block.reduce|scan|broadcast(...)`, wherever it lands
        (under thread-dependent control it is a divergence error the checker must agree on)."""
        ch = self.ch
        t = ch.choice(SCALARS)
        v = self.fresh()
        call = ch.choice(("az.warp.reduce", "az.block.reduce", "az.block.scan", "az.block.broadcast"))
        op = ch.choice(("sum", "max", "min", "and", "or"))
        e = self.expr(t, 1)
        if call == "az.block.broadcast":
            args = f"{e}, {ch.integer(0, 40)}"
        elif call == "az.block.scan":
            args = f'{e}, "{op}", inclusive={ch.choice(("True", "False"))}'
        else:
            args = f'{e}, "{op}"'
        self.emit(ind, f"{v} = {call}({args})")
        self.locals[v] = t

    def unsafe(self, ind: int) -> None:
        ch = self.ch
        self.emit(ind, "with az.unsafe():")
        ind += 1
        sm = self.fresh("sm")
        size = ch.choice((32, 64, 256))
        t = ch.choice(("f32", "i32", "f64"))
        self.emit(ind, f"{sm} = az.shared.array({size}, {t})")
        tid = self.fresh("t")
        self.emit(ind, f"{tid} = thread.{ch.choice(('tid_x', 'lane_id', 'tid_x'))}()")
        self.locals[tid] = "i32"
        self.emit(ind, f"{sm}[{tid} % {size}] = {self.expr(t, 1)}")
        if ch.coin(0.7):
            self.emit(ind, "az.syncthreads()")
        v = self.fresh()
        self.emit(ind, f"{v}: {t} = {sm}[({tid} + 1) % {size}]")
        self.locals[v] = t
        if ch.coin(0.4):
            w = self.fresh()
            op = ch.choice(("shfl_down", "shfl_up", "shfl_xor", "shfl_idx"))
            self.emit(ind, f"{w} = az.warp.{op}({v}, {ch.integer(0, 31)})")
            self.locals[w] = t
        if ch.coin(0.3):
            b = self.fresh()
            self.emit(ind, f"{b} = az.warp.{ch.choice(('ballot', 'any', 'all'))}({self.expr('bool_', 1)})")
            self.locals[b] = "u32"
        outs = [s for s in self.outputs(False)]
        if outs and ch.coin(0.5):
            c = ch.choice(outs)
            self.emit(ind, f"{c}.write_unchecked({self.int_index(1)}, {self.expr(self.slices[c][1], 1)})")

    def block(self, ind: int, depth: int) -> None:
        saved = dict(self.locals)
        saved_arrays = dict(self.arrays)
        for _ in range(self.ch.integer(1, 3)):
            self.stmt(ind, depth)
        # locals first bound inside the block are not visible after it (a safe approximation)
        self.locals = saved
        self.arrays = saved_arrays

    # ---- whole module -----------------------------------------------------------------
    def module(self) -> str:
        ch = self.ch
        head = [
            "import math",
            "import numpy as np",
            "import anodize as az",
            "from anodize import Slice, DisjointSlice, Slice2D, DisjointSlice2D, AtomicSlice, Index1D, Index2D, LocalArray",
            "from anodize import f32, f64, i32, i64, u32, u64, bool_, f16, bf16, i8, i16, u8, u16, kernel, launch_contract, thread",
            "from anodize import f8e4m3, f8e5m2",
            "",
            f"BLOCK = {ch.choice((32, 64, 128, 256))}",
            "",
        ]
        self.lines = head
        for _ in range(ch.integer(0, 2)):
            name, t = self.fresh("h"), ch.choice(SCALARS[:-1])
            self.emit(0, "@az.func")
            self.emit(0, f"def {name}(x: {t}, y: {t}) -> {t}:")
            self.locals = {"x": t, "y": t}
            self.in_helper = True
            e = self.expr(t, 2)
            self.in_helper = False
            self.emit(1, f"return {e}")
            self.emit(0, "")
            self.helpers.append((name, t))
        if ch.coin(0.3):  # a helper returning a tuple
            name, t1, t2 = self.fresh("tp"), ch.choice(SCALARS[:-1]), ch.choice(SCALARS)
            self.emit(0, "@az.func")
            self.emit(0, f"def {name}(x: {t1}, y: {t2}) -> tuple[{t1}, {t2}]:")
            self.locals = {"x": t1, "y": t2}
            self.in_helper = True
            if ch.coin(0.5):
                self.emit(1, f"if {self.expr('bool_', 1)}:")
                self.emit(2, f"return {self.expr(t1, 1)}, y")
            self.emit(1, f"return {self.expr(t1, 2)}, {self.expr(t2, 1)}")
            self.in_helper = False
            self.emit(0, "")
            self.tuple_helpers.append((name, t1, t2))
        if ch.coin(0.3):  # a helper filling the caller's local array by reference
            name, t = self.fresh("fl"), ch.choice(SCALARS[:-1])
            self.emit(0, "@az.func")
            self.emit(0, f"def {name}(acc: LocalArray[{t}], v: {t}) -> None:")
            self.emit(1, "for k in range(len(acc)):")
            self.emit(2, f"acc[k] {ch.choice(('=', '+=', '*='))} v")
            self.emit(0, "")
            self.fill_helpers.append((name, t))
        self.locals = {}
        if ch.coin(0.4):
            name, t = self.fresh("w"), ch.choice(("f32", "i32", "f64"))
            self.emit(0, "@az.func")
            self.emit(0, f"def {name}(c: DisjointSlice[{t}], i: Index1D, v: {t}) -> None:")
            self.emit(1, "if i in c:")
            self.emit(2, "c[i] = v")
            self.emit(0, "")
            self.writers.append((name, t))
        self.locals = {}
        self.record_decls()
        domain = 2 if ch.coin(0.3) else 1
        params: list[str] = []
        for _ in range(ch.integer(1, 4)):
            kind = ch.choice(("Slice", "Slice", "DisjointSlice", "AtomicSlice", "Slice2D", "DisjointSlice2D", "scalar", "scalar"))
            name = self.fresh("p")
            if kind == "scalar":
                t = ch.choice(SCALARS)
                params.append(f"{name}: {t}")
                self.locals[name] = t
                continue
            if kind.endswith("2D") and kind.startswith("Disjoint") and domain != 2:
                kind = "DisjointSlice"
            if kind == "DisjointSlice" and domain == 2:
                kind = "DisjointSlice2D"
            elem = ch.choice(("i32", "u32", "f32") if kind == "AtomicSlice" else SCALARS)
            params.append(f"{name}: {kind}[{elem}]")
            self.slices[name] = (kind, elem)
        self.record_params(domain, params)
        if not any(k.startswith("Disjoint") for k, _ in self.slices.values()):
            name = self.fresh("out")
            kind = "DisjointSlice2D" if domain == 2 else "DisjointSlice"
            elem = ch.choice(SCALARS)
            params.append(f"{name}: {kind}[{elem}]")
            self.slices[name] = (kind, elem)
        block = "BLOCK" if domain == 1 else ch.choice(("(16, 16)", "(32, 8)", "(8, 8)"))
        req = ""
        ones = [s for s, (k, _) in self.slices.items() if not k.endswith("2D")]
        if len(ones) >= 2 and ch.coin(0.5):
            req = f", requires=lambda {', '.join(p.split(':')[0] for p in params)}: len({ones[0]}) == len({ones[1]})"
        if ch.coin(0.9):
            self.emit(0, f"@launch_contract(domain={domain}, block={block}{req})")
        self.emit(0, "@kernel")
        self.emit(0, f"def kern({', '.join(params)}) -> None:")
        if domain == 1:
            self.witness1 = "i"
            self.emit(1, "i = thread.index_1d()")
        else:
            self.witness2 = "ij"
            self.emit(1, "ij = thread.index_2d()")
        for _ in range(ch.integer(1, 6)):
            self.stmt(1, 2)
        return "\n".join(self.lines) + "\n"


OUTSIDE_KINDS = (
    "lambda", "listcomp", "genexp", "try", "with_open", "fstring", "classdef", "yield", "star_args",
    "default", "wrong_annotation", "slice_write", "offset_write", "garbage", "global", "import",
    "print", "dict", "walrus", "nested_def", "witness_int", "while_else", "raise", "string",
    "delete_line", "kwargs_call", "slice_aug", "zero_write", "reverse_write", "return_value", "match",
)


def _inject(src: str, ch: Chooser, kind: str) -> str:
    lines = src.splitlines()
    try:
        kdef = next(n for n, line in enumerate(lines) if line.startswith("def kern("))
    except StopIteration:
        return src
    body = [n for n in range(kdef + 1, len(lines)) if lines[n].startswith("    ") and lines[n].strip()]
    at = ch.choice(body) if body else kdef + 1
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())] if body else "    "
    if lines[at].rstrip().endswith(":"):
        indent += "    "
        at += 1
    out_names = [p.split(":")[0].strip() for p in lines[kdef][9:-9].split(",") if "DisjointSlice[" in p]
    in_names = [p.split(":")[0].strip() for p in lines[kdef][9:-9].split(",") if " Slice[" in p or p.strip().split(":")[-1].strip().startswith("Slice[")]
    c = out_names[0] if out_names else "c"
    a = in_names[0] if in_names else "a"
    stmts = {
        "lambda": "f = lambda x: x + 1",
        "listcomp": "xs = [q for q in range(3)]",
        "genexp": "s = sum(q for q in range(3))",
        "try": "try:\n{i}    pass\n{i}except Exception:\n{i}    pass",
        "with_open": "with open('x') as fh:\n{i}    pass",
        "fstring": "s = f'{{i}}'",
        "classdef": "class K:\n{i}    pass",
        "yield": "yield 1",
        "global": "global BLOCK",
        "import": "import os",
        "print": "print(1)",
        "dict": "d = {{1: 2}}",
        "walrus": "if (z := 3) > 2:\n{i}    pass",
        "nested_def": "def inner() -> None:\n{i}    pass",
        "witness_int": "i = 5",
        "while_else": "while False:\n{i}    pass\n{i}else:\n{i}    pass",
        "raise": "raise ValueError('x')",
        "string": "s = 'abc'",
        "kwargs_call": "x = min(a=1, b=2)",
        "slice_write": f"{a}[0] = 0",
        "slice_aug": f"{a}[0] += 1",
        "offset_write": f"{c}[i + 1] = 0",
        "zero_write": f"{c}[0] = 0",
        "reverse_write": f"{c}[len({c}) - 1 - i.get()] = 0",
        "return_value": "return 1",
        "match": "match 1:\n{i}    case 1:\n{i}        pass",
    }
    if kind in stmts:
        text = stmts[kind].replace("{i}", indent).replace("{{", "{").replace("}}", "}")
        lines.insert(at, indent + text)
    elif kind == "star_args":
        lines[kdef] = lines[kdef].replace(") -> None:", ", *rest: i32) -> None:")
    elif kind == "default":
        lines[kdef] = lines[kdef].replace(") -> None:", ", extra: i32 = 3) -> None:")
    elif kind == "wrong_annotation":
        lines[kdef] = lines[kdef].replace(ch.choice(("Slice[", "f32", "i32", ") -> None")), ch.choice(("list[", "int", "str", ") -> int")), 1)
    elif kind == "delete_line":
        del lines[at]
    elif kind == "garbage":
        line = lines[at]
        pos = ch.integer(0, len(line))
        tok = ch.choice(("$", "@@", ")", "(", "[", ":", "def", "\t", "'", '"""', "\\", " lambda ", "0x", "1e", ",", "**", "->"))
        lines[at] = line[:pos] + tok + line[pos:]
    return "\n".join(lines) + "\n"


def gen_module(ch: Chooser, outside: bool = False) -> str:
    """One module's source; `outside` injects one construct outside the subset.  About one
    module in eight is a tile kernel (tools/kernelgen_tiles.py)."""
    if ch.integer(0, 7) == 0:
        from kernelgen_tiles import gen_tile_module

        return gen_tile_module(ch, outside)
    src = _Gen(ch).module()
    if outside:
        src = _inject(src, ch, ch.choice(OUTSIDE_KINDS))
    return src


if __name__ == "__main__":
    import sys

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    print(gen_module(RandomChooser(seed), outside=len(sys.argv) > 2))
