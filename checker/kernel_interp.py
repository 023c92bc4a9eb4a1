"""The kernel model's abstract interpreter: its context (unsafe, thread- and lane-dependent
control), calls and what they resolve to (`resolve`: intrinsics by canonical name, helpers,
kernels), helper summaries at their calls (`bind_args`, `substitute`), and `analyze`.
Statements are in kernel_statements.py, expressions in kernel_exprs.py."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import ast

from anodize.language.vocab import ATOMIC_METHODS, BLOCK_COLLECTIVES, BLOCK_LEADER, BLOCK_WITNESS_MAKER, COLLECTIVES, DEBUG_BUILTINS, MATH_FUNCS, RAW_IDS, SCALARS, TILE_AT, TILE_IO, TILE_MAKER, WARP_OPS, WITNESS_MAKERS
from anodize.language.tile_vocab import TILE_FUNCS

from .kernel_exprs import ExprFlow
from .kernel_statements import StatementFlow, _Loop
from .kernel_values import LOCAL_ARRAY, NONE, THREAD_VARYING_IDS, TID_X, TILE, UNIFORM, UNKNOWN, VARYING, WARP_UNIFORM, Callee, Ctx, Env, FunctionInfo, Space, Val, _scalar, _scalar3

if TYPE_CHECKING:
    from .kernel_model import ModuleModel


class _Analyzer(StatementFlow, ExprFlow):
    def __init__(self, model: ModuleModel, fn: FunctionInfo):
        self.m = model
        self.fn = fn
        self.unsafe = False
        self.cond: list[ast.AST] = []  # thread-dependent conditions in force
        self.cond_lane: list[bool] = []  # for each: may it differ between the lanes of a warp
        self.loops: list[_Loop] = []
        self.div_return: ast.AST | None = None
        self.lane_return: ast.AST | None = None  # a lane-dependent return
        self.guards: list[tuple[str, str]] = []
        self._ctxs: dict[tuple[bool, ast.AST | None, ast.AST | None], Ctx] = {}
        block = fn.contract.block if fn.kind == "kernel" and fn.contract is not None else None
        dims = (tuple(block) + (1, 1, 1))[:3] if block else None
        # raw ids equal on the lanes of a warp under this kernel's literal block (warps are
        # 32 consecutive linear thread ids, x fastest)
        self.warp_uniform_ids: frozenset[str] = frozenset()
        self.warp_x = bool(dims and dims[0] % 32 == 0)  # `tid_x() // 32` is the warp's index
        if dims:
            self.warp_uniform_ids = frozenset(
                n for n, ok in (("tid_y", dims[0] % 32 == 0), ("tid_z", dims[0] * dims[1] % 32 == 0)) if ok
            )

    # context ------------------------------------------------------------------------------
    def divergent(self) -> ast.AST | None:
        if self.cond:
            return self.cond[-1]
        if self.div_return is not None:
            return self.div_return
        for lp in reversed(self.loops):
            if lp.divergent is not None:
                return lp.divergent
        return None

    def lane_divergent(self) -> ast.AST | None:
        for c, lane in zip(reversed(self.cond), reversed(self.cond_lane)):
            if lane:
                return c
        if self.lane_return is not None:
            return self.lane_return
        for lp in reversed(self.loops):
            if lp.lane_divergent is not None:
                return lp.lane_divergent
        return None

    def push_cond(self, node: ast.AST, lane: bool) -> None:
        self.cond.append(node)
        self.cond_lane.append(lane)

    def pop_cond(self) -> None:
        self.cond.pop()
        self.cond_lane.pop()

    def here(self) -> Ctx:
        # one `Ctx` per distinct context of this function (equal contexts are equal values)
        d = self.divergent()
        ld = self.lane_divergent() if d is not None else None
        key = (self.unsafe, d, ld)
        ctx = self._ctxs.get(key)
        if ctx is None:
            ctx = self._ctxs[key] = Ctx(self.fn, self.unsafe, d, ld)
        return ctx

    def call(self, node: ast.Call, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.here()
        callee = self.resolve(node, env)
        m.callees[node] = callee
        anytdep = anylane = anytile = False
        for a in node.args:
            av = self.ev(a.value if a.__class__ is ast.Starred else a, env)  # type: ignore[attr-defined]
            anytdep, anylane = av.tdep or anytdep, av.lane or anylane
            anytile = anytile or av.kind == "tile"
        for kw in node.keywords:
            av = self.ev(kw.value, env)
            anytdep, anylane = av.tdep or anytdep, av.lane or anylane
        k = callee.kind
        if k == "witness":
            d = 1 if callee.name == f"thread.{BLOCK_WITNESS_MAKER}" else WITNESS_MAKERS[callee.name.split(".")[-1]]
            self.fn.witness_uses.append((node, d))
            return Val("witness", domain=d, tdep=True, origin=node, spaces=maker_spaces(callee.name))
        if k == "grid_stride":
            self.fn.witness_uses.append((node, 1))
            return UNKNOWN
        if k in ("tile", "tile_method"):
            from .tile_model import tile_call

            return tile_call(self, node, callee, env)
        if k == "thread_tile":  # thread.tile_2d(TR, TC[, GR, GC]): each shape is one index space
            self.fn.witness_uses.append((node, 2))
            return Val("thread_tile", domain=2, tdep=True, origin=node, spaces=tile_spaces(node, self.fn, self.m))
        if k == "tile_at":  # t.at(r, s): an Index2D of the tile's space
            base = self.m.values.get(node.func.value)  # type: ignore[attr-defined]
            spaces = base.spaces if base is not None and base.kind == "thread_tile" else frozenset()
            return Val("witness", domain=2, tdep=True, origin=node, spaces=spaces) if spaces else UNKNOWN
        if k == "tile_io":  # t.load(x, v, fill) / t.store(out, v): the tile's elements, no value
            return NONE
        if k == "rawid":
            self.fn.thread_dependent = True
            short = callee.name.split(".")[-1]
            if short not in THREAD_VARYING_IDS:
                return UNIFORM
            if short == "tid_x":
                return TID_X
            return WARP_UNIFORM if short in self.warp_uniform_ids else VARYING
        if k == "warp":
            self.fn.thread_dependent = True
            self.m.warp_ops[node] = self.here()
            if self.fn.warp_op is None:
                self.fn.warp_op = node
            # a vote gives every lane of the warp the same answer; a shuffle gives each its own
            return WARP_UNIFORM if callee.name.split(".")[-1] in WARP_VOTES else VARYING
        if k == "shared":
            return Val("shared", tdep=True, origin=node)
        if k == "local":  # az.local.array: private to the thread, never shared state
            return LOCAL_ARRAY
        if k == "local_witness":  # this thread's slot in its block (safe shared memory)
            self.fn.thread_dependent = True
            return Val("local_witness", domain=2 if callee.name.endswith("_2d") else 1, tdep=True, origin=node)
        if k == "shared_atomic":
            self.fn.thread_dependent = True
            return VARYING
        if k == "collective":  # az.warp.reduce, az.block.reduce/scan/broadcast
            return self.collective(node, callee.name)
        if k == "leader":  # thread.is_block_leader(): true on one thread of the block
            self.fn.thread_dependent = True
            return VARYING
        if k == "barrier":
            m.barriers[node] = self.here()
            self.fn.has_barrier = True
            return NONE
        if k in ("unsafe", "print", "breakpoint"):
            return NONE
        if k == "record":
            return Val("record", tdep=anytdep, wu=anytdep and not anylane)
        if k in ("cast", "math", "builtin", "range"):
            if callee.name == "len":
                return UNIFORM
            if anytile:
                return TILE
            return _scalar3(anytdep, anylane)
        if k == "atomic_op":
            self.fn.thread_dependent = True
            if callee.name != "load":  # an atomic load reads
                self._mark_write(node.func.value, env)  # type: ignore[attr-defined]
            return VARYING
        if k == "write_unchecked":
            self._mark_write(node.func.value, env)  # type: ignore[attr-defined]
            return NONE
        if k == "witness_get":
            return VARYING
        if k == "helper" and callee.fn is not None:
            h = callee.fn
            if not h.analyzed:
                analyze(m, h)
            self.fn.helper_calls.append((node, h))
            if h.has_barrier:
                self.fn.has_barrier = True
                m.helper_barrier_calls[node] = self.here()
            if h.warp_op is not None:
                m.helper_warp_calls[node] = self.here()
                if self.fn.warp_op is None:
                    self.fn.warp_op = node
            if h.thread_dependent:
                self.fn.thread_dependent = True
            # slices passed to parameters the helper writes are written here
            for pname, arg in bind_args(h, node):
                if pname in h.writes:
                    self._mark_write(arg, env)
            ret = h.returns or NONE
            if ret.kind == "witness":
                return Val("witness", domain=ret.domain, tdep=True, origin=node, spaces=self.call_spaces(h, node, ret.spaces))
            if ret.kind == "scalar":
                return _scalar(anytdep or h.thread_dependent or ret.tdep)
            return ret if ret.kind == "none" else UNKNOWN
        return UNKNOWN

    def collective(self, node: ast.Call, name: str) -> Val:
        """A block collective is a barrier (every thread of the block must reach it) whose
        result is the same on every thread, but for a scan's; `warp.reduce` is a full-warp
        operation whose result is the same on the warp's lanes."""
        if name in BLOCK_COLLECTIVES:
            self.m.barriers[node] = self.here()
            self.fn.has_barrier = True
            if name == "block.scan":
                self.fn.thread_dependent = True
                return VARYING
            return UNIFORM
        self.fn.thread_dependent = True
        self.m.warp_ops[node] = self.here()
        if self.fn.warp_op is None:
            self.fn.warp_op = node
        return WARP_UNIFORM

    def call_spaces(self, h: FunctionInfo, node: ast.Call, spaces: frozenset[Space]) -> frozenset[Space]:
        """`spaces` of helper `h` as seen at its call `node` (see `substitute`)."""
        return substitute(spaces, h, node, self.m.values)

    def _module_path(self, node: ast.expr) -> bool:
        """Is `node` a name chain naming anodize, one of its modules or classes, or `math`?"""
        if isinstance(node, ast.Name):
            if node.id in self.fn.locals:
                return False
        elif not isinstance(node, ast.Attribute):
            return False
        q = self.m.qualname(node) or ""
        return q in ("anodize", "math") or q.startswith(("az.", "math."))

    def _mark_write(self, target: ast.expr, env: Env) -> None:
        v = self.m.values.get(target) or self.ev(target, env)
        if v.kind == "slice":
            self.fn.writes.update(v.params & set(self.fn.params))

    def resolve(self, node: ast.Call, env: Env) -> Callee:
        m = self.m
        f = node.func
        if isinstance(f, ast.Attribute) and not self._module_path(f.value):
            base = self.ev(f.value, env)
            attr = f.attr
            if base.kind in ("tile", "tile_id"):  # the Tile model (checker/tile_model.py)
                return Callee("tile_method", attr)
            if base.kind == "witness":
                if attr == "get":
                    return Callee("witness_get", attr)
                return Callee("forge" if attr.startswith("_") else "unknown", attr)
            if base.kind == "thread_tile":  # a per-thread tile: `t.at(r, s)`
                return Callee("tile_at" if attr == TILE_AT else "tile_io" if attr in TILE_IO else "unknown", attr)
            if base.kind == "local_witness":  # a block-local witness: `w.get()`
                return Callee("witness_get" if attr == "get" else "unknown", attr)
            if base.kind == "shared" and attr in ATOMIC_METHODS:  # a block-shared atomic array
                return Callee("shared_atomic", attr)
            if base.kind == "slice":
                if attr in ATOMIC_METHODS:
                    return Callee("atomic_op", attr)
                if attr == "write_unchecked":
                    return Callee("write_unchecked", attr)
                return Callee("method", attr)
        q = m.qualname(f)
        if q is None:
            if isinstance(f, ast.Name) and f.id in self.m.functions:
                q = f.id
            else:
                return Callee("unknown", m.code(f))
        short = q.split(".")[-1]
        if q in ("thread.index_1d", "thread.index_2d", "thread.index_3d", f"thread.{BLOCK_WITNESS_MAKER}"):
            return Callee("witness", q)
        if q == "thread.grid_stride":
            return Callee("grid_stride", q)
        if q.startswith("tile.") and short in TILE_FUNCS:
            return Callee("tile", q)
        if q == f"thread.{TILE_MAKER}":
            return Callee("thread_tile", q)
        if q.startswith("thread.") and short in RAW_IDS:
            return Callee("rawid", q)
        if q.startswith("warp.") and short in WARP_OPS:
            return Callee("warp", q)
        if q in ("shared.array", "shared.dynamic_array", "shared.atomic_array"):
            return Callee("shared", q)
        if q == "local.array":
            return Callee("local", q)
        if q in ("thread.index_in_block", "thread.index_in_block_2d"):
            return Callee("local_witness", q)
        if q in COLLECTIVES:
            return Callee("collective", q)
        if q == f"thread.{BLOCK_LEADER}":
            return Callee("leader", q)
        if q == "az.syncthreads":
            return Callee("barrier", q)
        if q == "az.threadfence":
            return Callee("fence", q)
        if q == "warp.sync":
            return Callee("warp_sync", q)
        if q == "az.unsafe":
            return Callee("unsafe", q)
        if q.startswith(("az.Index1D", "az.Index2D", "az.Index3D", "az.BlockWitness1D")):
            return Callee("forge", q)
        if q.startswith("az.") and short in SCALARS and q.count(".") == 1:
            return Callee("cast", short)
        if q.startswith("math.") and short in MATH_FUNCS:
            return Callee("math", q)
        if q in ("builtins.int", "builtins.float", "builtins.bool"):
            return Callee("cast", {"int": "i64", "float": "f64", "bool": "bool_"}[short])
        if q in ("builtins.abs", "builtins.min", "builtins.max", "builtins.len"):
            return Callee("builtin", short)
        if q == "builtins.range":
            return Callee("range", short)
        if q in ("typing.cast", "az.bitcast"):
            return Callee("cast", q)
        if "." not in q and m.front.symbols.own(q).kind == "record":
            return Callee("record", q)  # `Rec(x=..., v=...)`: a record value (language/typer_records.py)
        if "." not in q and m.front.symbols.own(q).kind == "typevar":
            return Callee("cast", q)  # `T(x)`: a cast to the specialisation's scalar
        if q.startswith("builtins.") and short in DEBUG_BUILTINS:
            return Callee(short, short)
        target = m.functions.get(q)
        if target is not None:
            if target.kind == "func":
                return Callee("helper", q, target)
            return Callee("kernel" if target.kind == "kernel" else "function", q, target)
        return Callee("unknown", m.code(f))


