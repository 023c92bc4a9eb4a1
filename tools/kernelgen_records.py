"""The kernel generator's records (a mixin of kernelgen._Gen): `@az.record` classes of scalar
fields (the 8-bit floats among them, converted to explicitly), `az.Array` fields and a nested
record; record slices as kernel parameters; field and whole-record reads, record locals,
writes of a whole record or one field at the witness; helpers taking and returning records.
Now and then a construct check and compile must both refuse: a write at another element, into
an input, a field that does not exist, an array index out of range, a store without the cast
an f8 field needs, a helper's record used inside an expression."""

from __future__ import annotations

from typing import Any

_FIELD_TYPES = ("f32", "f64", "i32", "u8", "i16", "f16", "bool_", "i64", "f8e4m3", "f8e5m2")
_F8 = ("f8e4m3", "f8e5m2")


class RecordsGen:
    ch: Any
    locals: dict[str, str]
    lines: list[str]
    witness1: str | None
    in_helper: bool
    records: dict[str, list[tuple[str, str, str, int]]]  # name -> fields (name, kind "s"/"a"/"r", type, n)
    rec_slices: dict[str, tuple[str, str]]  # parameter -> (kind, record)
    rec_locals: dict[str, str]  # record local -> record
    rec_helpers: list[tuple[str, str, str]]  # (name, record, parameter type): (x: T) -> R

    def record_decls(self) -> None:
        ch = self.ch
        if not ch.coin(0.35):
            return
        for depth in range(ch.integer(1, 2)):
            name = self.fresh("R")
            fields: list[tuple[str, str, str, int]] = []
            for k in range(ch.integer(1, 4)):
                kind = ch.choice(("s", "s", "s", "a")) if not (depth and k == 0) else "r"
                if kind == "r":
                    fields.append((f"f{k}", "r", list(self.records)[-1], 1))
                elif kind == "a":
                    fields.append((f"f{k}", "a", ch.choice(_FIELD_TYPES[:5]), ch.integer(1, 3)))
                else:
                    fields.append((f"f{k}", "s", ch.choice(_FIELD_TYPES), 1))
            self.emit(0, "@az.record")
            self.emit(0, f"class {name}:")
            for f, kind, t, n in fields:
                ann = f"az.Array[{t}, {n}]" if kind == "a" else t
                self.emit(1, f"{f}: {ann}")
            self.emit(0, "")
            self.records[name] = fields
        rec = ch.choice(list(self.records))
        if ch.coin(0.6):  # a helper returning a record
            h, t = self.fresh("mk"), ch.choice(("f32", "i32", "f64"))
            self.emit(0, "@az.func")
            self.emit(0, f"def {h}(x: {t}) -> {rec}:" if ch.coin(0.8) else f"def {h}(x: {t}):")
            self.locals = {"x": t}
            self.in_helper = True
            if ch.coin(0.4):
                r = self.fresh("r")
                self.emit(1, f"{r} = {self.record_value(rec)}")
                self.emit(1, f"return {r}")
            else:
                self.emit(1, f"return {self.record_value(rec)}")
            self.in_helper = False
            self.emit(0, "")
            self.rec_helpers.append((h, rec, t))
        self.locals = {}

    def record_params(self, domain: int, params: list[str]) -> None:
        if not self.records or domain != 1:
            return
        ch = self.ch
        for kind in ("Slice", "DisjointSlice"):
            if ch.coin(0.7):
                name = self.fresh("rp" if kind == "Slice" else "ro")
                rec = ch.choice(list(self.records))
                params.append(f"{name}: {kind}[{rec}]")
                self.rec_slices[name] = (kind, rec)

    # ---- values -------------------------------------------------------------------------
    def field_value(self, kind: str, t: str, n: int) -> str:
        if kind == "r":
            return self.record_value(t)
        if kind == "a":
            return "(" + ", ".join(self.scalar_value(t) for _ in range(n)) + ("," if n == 1 else "") + ")"
        return self.scalar_value(t)

    def scalar_value(self, t: str) -> str:
        if t in _F8:  # conversions to an f8 are explicit (a bare f32 now and then: refused)
            return f"{t}({self.expr('f32', 1)})" if self.ch.coin(0.95) else self.expr("f32", 1)
        return self.expr(t, 1)

    def record_value(self, rec: str) -> str:
        fields = self.records[rec]
        if self.ch.coin(0.5):
            return f"{rec}(" + ", ".join(self.field_value(k, t, n) for _, k, t, n in fields) + ")"
        return f"{rec}(" + ", ".join(f"{f}={self.field_value(k, t, n)}" for f, k, t, n in fields) + ")"

    def _leaf_path(self, rec: str) -> tuple[str, str]:
        """A path to one scalar of a record (`.f0`, `.f1[2]`, `.f0.f1`) and its type."""
        ch = self.ch
        f, kind, t, n = ch.choice(self.records[rec])
        if kind == "r":
            sub, st = self._leaf_path(t)
            return f".{f}{sub}", st
        if kind == "a":
            k = ch.integer(0, n - 1) if ch.coin(0.97) else n  # (n: out of range, refused)
            return f".{f}[{k}]", t
        if ch.coin(0.02):
            return ".nope", "f32"  # no such field
        return f".{f}", t

    # ---- statements ---------------------------------------------------------------------
    def record_stmt(self, ind: int) -> None:
        ch = self.ch
        ins = [s for s, (k, _) in self.rec_slices.items() if k == "Slice"]
        outs = [s for s, (k, _) in self.rec_slices.items() if k == "DisjointSlice"]
        opts = ["read"] * bool(ins or self.rec_locals) + ["local"] * bool(ins or self.rec_helpers)
        opts += ["write", "write", "field"] * bool(outs and self.witness1)
        if not opts:
            return
        k = ch.choice(opts)
        w = self.witness1
        if k == "read":
            srcs = [(f"{s}[{self.int_index(1)}]", r) for s in ins for r in (self.rec_slices[s][1],)]
            srcs += list(self.rec_locals.items())
            base, rec = ch.choice(srcs)
            path, t = self._leaf_path(rec)
            v = self.fresh()
            lt = "f32" if t in _F8 else t  # an f8 widens implicitly
            self.emit(ind, f"{v}: {lt} = {base}{path}")
            self.locals[v] = lt
        elif k == "local":
            r = self.fresh("r")
            if self.rec_helpers and (not ins or ch.coin(0.5)):
                h, rec, t = ch.choice(self.rec_helpers)
                call = f"{h}({self.expr(t, 1)})"
                if ch.coin(0.05):  # a helper's record inside an expression: refused
                    path, lt = self._leaf_path(rec)
                    self.emit(ind, f"{r} = {call}{path}")
                    return
                self.emit(ind, f"{r} = {call}")
            else:
                s = ch.choice(ins)
                rec = self.rec_slices[s][1]
                self.emit(ind, f"{r} = {s}[{self.int_index(1)}]")
            self.rec_locals[r] = rec
        else:
            o = ch.choice(outs)
            rec = self.rec_slices[o][1]
            at = w if ch.coin(0.97) else f"{w}.get() + 1"  # (another element: refused)
            if ch.coin(0.98):
                self.emit(ind, f"if {w} in {o}:")
                ind += 1
            if k == "field":
                path, t = self._leaf_path(rec)
                op = "+=" if t in ("f32", "i32", "f64") and ch.coin(0.3) else "="
                self.emit(ind, f"{o}[{at}]{path} {op} {self.scalar_value(t)}")
                return
            same = [r for r, rr in self.rec_locals.items() if rr == rec]
            helpers = [h for h in self.rec_helpers if h[1] == rec]
            pick = ch.choice(["ctor"] + ["local"] * bool(same) + ["helper"] * bool(helpers))
            if pick == "local":
                value = ch.choice(same)
            elif pick == "helper":
                h, _, t = ch.choice(helpers)
                value = f"{h}({self.expr(t, 1)})"
            else:
                value = self.record_value(rec)
            self.emit(ind, f"{o}[{at}] = {value}")
