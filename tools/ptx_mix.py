"""ptx_mix: the instruction mix of a PTX kernel, per loop and whole, plus ptxas's resources.

A CPU-side yardstick for tile kernels when no GPU is at hand: the static count, per natural
loop of the control-flow graph (a back edge to a block that dominates it; nested loops are
reported on their own, each with every instruction inside it) and for the whole kernel, of the
instructions that decide a tile kernel's speed -- tensor-core instructions (wgmma, mma.sync),
ldmatrix, shared loads and stores by width, cp.async with its commit and wait groups, barriers,
ex2 and the f32 arithmetic around it, shuffles, global loads and stores by width -- and what
`ptxas -v` says (registers, spill bytes, shared bytes).  Counts are static (a block counts once
however often it runs).

    python3 tools/ptx_mix.py KERNEL.ptx [...]          # PTX files
    python3 tools/ptx_mix.py --attention [VARIANTS] [--dims 64,128] [--warps 4,8] [--modes ...]

`--attention` compiles tests/codegen/attention_variants.py's bodies for sm_90 (BM 128, BN 64)
as the recognised form (`form`, the example body only) and by operations (`ops`; `+p`:
ANODIZE_TILE_PREFETCH=1, `+h`: Q held in registers, tile_plan.A_HELD_LIMIT=64, `+f`:
ANODIZE_TILE_F16X2=1, `+r`: ANODIZE_TILE_A_RESIDENT=1, `+v`: ANODIZE_TILE_LOOP_VERSIONS=1, `+e`:
ANODIZE_FAST_EXP=1, f32 exp and exp2 as one ex2.approx.ftz each, `+g`: ANODIZE_TILE_ONE_WAIT=1, one
cp.async wait and barrier an iteration, `+x`: ANODIZE_TILE_LDSM_XOR=1, ldmatrix at a base plus an immediate, `+m`:
ANODIZE_TILE_MASK_SKIP=1, an affine tile.where mask skipped on tiles it does not cut, `+l`:
ANODIZE_TILE_LAZY_RESCALE=1, `acc * alpha` skipped when every alpha is 1.0, `+w`: ANODIZE_TILE_WHOLE_TILE=1,
a copy wholly inside its slice without per-chunk predicates, `+c`: ANODIZE_TILE_COPY_FIRST=1, the next
tiles issued before the first mma) and prints one
markdown table row per kernel and mode: the main loop's mix (the loop with the most
tensor-core instructions) and the kernel's resources.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_LABEL = re.compile(r"^\s*(\$?[A-Za-z_][\w$]*):")
_BRANCH = re.compile(r"^\s*(@!?%?\w+\s+)?bra(\.uni)?\s+(\$?[\w$]+)\s*;")
_OPCODE = re.compile(r"^\s*(?:@!?%?\w+\s+)?([a-z][\w.:]*)")
_WIDTHS = {"b8": 8, "u8": 8, "s8": 8, "b16": 16, "u16": 16, "s16": 16, "f16": 16, "bf16": 16, "b32": 32, "u32": 32,
           "s32": 32, "f32": 32, "f16x2": 32, "b64": 64, "u64": 64, "s64": 64, "f64": 64, "b128": 128}


def _width(op: str) -> int:
    """The bytes-moved width in bits of a load or store opcode (`.v4.b32` is 128)."""
    parts = op.split(".")
    vec = next((int(p[1:]) for p in parts if re.fullmatch(r"v[248]", p)), 1)
    elem = next((_WIDTHS[p] for p in reversed(parts) if p in _WIDTHS), 0)
    return vec * elem


def classify(op: str) -> str | None:
    """The mix category of one opcode, or None for the ones the mix leaves out (integer
    address arithmetic, moves, predicates, conversions other than to f16)."""
    if op.startswith("wgmma.mma_async"):
        return "wgmma"
    if op.startswith("wgmma."):
        return "wgmma." + op.split(".")[1]  # fence, commit_group, wait_group
    if op.startswith("mma.sync"):
        shape = next((p for p in op.split(".") if p.startswith("m") and "n" in p and "k" in p), "")
        return f"mma.{shape}"
    if op.startswith("ldmatrix"):
        return "ldmatrix" + (".trans" if ".trans" in op else "") + "." + next((p for p in op.split(".") if p in ("x1", "x2", "x4")), "")
    if op.startswith("cp.async.bulk"):
        return "cp.async.bulk"
    if op.startswith("cp.async.commit_group") or op.startswith("cp.async.wait_group") or op.startswith("cp.async.wait_all"):
        return op
    if op.startswith("cp.async"):
        return "cp.async"
    for space in ("shared", "global", "local"):
        for kind in ("ld", "st"):
            if op.startswith(f"{kind}.") and f".{space}" in op:
                return f"{kind}.{space}.{_width(op)}"
    if op.startswith("bar.") or op.startswith("barrier."):
        return "bar.sync"
    if op.startswith("shfl"):
        return "shfl"
    if op.startswith("ex2"):
        return "ex2"
    if op.startswith("lg2"):
        return "lg2"
    for fop in ("fma", "mul", "add", "sub", "max", "min", "div", "rcp", "neg"):
        if op.startswith(fop + ".") and op.endswith(".f32"):
            return f"{fop}.f32"
    if op.startswith("cvt.rn.f16x2.f32") or op.startswith("cvt.rn.bf16x2.f32"):
        return "cvt.f16x2"
    if op.startswith("cvt.rn.f16.f32") or op.startswith("cvt.rn.bf16.f32"):
        return "cvt.f16"
    return None


@dataclass
class Block:
    label: str
    ops: list[str] = field(default_factory=list)
    succ: list[str] = field(default_factory=list)


@dataclass
class Loop:
    header: str
    blocks: frozenset[str]
    depth: int
    mix: Counter[str]
    total: int  # every instruction of the loop (the mix's and the rest)


def _functions(ptx: str) -> list[list[str]]:
    """The bodies (lines) of the .entry and .func definitions of a PTX module."""
    out: list[list[str]] = []
    cur: list[str] | None = None
    depth = 0
    for line in ptx.splitlines():
        s = line.split("//")[0]
        if cur is None and re.match(r"^\s*(\.visible\s+|\.weak\s+)?\.(entry|func)\b", s):
            cur, depth = [], 0
        if cur is None:
            continue
        cur.append(s)
        depth += s.count("{") - s.count("}")
        if depth == 0 and "}" in s:
            out.append(cur)
            cur = None
    return out


def blocks(lines: list[str]) -> list[Block]:
    """Basic blocks of one function's lines, with their successors (fall-through and branches)."""
    out = [Block("<entry>")]
    for s in _statements(lines):
        if m := _LABEL.match(s):
            prev = out[-1]
            if prev.label.startswith("<fall") and not prev.ops:  # (an empty fall-through block: the label is it)
                out.pop()
                out[-1].succ[-1] = m.group(1)
                prev = out[-1]
                out.append(Block(m.group(1)))
                continue
            out.append(Block(m.group(1)))
            if not prev.ops or not _ends(prev):
                prev.succ.append(m.group(1))
            continue
        if (m2 := _OPCODE.match(s)) is None or s.strip().startswith("."):
            continue
        cur = out[-1]
        if cur.ops and _ends(cur):  # code after an unconditional branch with no label: unreachable
            out.append(Block(f"<dead{len(out)}>"))
            cur = out[-1]
        cur.ops.append(m2.group(1))
        if b := _BRANCH.match(s):
            cur.succ.append(b.group(3))
            cur.ops[-1] = "bra.uni" if b.group(1) is None else "bra.cond"
            if b.group(1) is not None:  # a conditional branch ends the block: the rest falls through
                out.append(Block(f"<fall{len(out)}>"))
                cur.succ.append(out[-1].label)
    return out


