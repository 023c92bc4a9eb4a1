"""Random tile-kernel modules for the agreement run (tools/agreement.py, tools/kernelgen.py).

    gen_tile_module(ch, outside=False) -> str

A module holds one `@az.tile_kernel` over 1-D or 2-D slices: loads of the program's own tile
and at computed offsets (masked, `other=`), element-wise arithmetic with scalars and
broadcasting, `math` functions, reductions (NumPy's `keepdims=False`, or `keepdims=True`, or
the dropped axis put back with `x[:, None]` / `tile.expand_dims`), `tile.arange` and causal
masks built from it, `.reshape`, offsets from a slice's `.shape` / `len()`, `tile.where`,
`.astype`, `.T`, `tile.zeros/full`, a K loop carrying a `tile.matmul` accumulator, scalar
`if`s, and one `tile.store` of the program's tile.  The generator tracks each tile's shape and element type,
so most modules are accepted; `outside=True` injects one construct tile kernels refuse (a
store outside the program's tile, a second store shape, a load of another program's output
tile, SIMT constructs, mismatched shapes, an oversized tile, a bad axis, a tile indexed or
passed to a helper, a matmul of f64 or with mismatched inner extents, a reshape to another
size, a tile sliced, `keepdims=` or `tile.arange(n)` not constant, a 3-D program id in a 2-D
kernel).  One accepted-side module in five is `gen_gemm_module`'s: the tensor-core GEMM form
or one step off it; one in five `kernelgen_tiles3d.gen_batched_module`'s: a 3-D (batched)
tile kernel.
"""

from __future__ import annotations

from typing import Any

__all__ = ["gen_gemm_module", "gen_tile_module", "TILE_OUTSIDE_KINDS"]

HEADER = (
    "import math\n"
    "import anodize as az\n"
    "from anodize import DisjointSlice, DisjointSlice2D, Slice, Slice2D, bf16, f16, f32, f64, i32, i64, thread, tile\n"
)
EXTENTS = (1, 2, 4, 8, 16, 32, 64)
IN_TYPES = ("f32", "f32", "f16", "bf16", "f64", "i32")
MATH1 = ("exp", "sqrt", "tanh", "fabs", "log", "sin", "rsqrt")
TILE_OUTSIDE_KINDS = (
    "store_offset", "store_shape", "load_output", "barrier", "simt_witness", "shape_mismatch", "huge",
    "bad_axis", "index_tile", "helper_tile", "matmul_f64", "matmul_inner", "shared", "atomic_param",
    "bad_reshape", "slice_tile", "keepdims_var", "arange_var", "pid_3d",
)