# warp operations whose result is the same on every lane (`reduce` once the vocabulary has it)
WARP_VOTES = {"ballot", "any", "all", "reduce"}


_MAKER_SPACES: dict[str, frozenset[Space]] = {}


def tile_spaces(node: ast.Call, fn: FunctionInfo | None = None, m: ModuleModel | None = None) -> frozenset[Space]:
    """The index space of `thread.tile_2d(TR, TC[, GR, GC])`: one per shape (the mapping is fixed
    by the shape and the launch), so two calls with one shape are one space.  An argument that
    is no literal and no module constant (an `az.Constant` parameter, a name the function binds)
    has its value only in its function: the space is that function's (the same text in a helper
    may name a module constant of another value, or nothing)."""
    parts: list[str] = []
    scoped = False
    for a in node.args:
        try:
            parts.append(repr(ast.literal_eval(a)))
            continue
        except ValueError:
            pass
        value = _module_constant(a, fn, m)
        if value is not None:
            parts.append(repr(value))
        else:
            parts.append(ast.unparse(a))
            scoped = True
    if len(parts) == 2:
        parts += ["1", "1"]
    where = frozenset([("function", fn.name)]) if scoped and fn is not None else frozenset()
    return frozenset([Space(TILE_MAKER, param=", ".join(parts), binding=where)])