def _statements(lines: list[str]) -> list[str]:
    """One statement a string: an inline-asm line `{ .reg .pred p; setp...; @p ld...; }` is
    several (its scope braces dropped; a vector operand's braces stay)."""
    out = []
    for line in lines:
        for part in line.split(";"):
            st = part.strip()
            while st.startswith("{") and not st.startswith("{%"):
                st = st[1:].strip()
            while st.endswith("}") and "{" not in st:
                st = st[:-1].strip()
            if st:
                out.append(st + ";" if not st.endswith(":") else st)
    return out


def _ends(b: Block) -> bool:
    return b.ops[-1] in ("bra.uni", "ret", "exit")


def _dominators(bl: list[Block]) -> dict[str, set[str]]:
    names = [b.label for b in bl]
    pred: dict[str, list[str]] = {n: [] for n in names}
    for b in bl:
        for s in b.succ:
            if s in pred:
                pred[s].append(b.label)
    dom = {n: set(names) for n in names}
    dom[names[0]] = {names[0]}
    changed = True
    while changed:
        changed = False
        for n in names[1:]:
            ps = [dom[p] for p in pred[n]]
            new = (set.intersection(*ps) if ps else set()) | {n}
            if new != dom[n]:
                dom[n], changed = new, True
    return dom


def loops(bl: list[Block]) -> list[Loop]:
    """The natural loops of a function (one per header: back edges to it merged), outermost first."""
    dom = _dominators(bl)
    by = {b.label: b for b in bl}
    pred: dict[str, list[str]] = {b.label: [] for b in bl}
    for b in bl:
        for s in b.succ:
            if s in pred:
                pred[s].append(b.label)
    bodies: dict[str, set[str]] = {}
    for b in bl:
        for h in b.succ:
            if h in dom.get(b.label, ()):  # a back edge b -> h
                body = bodies.setdefault(h, {h})
                work = [b.label]
                while work:
                    n = work.pop()
                    if n not in body:
                        body.add(n)
                        work.extend(pred[n])
    out = []
    for h, body in bodies.items():
        depth = sum(1 for h2, b2 in bodies.items() if h2 != h and body < b2)
        out.append(Loop(h, frozenset(body), depth, mix_of(op for n in body for op in by[n].ops),
                        sum(len(by[n].ops) for n in body)))
    return sorted(out, key=lambda lp: (lp.depth, -sum(lp.mix.values())))