class _TileGen:
    def __init__(self, ch: Any) -> None:
        self.ch = ch
        self.lines: list[str] = []
        self.n = 0
        self.tiles: dict[str, tuple[tuple[int, ...], str]] = {}  # name -> (shape, element type)

    def fresh(self) -> str:
        self.n += 1
        return f"t{self.n}"

    def emit(self, ind: int, text: str) -> None:
        self.lines.append("    " * ind + text)

    def shape_text(self, shape: tuple[int, ...]) -> str:
        return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(str(d) for d in shape) + ")"

    def pick(self, pred: Any = None) -> str | None:
        names = [n for n, v in self.tiles.items() if pred is None or pred(v)]
        return self.ch.choice(names) if names else None

    def floats(self, shape: tuple[int, ...] | None = None) -> str | None:
        return self.pick(lambda v: v[1] in ("f32", "f64", "f16", "bf16") and (shape is None or v[0] == shape))

    def offset(self, src: str) -> str:
        """A load offset: the program's own tile, or computed from the program id and scalars."""
        ch = self.ch
        if ch.coin(0.4):
            return "pid"
        if self.rank == 1:
            base = ch.choice(("pid.get() * {e}", "k", "pid.get()", "0", "pid.get() * {e} - 3", "len({s}) - {e}"))
            return base.format(e=self.shape[0], s=src)
        r = ch.choice(("pid.row * {r}", "0", "k", "pid.row * {r} + 1", "pid.col", "{s}.shape[0] - {r}"))
        c = ch.choice(("pid.col * {c}", "0", "k", "pid.col * {c} - 2", "pid.row", "{s}.shape[1] // 2"))
        return f"({r.format(r=self.shape[0], s=src)}, {c.format(c=self.shape[1], s=src)})"

    def load(self) -> None:
        ch = self.ch
        src = ch.choice(self.inputs)
        name = self.fresh()
        shape = self.shape if ch.coin(0.7) else tuple(ch.choice(EXTENTS) for _ in self.shape)
        other = ch.choice(("", "", ", other=0.0", ", other=1", ", other=-math.inf")) if self.in_types[src] != "i32" else ""
        self.emit(1, f"{name} = tile.load({src}, {self.offset(src)}, {self.shape_text(shape)}{other})")
        self.tiles[name] = (shape, self.in_types[src])

    def broadcastable(self, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
        if len(shape) == 0:
            return [shape]
        if len(shape) == 1:
            return [shape, (1,), ()]
        return [shape, (shape[0], 1), (1, shape[1]), (1, 1), (shape[1],), ()]

    def elementwise(self) -> None:
        ch = self.ch
        x = self.pick()
        if x is None:
            return self.load()
        shape, t = self.tiles[x]
        name = self.fresh()
        k = ch.choice(("binop", "binop", "scalar", "math", "where", "astype", "reduce", "reduce", "transpose", "full",
                       "minmax", "arange", "reshape"))
        is_float = t in ("f32", "f64", "f16", "bf16")
        if k == "binop":
            y = self.pick(lambda v: v[1] == t and v[0] in self.broadcastable(shape))
            if y is None:
                y = x
            op = ch.choice(("+", "-", "*") + (("/",) if is_float else ("//", "%")))
            self.emit(1, f"{name} = {x} {op} {y}")
            self.tiles[name] = (shape, t)
        elif k == "scalar":
            lit = ch.choice(("s", "2.0", "0.5", "3")) if is_float else ch.choice(("3", "1", "k"))
            op = ch.choice(("+", "-", "*"))
            self.emit(1, f"{name} = {x} {op} {lit}")
            self.tiles[name] = (shape, t if not (lit == "s" and t in ("f16", "bf16")) else "f32")
            if lit == "k" and t == "i32":
                self.tiles[name] = (shape, "i64")
        elif k == "math" and is_float:
            fn = ch.choice(MATH1)
            self.emit(1, f"{name} = az.math.{fn}({x})")
            self.tiles[name] = (shape, t)
        elif k == "where":
            y = self.pick(lambda v: v[1] == t and v[0] == shape) or x
            zero = "0.0" if is_float else "0"
            self.emit(1, f"{name} = tile.where({x} > {y}, {x}, {zero})")
            self.tiles[name] = (shape, t)
        elif k == "astype":
            t2 = ch.choice(("f32", "f16", "f64", "i32", "bf16"))
            self.emit(1, f"{name} = {x}.astype({t2})")
            self.tiles[name] = (shape, t2)
        elif k == "reduce" and shape:
            fn = ch.choice(("sum", "max", "min"))
            how = ch.choice(("keep", "drop", "back"))  # keepdims=True, NumPy's default, or put back
            if len(shape) == 2 and ch.coin(0.8):
                axis = ch.integer(0, 1)
                kept = (shape[0], 1) if axis == 1 else (1, shape[1])
                call = f"tile.{fn}({x}, axis={axis}" + (", keepdims=True)" if how == "keep" else ")")
                back = f"{call}[:, None]" if axis == 1 else ch.choice((f"{call}[None, :]", f"tile.expand_dims({call}, 0)"))
                self.emit(1, f"{name} = {back if how == 'back' else call}")
                out = kept if how != "drop" else (shape[1 - axis],)
            else:
                keep = how == "keep"
                self.emit(1, f"{name} = tile.{fn}({x}" + (", keepdims=True)" if keep else ")"))
                out = (1,) * len(shape) if keep else ()
            acc = "f32" if fn == "sum" and t in ("f16", "bf16") else t
            self.tiles[name] = (out, acc)
        elif k == "arange" and shape:
            n = shape[-1]
            if len(shape) == 2 and ch.coin():  # a causal mask
                r = shape[0]
                zero = "0.0" if is_float else "0"
                self.emit(1, f"{name} = tile.where((pid.row * {r} + tile.arange({r}))[:, None] >= (pid.col * {n} + tile.arange({n}))[None, :], {x}, {zero})")
                self.tiles[name] = (shape, t)
            else:
                wide = ch.coin()  # i32 * 2 + an i64 scalar: an i64 tile
                self.emit(1, f"{name} = tile.arange({n})" + (" * 2 + k" if wide else ""))
                self.tiles[name] = ((n,), "i64" if wide else "i32")
        elif k == "reshape" and shape:
            size = 1
            for d in shape:
                size *= d
            choices = [(size,), (1, size)] + ([(shape[1], shape[0]), (shape[0] * shape[1] // 2, 2)] if len(shape) == 2 and size % 2 == 0 else [])
            new = ch.choice(choices)
            text = self.shape_text(new) if not (len(new) == 2 and ch.coin(0.3)) else f"({new[0]}, -1)"
            self.emit(1, f"{name} = {x}.reshape({text})")
            self.tiles[name] = (new, t)
        elif k == "transpose" and len(shape) == 2:
            self.emit(1, f"{name} = {x}.T")
            self.tiles[name] = ((shape[1], shape[0]), t)
        elif k == "full" and shape:
            v = ch.choice(("1.5", "0.0", "s")) if is_float else "2"
            fn = f"tile.full({self.shape_text(shape)}, {v}, {t})" if ch.coin() else f"tile.zeros({self.shape_text(shape)}, {t})"
            self.emit(1, f"{name} = {fn}")
            self.tiles[name] = (shape, t)
        else:
            fn = ch.choice(("min", "max"))
            self.emit(1, f"{name} = {fn}({x}, {x})" if ch.coin() else f"{name} = abs({x})")
            self.tiles[name] = (shape, t)

    def matmul_loop(self) -> None:
        ch = self.ch
        if self.rank != 2 or len(self.mm_inputs) < 1:
            return self.elementwise()
        a, b = ch.choice(self.mm_inputs), ch.choice(self.mm_inputs)
        if self.in_types[a] != self.in_types[b]:
            b = a
        m, n = self.shape
        kk = ch.choice((8, 16, 32))
        acc = self.fresh()
        self.emit(1, f"{acc} = tile.zeros(({m}, {n}), f32)")
        step = ch.choice(("k", str(kk)))
        self.emit(1, f"for kk in range(0, {step} * 4, {kk}):" if step == "k" else f"for kk in range(0, k, {kk}):")
        self.emit(2, f"{acc} = tile.matmul(tile.load({a}, (pid.row * {m}, kk), ({m}, {kk})), tile.load({b}, (kk, pid.col * {n}), ({kk}, {n})), {acc})")
        self.tiles[acc] = (self.shape, "f32")

    def scalar_if(self) -> None:
        x = self.floats()
        if x is None:
            return self.elementwise()
        shape, t = self.tiles[x]
        self.emit(1, f"if s > {self.ch.choice(('0.0', '1.0', 'k'))}:")
        self.emit(2, f"{x} = {x} * 2.0")

    def module(self) -> str:
        ch = self.ch
        self.rank = ch.choice((1, 2, 2))
        self.shape = (ch.choice(EXTENTS[2:]),) if self.rank == 1 else (ch.choice(EXTENTS), ch.choice(EXTENTS[1:]))
        sl, dsl = ("Slice", "DisjointSlice") if self.rank == 1 else ("Slice2D", "DisjointSlice2D")
        n_in = ch.integer(1, 3)
        self.in_types = {f"a{j}": ch.choice(IN_TYPES) for j in range(n_in)}
        self.inputs = list(self.in_types)
        self.mm_inputs = [a for a, t in self.in_types.items() if t in ("f16", "bf16")]
        self.out_t = ch.choice(("f32", "f32", "f16", "f64", "i32"))
        params = [f"{a}: {sl}[{t}]" for a, t in self.in_types.items()] + [f"c: {dsl}[{self.out_t}]", "s: f32", "k: i64"]
        self.lines = [HEADER]
        self.emit(0, "")
        self.emit(0, f"@az.launch_contract(domain={self.rank})")
        self.emit(0, f"@az.tile_kernel(num_warps={ch.choice((1, 2, 4, 8))})")
        self.emit(0, f"def kern({', '.join(params)}) -> None:")
        self.emit(1, f"pid = tile.program_id_{self.rank}d()")
        self.load()
        for _ in range(ch.integer(1, 6)):
            k = ch.choice(("load", "ew", "ew", "ew", "mm", "if"))
            {"load": self.load, "ew": self.elementwise, "mm": self.matmul_loop, "if": self.scalar_if}[k]()
        final = self.pick(lambda v: v[0] == self.shape)
        if final is None:  # broadcast a tile that broadcasts to the program's shape, else load one
            src = self.pick(lambda v: len(v[0]) == len(self.shape) and all(d in (1, e) for d, e in zip(v[0], self.shape)))
            final = self.fresh()
            if src is None:
                src = self.inputs[0]
                self.emit(1, f"{final} = tile.load({src}, pid, {self.shape_text(self.shape)})")
                self.tiles[final] = (self.shape, self.in_types[src])
            else:
                self.emit(1, f"{final} = {src} + tile.zeros({self.shape_text(self.shape)}, {self.tiles[src][1]})")
                self.tiles[final] = (self.shape, self.tiles[src][1])
        value = final if self.tiles[final][1] == self.out_t else f"{final}.astype({self.out_t})"
        self.emit(1, f"tile.store(c, pid, {value})")
        return "\n".join(self.lines) + "\n"


def _inject(src: str, ch: Any, kind: str) -> str:
    lines = src.splitlines()
    store = next(n for n, line in enumerate(lines) if line.strip().startswith("tile.store("))
    two_d = "program_id_2d" in src
    shape = "(8, 8)" if two_d else "(8,)"
    at = ch.integer(next(n for n, line in enumerate(lines) if "pid = tile.program_id" in line) + 1, store)
    stmts = {
        "store_offset": "tile.store(c, " + ("(pid.row, 0)" if two_d else "0") + ", tile.zeros(" + shape + ", f32))",
        "store_shape": "tile.store(c, pid, tile.zeros(" + ("(3, 5)" if two_d else "(3,)") + ", f32).astype(c.dtype))",
        "load_output": "tq = tile.load(c, " + ("(0, 0)" if two_d else "0") + ", " + shape + ")",
        "barrier": "az.syncthreads()",
        "simt_witness": "w = thread.index_1d()",
        "shape_mismatch": "tq = tile.zeros(" + ("(3, 5)" if two_d else "(3,)") + ", f32) + tile.zeros(" + ("(4, 7)" if two_d else "(5,)") + ", f32)",
        "huge": "tq = tile.zeros(" + ("(512, 512)" if two_d else "(131072,)") + ", f32)",
        "bad_axis": "tq = tile.sum(tile.zeros(" + shape + ", f32), axis=2)",
        "index_tile": "tq = tile.zeros(" + shape + ", f32)[0]",
        "helper_tile": "takes_tile(tile.zeros(" + shape + ", f32))",
        "matmul_f64": "tq = tile.matmul(tile.zeros((16, 16), f64), tile.zeros((16, 16), f64))",
        "matmul_inner": "tq = tile.matmul(tile.zeros((16, 8), f16), tile.zeros((16, 16), f16))",
        "shared": "sq = az.shared.array(32, f32)",
        "bad_reshape": "tq = tile.zeros(" + shape + ", f32).reshape((3, 7))",
        "slice_tile": "tq = tile.zeros(" + shape + ", f32)[1:]",
        "keepdims_var": "tq = tile.sum(tile.zeros(" + shape + ", f32), axis=0, keepdims=k > 0)",
        "arange_var": "tq = tile.arange(k)",
        "pid_3d": "pq = tile.program_id_3d()",
    }
    if kind == "atomic_param":
        k = next(n for n, line in enumerate(lines) if line.startswith("def kern("))
        lines[k] = lines[k].replace(") -> None:", ", h: az.AtomicSlice[i32]) -> None:")
    else:
        lines.insert(at, "    " + stmts[kind])
    if kind == "helper_tile":
        k = next(n for n, line in enumerate(lines) if line.startswith("@az.launch_contract"))
        lines[k:k] = ["@az.func", "def takes_tile(x: f32) -> None:", "    pass", "", ""]
    return "\n".join(lines) + "\n"


def gen_gemm_module(ch: Any) -> str:
    """A tile kernel of the GEMM class (the layout plan, language/tile_plan.py, decides what runs
    on tensor cores): tile shapes up to 256 x 256 (accumulators far past 48 KiB) and num_warps
    1-16, written as a user would -- A or B transposed (`.T` of a load), the K loop counted in
    tiles, a non-zero start, a K loop from 1, a fused epilogue (bias, `tile.where`, a scale), two
    matmuls a loop, the accumulator read after the store -- or one step outside the class (f32
    inputs, the accumulator reduced, a shape no routine takes), whose accumulator the on-chip
    bound then counts (so check and compile must agree on both)."""
    bm, bn = ch.choice((16, 32, 64, 128, 256)), ch.choice((16, 32, 64, 128, 256))
    bk = ch.choice((16, 32, 64, 8, 48))
    warps = ch.choice((1, 2, 4, 8, 8, 16))
    t = ch.choice(("f16", "f16", "bf16", "f32"))
    out = ch.choice(("f32", "f16", "bf16"))
    twist = ch.choice(("none", "none", "row", "start", "k_from_1", "read_after", "twice", "a_trans", "b_trans",
                       "k_tiles", "epilogue", "two", "reduced"))
    row = "pid.col" if twist == "row" else "pid.row"
    init = "tile.full(({bm}, {bn}), 1.0, f32)" if twist == "start" else "tile.zeros(({bm}, {bn}), f32)"
    lo = "1" if twist == "k_from_1" else "0"
    extra = ", bias: Slice2D[f32]" if twist == "epilogue" else ""
    lines = [HEADER, "", "@az.launch_contract(domain=2)", f"@az.tile_kernel(num_warps={warps})",
             f"def kern(a: Slice2D[{t}], b: Slice2D[{t}], c: DisjointSlice2D[{out}], k: i64{extra}) -> None:",
             "    pid = tile.program_id_2d()"]
    ka = f"tile.load(a, ({row} * {bm}, kk), ({bm}, {bk}))"
    kb = f"tile.load(b, (kk, pid.col * {bn}), ({bk}, {bn}))"
    if twist == "a_trans":
        ka = f"tile.load(a, (kk, {row} * {bm}), ({bk}, {bm})).T"
    if twist == "b_trans":
        kb = f"tile.load(b, (pid.col * {bn}, kk), ({bn}, {bk})).T"
    loop = f"range(k // {bk})" if twist == "k_tiles" else f"range({lo}, k, {bk})"
    if twist == "k_tiles":
        ka, kb = ka.replace("kk)", f"kk * {bk})").replace("(kk,", f"(kk * {bk},"), kb.replace("(kk,", f"(kk * {bk},")
    for n in range(2 if twist == "twice" else 1):
        lines += [f"    acc{n} = {init.format(bm=bm, bn=bn)}",
                  f"    for kk in {loop}:",
                  f"        acc{n} = tile.matmul({ka}, {kb}, acc{n})"]
        if twist == "two":
            lines.append(f"        acc{n} = tile.matmul({ka}, {kb}, acc{n})")
        v = f"acc{n}"
        if twist == "epilogue":
            lines.append(f"    y = acc{n} * 0.5 + tile.load(bias, (0, pid.col * {bn}), (1, {bn}))")
            v = "tile.where(y > 0.0, y, 0.0)"
        if twist == "reduced":
            v = f"(acc{n} - tile.max(acc{n}, axis=1))"
        value = v if out == "f32" else f"{v}.astype({out})"
        lines.append(f"    tile.store(c, pid, {value})")
    if twist == "read_after":
        lines.append(f"    tile.store(c, pid, (acc0 * 2.0).astype({out}))")
    return "\n".join(lines) + "\n"


def gen_tile_module(ch: Any, outside: bool = False) -> str:
    if not outside and ch.integer(0, 4) == 0:
        return gen_gemm_module(ch)
    if ch.integer(0, 4) == 0:
        from kernelgen_tiles3d import gen_batched_module

        return gen_batched_module(ch, outside)
    src = _TileGen(ch).module()
    if outside:
        src = _inject(src, ch, ch.choice(TILE_OUTSIDE_KINDS))
    return src


if __name__ == "__main__":
    import sys

    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from kernelgen import RandomChooser

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    print(gen_tile_module(RandomChooser(seed), outside=len(sys.argv) > 2))
