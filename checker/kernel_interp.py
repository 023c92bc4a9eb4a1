"""The kernel model's abstract interpreter: `analyze` runs it over one function.

Its state is one record (`FlowState`, checker/kernel_state.py) shared by three collaborators:
`StatementFlow` (kernel_statements.py), `ExprFlow` (kernel_exprs.py) and `CallFlow` (here):
a call's callee (`resolve`: an intrinsic by its declaration in language/intrinsics.py, a
method of a value, a helper or kernel of the module) and its value, by the handler registered
for the callee's kind (`_HANDLERS`); helper summaries at their calls (`bind_args`, `substitute`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import ast

from anodize.language.intrinsics import INTRINSICS, METHODS
from anodize.language.vocab import TILE_MAKER

from .kernel_exprs import ExprFlow
from .kernel_state import FlowState
from .kernel_statements import StatementFlow
from .kernel_values import LOCAL_ARRAY, NONE, TID_X, TILE, UNIFORM, UNKNOWN, VARYING, WARP_UNIFORM, Callee, Env, FunctionInfo, Space, Val, _scalar, _scalar3
from .tile_model import tile_call

if TYPE_CHECKING:
    from .kernel_model import ModuleModel

# What a call's arguments are: may one differ between threads, between the lanes of a warp;
# is one a tile value.
Args = tuple[bool, bool, bool]
Handler = Callable[["CallFlow", ast.Call, Callee, Env, Args], Val]
# the value of a call, by its callee's kind (registered once each by `handles`); a kind with
# no handler (constructing a witness, a kernel or plain function, an unknown call) is UNKNOWN
_HANDLERS: dict[str, Handler] = {}
# an intrinsic's kinds whose callee is named by its tag's last part: the scalar a cast makes
# (`az.f32` and `float` as `f32`, `f64`), a builtin as written (`len`, `range`), `print`
_SHORT_NAMED = frozenset({"scalar", "builtin", "print", "breakpoint"})
_BY_VARIES = {"uniform": UNIFORM, "warp": WARP_UNIFORM, "lane": VARYING}
# a method's receivers (language/intrinsics.py `METHODS`), by the abstract kind of the value it
# is called on (a slice parameter may be an `AtomicSlice`), and the callee of a method none of
# them declares (a witness's is a forge when private; a shared array's is looked up by name)
_RECEIVERS = {
    "slice": ("atomic_slice", "slice"), "shared": ("shared_atomic",), "witness": ("witness",),
    "local_witness": ("local_witness",), "thread_tile": ("thread_tile",), "tile": ("tile",), "tile_id": ("tile_id",),
}  # fmt: skip
_UNDECLARED = {"slice": "method", "local_witness": "unknown", "thread_tile": "unknown", "tile": "tile_method", "tile_id": "tile_method"}


def handles(*kinds: str) -> Callable[[Handler], Handler]:
    def register(f: Handler) -> Handler:
        for k in kinds:
            assert k not in _HANDLERS, k
            _HANDLERS[k] = f
        return f

    return register


class CallFlow:
    """The calls of the kernel model's abstract interpreter."""

    def __init__(self, st: FlowState, exprs: ExprFlow):
        self.st = st
        self.m = st.m
        self.fn = st.fn
        self.exprs = exprs
        self.ev = exprs.ev

    def call(self, node: ast.Call, env: Env) -> Val:
        m = self.m
        m.ctx[node] = self.st.here()
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
        handler = _HANDLERS.get(callee.kind)
        return UNKNOWN if handler is None else handler(self, node, callee, env, (anytdep, anylane, anytile))

    def effects(self, node: ast.Call, callee: Callee) -> None:
        """An intrinsic's declared effects on its function: a barrier, a full-warp operation, a
        result that depends on the thread."""
        d = callee.decl
        assert d is not None
        if d.barrier:
            self.m.barriers[node] = self.st.here()
            self.fn.has_barrier = True
        if d.warp_wide:
            self.m.warp_ops[node] = self.st.here()
            if self.fn.warp_op is None:
                self.fn.warp_op = node
        if d.thread_dependent:
            self.fn.thread_dependent = True

    # intrinsics -------------------------------------------------------------------------------
    @handles("witness", "block_witness")
    def witness(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        d = callee.decl.witness  # type: ignore[union-attr]
        self.fn.witness_uses.append((node, d))
        if callee.decl.loop_only:  # type: ignore[union-attr]
            return UNKNOWN  # thread.grid_stride(): its loop binds the witnesses (StatementFlow.for_)
        return Val("witness", domain=d, tdep=True, origin=node, spaces=maker_spaces(callee.name))

    @handles("tile", "tile_method")
    def tile(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        return tile_call(self, node, callee, env)

    @handles("thread_tile")
    def thread_tile(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        """thread.tile_2d(TR, TC[, GR, GC]): each shape is one index space."""
        self.fn.witness_uses.append((node, callee.decl.witness))  # type: ignore[union-attr]
        return Val("thread_tile", domain=2, tdep=True, origin=node, spaces=tile_spaces(node, self.fn, self.m))

    @handles("raw")
    def raw_id(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        self.effects(node, callee)
        d = callee.decl
        assert d is not None
        if d.varies == "uniform":
            return UNIFORM
        if d.tag[1] == "tid_x":
            return TID_X
        return WARP_UNIFORM if d.tag[1] in self.st.warp_uniform_ids else VARYING

    @handles("warp", "collective", "block_leader")
    def by_effects(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        """A full-warp operation, a collective, the block leader's test: its declared effects,
        and a value as uniform as declared (a vote's, a reduction's)."""
        self.effects(node, callee)
        return _BY_VARIES[callee.decl.varies]  # type: ignore[union-attr]

    @handles("barrier")
    def barrier(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        self.effects(node, callee)
        return NONE

    @handles("fence")
    def fence(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        """`az.threadfence()`; `az.warp.sync()`, a full-warp operation (its declared effect)."""
        self.effects(node, callee)
        return UNKNOWN

    @handles("shared_array")
    def shared_array(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        return Val("shared", tdep=True, origin=node)

    @handles("local_array")
    def local_array(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        return LOCAL_ARRAY  # private to the thread, never shared state

    @handles("local_witness")
    def local_witness(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        """This thread's slot in its block (safe shared memory)."""
        self.effects(node, callee)
        return Val("local_witness", domain=int(callee.tag[1]), tdep=True, origin=node)

    @handles("unsafe", "print", "breakpoint")
    def no_value(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        return NONE

    @handles("scalar", "bitcast", "typecast", "typevar", "math", "builtin", "foreign")
    def arithmetic(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        """A cast, a math function, a builtin, a foreign device function (scalars in, a scalar
        out: language/foreign_decl.py): as its arguments (a tile's element-wise)."""
        anytdep, anylane, anytile = args
        if callee.name == "len":
            return UNIFORM
        if anytile:
            return TILE
        return _scalar3(anytdep, anylane)

    # methods of values ------------------------------------------------------------------------
    @handles("tile_at")
    def tile_at(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        """t.at(r, s): an Index2D of the tile's space."""
        base = self.m.values.get(node.func.value)  # type: ignore[attr-defined]
        spaces = base.spaces if base is not None and base.kind == "thread_tile" else frozenset()
        return Val("witness", domain=2, tdep=True, origin=node, spaces=spaces) if spaces else UNKNOWN

    @handles("tile_io", "unchecked_write")
    def writes_elements(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        """t.load(x, v, fill) / t.store(out, v): the tile's elements; `s.write_unchecked(i, v)`."""
        if callee.decl.mutates:  # type: ignore[union-attr]
            self.exprs.mark_write(node.func.value, env)  # type: ignore[attr-defined]
        return NONE

    @handles("atomic_op", "shared_atomic", "witness_get", "tile_id_get")
    def value_method(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        """A declared method of a value (`a.add(j, v)`, `w.get()`): its effects, the elements of
        its receiver it writes, and a value as uniform as declared."""
        d = callee.decl
        assert d is not None
        self.effects(node, callee)
        if d.mutates:
            self.exprs.mark_write(node.func.value, env)  # type: ignore[attr-defined]
        return _BY_VARIES[d.varies]

    # the module's own ---------------------------------------------------------------------------
    @handles("record")
    def record(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        anytdep, anylane, _ = args
        return Val("record", tdep=anytdep, wu=anytdep and not anylane)

    @handles("helper")
    def helper(self, node: ast.Call, callee: Callee, env: Env, args: Args) -> Val:
        h = callee.fn
        if h is None:
            return UNKNOWN
        m = self.m
        if not h.analyzed:
            analyze(m, h)
        self.fn.helper_calls.append((node, h))
        if h.has_barrier:
            self.fn.has_barrier = True
            m.helper_barrier_calls[node] = self.st.here()
        if h.warp_op is not None:
            m.helper_warp_calls[node] = self.st.here()
            if self.fn.warp_op is None:
                self.fn.warp_op = node
        if h.thread_dependent:
            self.fn.thread_dependent = True
        # slices passed to parameters the helper writes are written here
        for pname, arg in bind_args(h, node):
            if pname in h.writes:
                self.exprs.mark_write(arg, env)
        ret = h.returns or NONE
        if ret.kind == "witness":
            return Val("witness", domain=ret.domain, tdep=True, origin=node, spaces=substitute(ret.spaces, h, node, m.values))
        if ret.kind == "scalar":
            return _scalar(args[0] or h.thread_dependent or ret.tdep)
        if ret.kind == "record":  # a helper returning a record (typer_records.py): its fields read as the record
            return Val("record", tdep=args[0] or h.thread_dependent or ret.tdep)
        return ret if ret.kind == "none" else UNKNOWN

    # what a call calls --------------------------------------------------------------------------
    def resolve(self, node: ast.Call, env: Env) -> Callee:
        m = self.m
        f = node.func
        if isinstance(f, ast.Attribute) and not self.st.module_path(f.value):
            base = self.ev(f.value, env)
            receivers = _RECEIVERS.get(base.kind)
            if receivers is not None:  # a method of a value: by its declaration
                attr = f.attr
                for r in receivers:
                    decl = METHODS.get((r, attr))
                    if decl is not None:
                        return Callee(decl.kind, attr, decl=decl)
                if base.kind == "witness":
                    return Callee("forge" if attr.startswith("_") else "unknown", attr)
                undeclared = _UNDECLARED.get(base.kind)
                if undeclared is not None:
                    return Callee(undeclared, attr)
        q = m.qualname(f)
        if q is None:
            if isinstance(f, ast.Name) and f.id in self.m.functions:
                q = f.id
            else:
                return Callee("unknown", m.code(f))
        decl = INTRINSICS.get(q)
        if decl is None and q.startswith("az."):  # `az.Index1D.x(...)`: through a witness type, a forge too
            decl = INTRINSICS.get(".".join(q.split(".", 2)[:2]))
            if decl is not None and decl.kind not in ("witness_type", "block_witness_type"):
                decl = None
        if decl is not None:
            if not decl.callable:
                return Callee("unknown", m.code(f))
            return Callee(decl.kind, decl.tag[-1] if decl.kind in _SHORT_NAMED else q, decl=decl)
        if "." not in q:
            own = m.front.symbols.own(q).kind
            if own == "record":
                return Callee("record", q)  # `Rec(x=..., v=...)`: a record value (language/typer_records.py)
            if own == "typevar":
                return Callee("typevar", q)  # `T(x)`: a cast to the specialisation's scalar
            if own == "foreign":
                return Callee("foreign", q)  # a foreign device function (language/foreign_decl.py)
        target = m.functions.get(q)
        if target is not None:
            if target.kind == "func":
                return Callee("helper", q, target)
            return Callee("kernel" if target.kind == "kernel" else "function", q, target)
        return Callee("unknown", m.code(f))


class _Analyzer:
    """The interpreter over one function: its state and the collaborators that share it."""

    def __init__(self, model: ModuleModel, fn: FunctionInfo):
        self.st = FlowState(model, fn)
        self.exprs = ExprFlow(self.st)
        self.stmts = StatementFlow(self.st, self.exprs)
        self.calls = CallFlow(self.st, self.exprs)
        self.exprs.stmts = self.stmts
        self.exprs.calls = self.calls

    def run(self) -> None:
        try:
            self.stmts.run()
        finally:
            # the collaborators refer to each other: without these references no cycle is left
            # for the cyclic collector to find, per analysed function
            del self.exprs.calls, self.exprs.stmts


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