def mix_of(ops: object) -> Counter[str]:
    c: Counter[str] = Counter()
    for op in ops:  # type: ignore[attr-defined]
        if (k := classify(op)) is not None:
            c[k] += 1
    return c


@dataclass
class Report:
    kernel: Counter[str]
    loops: list[Loop]
    resources: dict[str, int]

    def main_loop(self) -> Loop | None:
        """The loop with the most tensor-core instructions (of equals the innermost, then the one
        with the fewest global loads and instructions: a loop versioned for aligned and
        unaligned copies counts as its cp.async copy)."""
        tc = [lp for lp in self.loops if _tensor(lp.mix)]
        return max(tc, key=lambda lp: (_tensor(lp.mix), lp.depth, -_global_loads(lp.mix), -lp.total)) if tc else None


def _global_loads(c: Counter[str]) -> int:
    return sum(n for k, n in c.items() if k.startswith("ld.global"))


def _tensor(c: Counter[str]) -> int:
    return sum(n for k, n in c.items() if k == "wgmma" or k.startswith("mma."))


def ptxas_resources(ptx: str, arch: str = "sm_90") -> dict[str, int]:
    """`ptxas -v`'s registers, spill stores/loads (bytes), shared bytes of the module's entries
    (the largest over entries); {} without ptxas."""
    if shutil.which("ptxas") is None:
        return {}
    m = re.search(r"^\s*\.target\s+(sm_\w+)", ptx, re.M)
    build = m.group(1) if m else arch
    r = subprocess.run(["ptxas", f"-arch={build}", "-v", "-o", "/dev/null", "-"], input=ptx, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    res = {"regs": 0, "spill_st": 0, "spill_ld": 0, "smem": 0}
    for line in r.stderr.splitlines():
        if g := re.search(r"Used (\d+) registers", line):
            res["regs"] = max(res["regs"], int(g.group(1)))
        if g := re.search(r"(\d+) bytes smem", line):
            res["smem"] = max(res["smem"], int(g.group(1)))
        if g := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            res["spill_st"] = max(res["spill_st"], int(g.group(1)))
            res["spill_ld"] = max(res["spill_ld"], int(g.group(2)))
    return res


def analyse(ptx: str, arch: str = "sm_90", resources: bool = True) -> Report:
    """The mix of every entry of `ptx` (whole and per loop) and its ptxas resources."""
    whole: Counter[str] = Counter()
    all_loops: list[Loop] = []
    for fn in _functions(ptx):
        bl = blocks(fn)
        for b in bl:
            whole.update(mix_of(b.ops))
        all_loops.extend(loops(bl))
    return Report(whole, all_loops, ptxas_resources(ptx, arch) if resources else {})


def describe(c: Counter[str]) -> str:
    """`name count` pairs, tensor-core and memory instructions first."""
    order = ("wgmma", "mma.", "ldmatrix", "cp.async", "ld.shared", "st.shared", "bar", "ld.global", "st.global", "ld.local",
             "st.local", "shfl", "ex2")
    keys = sorted(c, key=lambda k: (next((i for i, p in enumerate(order) if k.startswith(p)), len(order)), k))
    return ", ".join(f"{k} {c[k]}" for k in keys)


def print_report(name: str, rep: Report) -> None:
    print(f"== {name}")
    if rep.resources:
        r = rep.resources
        print(f"   ptxas: {r['regs']} registers, {r['spill_st']}/{r['spill_ld']} bytes spill stores/loads, {r['smem']} bytes smem")
    print(f"   kernel: {describe(rep.kernel)}")
    main = rep.main_loop()
    for lp in rep.loops:
        tag = " (main)" if lp is main else ""
        print(f"   loop {lp.header} depth {lp.depth}, {len(lp.blocks)} blocks{tag}: {describe(lp.mix)}")


# -- the attention table ----------------------------------------------------------------------

ROW_KEYS = ("wgmma", "mma.sync", "ldmatrix", "ld.shared", "st.shared", "cp.async", "commit", "wait", "bar.sync", "ex2", "fma.f32",
            "mul.f32", "cvt.f16x2", "cvt.f16", "shfl", "ld.global", "st.global", "all")


def row_counts(c: Counter[str]) -> dict[str, int]:
    """The table's columns of a mix: kinds summed over widths and shapes."""
    out = dict.fromkeys(ROW_KEYS, 0)
    for k, n in c.items():
        key = ("wgmma" if k == "wgmma" else "mma.sync" if k.startswith("mma.") else "ldmatrix" if k.startswith("ldmatrix")
               else "commit" if k.startswith("cp.async.commit") else "wait" if k.startswith("cp.async.wait")
               else "cp.async" if k.startswith("cp.async") else k if k in out
               else None if k.startswith("wgmma.") else next((p for p in ROW_KEYS if k.startswith(p + ".")), None))
        if key is not None:
            out[key] += n
    return out


# a mode's `+x` flags: the switch each turns on (`+h`: tile_plan.A_HELD_LIMIT = 64, Q held in registers)
MODE_SWITCHES = {"p": "ANODIZE_TILE_PREFETCH", "f": "ANODIZE_TILE_F16X2", "r": "ANODIZE_TILE_A_RESIDENT",
                 "v": "ANODIZE_TILE_LOOP_VERSIONS", "e": "ANODIZE_FAST_EXP",
                 "g": "ANODIZE_TILE_ONE_WAIT", "x": "ANODIZE_TILE_LDSM_XOR",
                 "m": "ANODIZE_TILE_MASK_SKIP", "l": "ANODIZE_TILE_LAZY_RESCALE", "w": "ANODIZE_TILE_WHOLE_TILE",
                 "c": "ANODIZE_TILE_COPY_FIRST"}


def _form_matches(k: object, warps: int) -> bool:
    from anodize.codegen.tile.attention import TileAttention
    from anodize.codegen.tile.entry import lower_tiles
    from anodize.language.ir_walk import walk

    low = lower_tiles(k, warps * 32, tensor_cores=True, wgmma=True, shared_limit=227 * 1024)
    return any(isinstance(n, TileAttention) for n in walk(low.body))


def attention_ptx(variant: str, warps: int, d: int, mode: str, bm: int = 128, bn: int = 64, unset: str = "") -> str | None:
    """The sm_90 PTX of an attention variant (tests/codegen/attention_variants.py) in `mode`
    (None for `form` where the recogniser does not take the kernel); `unset`: letters of
    MODE_SWITCHES left unset (their defaults) whatever `mode` says."""
    from dataclasses import replace

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root / "tests" / "codegen"))
    import attention_variants as av  # noqa: PLC0415

    from anodize.codegen.driver import compile_gpu
    from anodize.language import tile_plan
    from anodize.language.front import front_for_source

    src = av.source(variant, warps)
    front = front_for_source(src, f"<ptx-mix-{variant}-{warps}>")
    fdef = next(f for f in front.kernels() if f.name == "attention")
    t = front.typed(fdef, (("BM", bm), ("BN", bn), ("D", d)))
    assert t.ir is not None, [x.message for x in t.diagnostics]
    k = replace(t.ir, tile_warps=warps)
    names = ("ANODIZE_ATTN_FORM", *MODE_SWITCHES.values())
    saved = tuple(os.environ.get(n) for n in names)
    held = tile_plan.A_HELD_LIMIT
    flags = set(mode.split("+")[1:])
    try:
        os.environ["ANODIZE_ATTN_FORM"] = "" if mode == "form" else "off"
        for flag, name in MODE_SWITCHES.items():
            os.environ[name] = "1" if flag in flags else "0"  # ("0": off, also for a switch on by default)
            if flag in unset:
                os.environ.pop(name)
        tile_plan.A_HELD_LIMIT = 64 if "h" in flags else held if "h" in unset else 0  # (like "0" above)
        if mode == "form" and not _form_matches(k, warps):
            return None
        return compile_gpu(k, "sm_90", ptxas=False).ptx
    finally:
        for key, val in zip(names, saved):
            if val is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = val
        tile_plan.A_HELD_LIMIT = held


