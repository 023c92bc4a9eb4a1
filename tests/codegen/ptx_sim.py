"""A tiny interpreter of the straight-line and looping PTX the staged epilogue's inline blocks use
(codegen/tile/epilogue.py): each thread's block run alone, shared and global memory as byte arrays.
Enough of PTX for a CPU test that the blocks store exactly the elements the per-element store does."""

from __future__ import annotations

import re
from typing import Any

_W = {"u32": 32, "s32": 32, "b32": 32, "u64": 64, "s64": 64, "b64": 64, "b16": 16, "pred": 1}


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


class Thread:
    """One thread's registers; `run(text, ops)` executes a `{ ... }` block with `$i` = ops[i]."""

    def __init__(self, tid: int, smem: bytearray, gmem: bytearray) -> None:
        self.tid, self.smem, self.gmem = tid, smem, gmem
        self.r: dict[str, int] = {}
        self.events: list[tuple[Any, ...]] = []  # (op, ...) of the async and ordering instructions, in order
        self.watch = ""  # a register whose value each shared write records (a loop counter)
        self.check_alignment = False  # assert each access is aligned to its size (the hardware faults otherwise)

    def val(self, x: str, ops: list[Any]) -> int:
        x = x.strip()
        if x.startswith("$"):
            return int(ops[int(x[1:])])
        if x == "%tid.x":
            return self.tid
        if x.startswith("%"):
            return self.r[x]
        return int(x, 0)

    def run(self, text: str, ops: list[Any]) -> list[Any]:
        lines = [ln.strip() for ln in text.strip().strip("{}").split("\n")]
        lines = [ln.rstrip(";") for ln in lines if ln and not ln.startswith(".reg")]
        labels = {ln[:-1]: i for i, ln in enumerate(lines) if ln.endswith(":")}
        ops = list(ops)
        pc = 0
        steps = 0
        while pc < len(lines):
            steps += 1
            assert steps < 10**6
            ln = lines[pc]
            pc += 1
            if ln.endswith(":") or ln in ("{", "}"):  # a label, or an inner scope's brace (its .reg lines dropped)
                continue
            m = re.match(r"@(!?)(%\w+)\s+(.*)", ln)
            if m:
                p = self.r[m.group(2)]
                if (not p) if not m.group(1) else p:
                    continue
                ln = m.group(3)
            op, _, rest = ln.partition(" ")
            args = [a.strip() for a in re.split(r",(?![^{]*})(?![^\[]*\])", rest)] if rest else []
            parts = op.split(".")
            jump = self.exec(parts, args, ops)
            if jump is not None:
                pc = labels[jump]
        return ops

    def setr(self, d: str, v: int, bits: int, ops: list[Any]) -> None:
        v &= (1 << bits) - 1
        if d.startswith("$"):
            ops[int(d[1:])] = v
        else:
            self.r[d] = v

    def exec(self, p: list[str], a: list[str], ops: list[Any]) -> str | None:
        name = p[0]
        ty = p[-1]
        bits = _W.get(ty, 32)
        V = lambda x: self.val(x, ops)  # noqa: E731
        S = lambda x: _signed(V(x), bits)  # noqa: E731
        if name == "bra":
            return a[0]
        if name in ("bar", "fence", "wgmma") or (name == "cp" and p[2] in ("commit_group", "wait_group")):
            self.events.append((".".join(p[:3]), *(self.val(x, ops) for x in a[:1] if not x.startswith("{"))))
            return None
        if name == "cp":  # cp.async.cg.shared.global [dst], [src], 16, src-size | ignore-src predicate
            m = re.match(r"\[(.+?)(?:\+(\d+))?\]", a[0])
            assert m is not None
            dst = self.val(m.group(1), ops) + int(m.group(2) or 0)
            src = self.val(a[1].strip("[]"), ops)
            if a[3].startswith("%") and a[3][1:3].endswith("p"):
                n = 0 if self.r[a[3]] else 16
            else:
                n = self.val(a[3], ops)
            data = (bytes(self.gmem[src:src + n]) if n else b"") + bytes(16 - n)
            assert n == 0 or 0 <= src and src + n <= len(self.gmem), ("cp.async reads outside", src, n)
            self.smem[dst:dst + 16] = data
            self.events.append(("cp.async", self.r.get(self.watch), dst, data))
            return None
        if name == "selp":
            self.setr(a[0], V(a[1]) if self.r[a[3]] else V(a[2]), bits, ops)
            return None
        if name == "xor":
            self.setr(a[0], V(a[1]) ^ V(a[2]), bits, ops)
            return None
        if name == "or" and ty == "pred":
            self.r[a[0]] = V(a[1]) | V(a[2])
            return None
        if name == "mov" and a[1].startswith("{"):  # pack: the first register the low bits
            parts = [x.strip() for x in a[1].strip("{}").split(",")]
            w = bits // len(parts)
            self.setr(a[0], sum((V(x) & ((1 << w) - 1)) << (w * i) for i, x in enumerate(parts)), bits, ops)
        elif name == "mov":
            self.setr(a[0], V(a[1]), bits, ops)
        elif name in ("add", "sub", "and", "or", "shl", "shr", "div", "rem", "mul", "max", "min"):
            x, y = V(a[1]), V(a[2])
            if ty.startswith("s"):
                x, y = S(a[1]), S(a[2])
            if name == "mul" and p[1] == "wide":
                self.setr(a[0], x * y, 2 * bits, ops)
                return None
            if name == "and" and ty == "pred":
                self.r[a[0]] = x & y
                return None
            fns = {"add": lambda: x + y, "sub": lambda: x - y, "and": lambda: x & y, "or": lambda: x | y,
                   "shl": lambda: x << y, "shr": lambda: x >> y, "mul": lambda: x * y, "max": lambda: max(x, y),
                   "min": lambda: min(x, y), "div": lambda: int(x / y), "rem": lambda: x - int(x / y) * y}
            r = fns[name]()
            self.setr(a[0], r, bits, ops)
        elif name == "prmt":  # default mode: byte i of d is byte (c >> 4 i) & 7 of {b, a} (a the low four)
            x = (V(a[1]) & 0xFFFFFFFF) | (V(a[2]) & 0xFFFFFFFF) << 32
            sel = V(a[3])
            assert not sel & 0x8888, "prmt's sign-replicating selectors"
            self.setr(a[0], sum(((x >> 8 * ((sel >> 4 * i) & 7)) & 0xFF) << 8 * i for i in range(4)), 32, ops)
        elif name == "mad":
            self.setr(a[0], V(a[1]) * V(a[2]) + V(a[3]), bits, ops)
        elif name == "cvt":
            src = _W[p[-1]]
            v = V(a[1]) & ((1 << src) - 1)
            if p[-1].startswith("s"):
                v = _signed(v, src)
            self.setr(a[0], v, _W[p[-2]], ops)
        elif name == "setp":
            x, y = (S(a[1]), S(a[2])) if ty.startswith("s") else (V(a[1]) & ((1 << bits) - 1), V(a[2]) & ((1 << bits) - 1))
            self.r[a[0]] = int({"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y, "ge": x >= y}[p[1]])
        elif name in ("ld", "st"):
            mem = self.smem if p[1] == "shared" else self.gmem
            vec = 4 if "v4" in p else 2 if "v2" in p else 1
            addr_s, regs_s = (a[1], a[0]) if name == "ld" else (a[0], a[1])
            m = re.match(r"\[(.+?)(?:\+(\d+))?\]", addr_s)
            assert m is not None
            addr = V(m.group(1)) + int(m.group(2) or 0)
            regs = [x.strip() for x in regs_s.strip("{}").split(",")]
            nb = _W.get(ty, 32) // 8 if ty != "f32" else 4
            assert not self.check_alignment or addr % (nb * vec) == 0, ("misaligned", p, hex(addr))  # (the hardware faults)
            for i, reg in enumerate(regs[:vec]):
                at = addr + i * nb
                assert at >= 0 and at + nb <= len(mem), (p, hex(at))
                if name == "ld":
                    self.setr(reg, int.from_bytes(mem[at:at + nb], "little"), nb * 8, ops)
                else:
                    mem[at:at + nb] = (V(reg) & ((1 << (nb * 8)) - 1)).to_bytes(nb, "little")
                    if mem is self.smem and self.watch:
                        self.events.append(("st.shared", self.r.get(self.watch), at, bytes(mem[at:at + nb])))
        else:
            raise NotImplementedError(p)
        return None


# ---- a warpgroup running a branch-free block with wgmma (codegen/tile/attn_wgmma.py) -------------


def _f16(bits: int) -> float:
    import numpy as np

    return float(np.array([bits & 0xFFFF], np.uint16).view(np.float16)[0])


def _f32_bits(v: float) -> int:
    import struct

    return int.from_bytes(struct.pack("<f", v), "little")


def _f32(bits: int) -> float:
    import struct

    return float(struct.unpack("<f", (bits & 0xFFFFFFFF).to_bytes(4, "little"))[0])


def sw128(addr: int) -> int:
    """The 128-byte swizzle of a shared address: bits 4-6 XOR bits 7-9."""
    return addr ^ ((addr >> 7) & 7) << 4


def _smem_f16(smem: bytearray, addr: int) -> float:
    at = sw128(addr)
    return _f16(int.from_bytes(smem[at:at + 2], "little"))


def _desc(d: int) -> tuple[int, int, int]:
    assert d >> 62 == 1, "128-byte swizzle"
    return (d & 0x3FFF) << 4, (d >> 16 & 0x3FFF) << 4, (d >> 32 & 0x3FFF) << 4


def wgmma_model(threads: list[Thread], line: str, ops: list[list[Any]], smem: bytearray) -> None:
    """`wgmma.mma_async.sync.aligned.m64nNk16.f32.f16.f16 {d}, A, b-desc, p, 1, 1, [trans-a,] trans-b`
    for the 128 threads of a warpgroup (PTX ISA, "Asynchronous Warpgroup Level Matrix"): D's
    element (16 w + l / 4 + 8 ((i / 2) % 2), 8 (i / 4) + 2 (l % 4) + i % 2) in register i of
    warp w's lane l; A from registers (mma.sync m16n8k16's A fragment, rows 16 w further) or
    a K-major descriptor (element (m, k) at start + (m / 8) SBO + (m % 8) 128 + 2 k); B K-major
    (trans-b 0: (k, n) at start + (n / 8) SBO + (n % 8) 128 + 2 k) or MN-major (1: start +
    (n / 64) LBO + (k / 8) SBO + (k % 8) 128 + 2 (n % 64)); every address 128-byte swizzled.
    The accumulation is exact in the model (float64) and rounded to f32 once."""
    m = re.match(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.f16\.f16 \{([^}]*)\}, (\{[^}]*\}|[^,]+), ([^,]+), "
                 r"([^,]+), 1, 1, (?:(\d), )?(\d)$", line)
    assert m is not None, line
    n = int(m.group(1))
    dregs = [x.strip() for x in m.group(2).split(",")]
    assert len(dregs) == n // 2 and len(threads) == 128 and m.group(6) in (None, "0")
    if not all(th.r[m.group(5)] for th in threads):
        raise NotImplementedError("scale-d false")
    A = [[0.0] * 16 for _ in range(64)]
    if m.group(3).startswith("{"):
        aregs = [x.strip() for x in m.group(3).strip("{}").split(",")]
        for t, th in enumerate(threads):
            w, lane = t // 32, t % 32
            g, q = lane // 4, lane % 4
            for j, reg in enumerate(aregs):
                v = th.val(reg, ops[t])
                row, col = 16 * w + g + 8 * (j & 1), 2 * q + 8 * (j >> 1)
                A[row][col], A[row][col + 1] = _f16(v), _f16(v >> 16)
    else:
        descs = {th.val(m.group(3), ops[t]) for t, th in enumerate(threads)}
        assert len(descs) == 1, "a warpgroup's A descriptor is uniform"
        start, _, sbo = _desc(descs.pop())
        A = [[_smem_f16(smem, start + (r // 8) * sbo + (r % 8) * 128 + 2 * k) for k in range(16)] for r in range(64)]
    bds = {th.val(m.group(4), ops[t]) for t, th in enumerate(threads)}
    assert len(bds) == 1, "a warpgroup's B descriptor is uniform"
    start, lbo, sbo = _desc(bds.pop())
    if m.group(7) == "0":
        B = [[_smem_f16(smem, start + (c // 8) * sbo + (c % 8) * 128 + 2 * k) for c in range(n)] for k in range(16)]
    else:
        B = [[_smem_f16(smem, start + (c // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + 2 * (c % 64)) for c in range(n)]
             for k in range(16)]
    for t, th in enumerate(threads):
        w, lane = t // 32, t % 32
        for i, reg in enumerate(dregs):
            row, col = 16 * w + lane // 4 + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * (lane % 4) + (i & 1)
            acc = _f32(th.val(reg, ops[t])) + sum(A[row][k] * B[k][col] for k in range(16))
            th.setr(reg, _f32_bits(acc), 32, ops[t])


def run_warpgroup(text: str, ops: list[list[Any]], smem: bytearray) -> list[list[Any]]:
    """A branch-free block run by a warpgroup's 128 threads in lock step (`ops[t]`: thread t's
    operands): `wgmma.mma_async` computed by `wgmma_model` at once for all, the rest by `Thread`;
    the fence / commit / wait lines recorded.  Returns the operands after."""
    threads = [Thread(t, smem, bytearray()) for t in range(128)]
    ops = [list(o) for o in ops]
    lines = [ln.strip().rstrip(";") for ln in text.strip().split("\n")]
    for ln in lines:
        if not ln or ln in ("{", "}") or ln.startswith(".reg"):
            continue
        assert not ln.startswith(("@", "bra")) and not ln.endswith(":"), ("branch-free blocks only", ln)
        if ln.startswith("wgmma.mma_async"):
            wgmma_model(threads, ln, ops, smem)
            continue
        for t, th in enumerate(threads):
            op, _, rest = ln.partition(" ")
            args = [a.strip() for a in re.split(r",(?![^{]*})(?![^\[]*\])", rest)] if rest else []
            th.exec(op.split("."), args, ops[t])
    return ops