def _module_constant(node: ast.expr, fn: FunctionInfo | None, m: ModuleModel | None) -> object:
    """The value of `node` when it is a module constant (arithmetic over them too) not shadowed
    by a name of `fn`, else None."""
    if m is None or fn is None:
        return None
    own = set(fn.params) | set(fn.locals)
    if any(isinstance(n, ast.Name) and n.id in own for n in ast.walk(node)):
        return None
    try:
        got = m.front.symbols.constant(node)
    except Exception:  # noqa: BLE001 - a form the constant folder does not take: no value
        return None
    return got[0] if got is not None else None


def maker_spaces(maker: str) -> frozenset[Space]:
    """The one index space of a witness maker (`thread.index_1d` -> `index_1d`), wherever it is called."""
    short = maker.split(".")[-1]
    hit = _MAKER_SPACES.get(short)
    if hit is None:
        hit = _MAKER_SPACES[short] = frozenset([Space(short)])
    return hit


def substitute(spaces: frozenset[Space], h: FunctionInfo, call: ast.Call, values: dict[ast.AST, Val]) -> frozenset[Space]:
    """A helper's witness spaces at one of its calls: a witness parameter becomes the spaces of
    its argument, and a grid-stride loop over slice parameters loops over the arguments' slices
    (the same loop over other slices is another mapping)."""
    if not spaces or all(sp.kind not in ("param", "grid_stride") for sp in spaces):
        return spaces
    args = dict(bind_args(h, call))
    out: set[Space] = set()
    for sp in spaces:
        if sp.kind == "param":
            a = args.get(sp.param)
            v = values.get(a) if a is not None else None
            if v is not None and v.kind == "witness":
                out |= v.spaces
        elif sp.kind == "grid_stride":

            def bound(name: str) -> list[str]:
                a = args.get(name)
                v = values.get(a) if a is not None else None
                if v is not None and v.kind == "slice" and v.params:
                    return sorted(v.params)
                return [f"{h.name}.{name}"]  # not a slice here: apart from every slice of the caller

            binding = frozenset((p, "|".join(bound(x))) for p, x in sp.binding)
            for name in sp.over or ("",):
                for b in bound(name) if name else [""]:
                    out.add(replace(sp, over=frozenset([b]) if b else frozenset(), binding=binding))
        else:
            out.add(sp)
    return frozenset(out)


def bind_args(fn: FunctionInfo, call: ast.Call) -> list[tuple[str, ast.expr]]:
    """(parameter name, argument expression) for each argument of a call to `fn`."""
    names = list(fn.params)
    out: list[tuple[str, ast.expr]] = []
    pos = 0
    for a in call.args:
        if isinstance(a, ast.Starred):
            continue
        if pos < len(names):
            out.append((names[pos], a))
        pos += 1
    for kw in call.keywords:
        if kw.arg is not None:
            out.append((kw.arg, kw.value))
    return out


def analyze(model: ModuleModel, fn: FunctionInfo) -> None:
    """Run the abstract interpreter over one kernel or helper (helpers on first use)."""
    if fn.analyzed or fn.in_progress:
        if fn.in_progress:  # recursion: assume the worst of the helper
            fn.has_barrier = True
            fn.thread_dependent = True
            fn.writes.update(p for p, i in fn.params.items() if i.kind == "slice")
        return
    fn.in_progress = True
    _Analyzer(model, fn).run()
    fn.in_progress = False
    fn.analyzed = True