def attention_table(variants: list[str], dims: list[int], warps: list[int], modes: list[str], dump: str = "") -> None:
    head = ["kernel", "mode", *ROW_KEYS, "regs", "spill", "smem"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for v in variants:
        for d in dims:
            for w in warps:
                for mode in modes:
                    ptx = attention_ptx(v, w, d, mode) if mode != "form" or v == "example" else None
                    if ptx is None:
                        continue
                    if dump:
                        Path(dump, f"{v}_d{d}_w{w}_{mode}.ptx").write_text(ptx)
                    rep = analyse(ptx)
                    main = rep.main_loop()
                    cells = row_counts(main.mix if main else Counter())
                    cells["all"] = main.total if main else 0
                    r = rep.resources
                    print(f"| {v} d{d} w{w} | {mode} | " + " | ".join(str(cells[k]) for k in ROW_KEYS)
                          + f" | {r.get('regs', '-')} | {r.get('spill_st', '-')}/{r.get('spill_ld', '-')} | {r.get('smem', '-')} |",
                          flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ptx", nargs="*", help="PTX files")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--attention", nargs="?", const="example,exp2,causal", default=None, help="variants (comma-separated)")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--warps", default="4,8")
    ap.add_argument("--modes", default="form,ops,ops+p,ops+h,ops+p+h")
    ap.add_argument("--dump", default="", help="a folder to write each compiled PTX to")
    a = ap.parse_args(argv)
    for path in a.ptx:
        print_report(path, analyse(Path(path).read_text(), a.arch))
    if a.attention is not None:
        attention_table(a.attention.split(","), [int(x) for x in a.dims.split(",")], [int(x) for x in a.warps.split(",")],
                        a.modes.split(","), a.dump)


if __name__ == "__main__":
    main()
