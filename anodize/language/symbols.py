"""What a name in a kernel refers to, decided once from the module's source.

    syms = ModuleSymbols(tree, names)
    syms.resolve(node)      # -> Symbol for a Name / attribute chain read in a kernel

Every front end asks this one table, so the checker's rules, the typer (and through
it codegen) and the runtime agree on what a name is:

- an *intrinsic*: a name of the kernel language (`thread.index_1d`, `az.f32`,
  `math.sqrt`, `builtins.len`, ...), whatever its import spelling;
- a *function* defined at module level: a kernel, an `@az.func` helper or a plain
  function (with its `def`);
- a *constant*: a module-level name bound exactly once to a literal number, a NumPy
  scalar of a literal (`np.float32(0.5)`), or arithmetic over those;
- a *table*: a module-level name bound exactly once to a tuple of number literals or
  `np.array([...], dtype=...)` of them (a read-only constant table);
- *rebound*: a module-level name bound more than once (assigned twice, imported and
  defined, declared `global` and assigned in a function, augmented, deleted) -- a
  kernel may not read or call it, since its value depends on when the module ran;
- *foreign*: a foreign device function declared with `az.foreign.device_function` (foreign_decl.py);
- *other*: anything else (an import from another module, a computed value).

Checking never imports user code: values come from the source alone.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator
from anodize.language.records import dataclass
from typing import Any, Literal

from .foreign_decl import DEVICE_FUNCTION, ForeignDecl, read_decl
from .module_bindings import _bound_value, _global_writes, _module_bindings
from .names import Names
from .intrinsics import INTRINSICS, canonical
from .vocab import SCALARS

__all__ = ["Symbol", "ModuleSymbols", "canonical", "intrinsic", "decorator_kind", "RESERVED_PREFIX"]

# identifiers the compiler uses for its own symbols; a user name may not start with it
RESERVED_PREFIX = "__az"

SymbolKind = Literal["intrinsic", "function", "constant", "table", "typevar", "record", "foreign", "rebound", "other", "missing"]
FunctionKind = Literal["kernel", "func", "plain"]


@dataclass(frozen=True)
class Table:
    """A read-only constant table: its element scalar and values (in source order)."""

    scalar: str  # a key of vocab.SCALARS
    values: tuple[int | float, ...]


@dataclass(frozen=True)
class Symbol:
    kind: SymbolKind
    name: str = ""  # the canonical name (intrinsics) or the module-level name
    tag: tuple[str, ...] = ()  # intrinsic: ("witness", "index_1d"), ("scalar", "f32"), ...
    fn: ast.FunctionDef | None = None  # function: its `def`
    fn_kind: FunctionKind = "plain"
    value: int | float | bool | None = None  # constant
    scalar: str | None = None  # constant: its scalar type when typed (`np.float32(0.5)`), None when weak
    table: Table | None = None
    where: tuple[ast.AST, ...] = ()  # rebound: the bindings
    constraints: tuple[str, ...] = ()  # typevar: the scalars it may be, in source order
    cls: ast.ClassDef | None = None  # record: its `@az.record` class (record_types.record_of)
    foreign: ForeignDecl | None = None  # foreign: a declared foreign device function (foreign_decl.py)


MISSING = Symbol("missing")
_OTHER = Symbol("other")


# ---- the intrinsic table (language/intrinsics.py declares each intrinsic once) -------------

_TABLE = {name: decl.tag for name, decl in INTRINSICS.items()}
_INTRINSIC_SYMBOLS: dict[str, Symbol] = {}  # canonical name -> its symbol, made on first use
# float constants of `math` and NumPy a kernel may read (weak f64 literals)
_FLOAT_CONSTANTS = {
    f"{mod}.{n}": getattr(math, n) for mod in ("math", "numpy") for n in ("pi", "e", "tau", "inf", "nan")
}
_NUMPY_SCALARS = {
    "float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64", "uint32": "u32", "uint64": "u64",
    "bool_": "bool_", "double": "f64", "single": "f32",
    "float16": "f16", "half": "f16", "int8": "i8", "int16": "i16", "uint8": "u8", "uint16": "u16",
}


def intrinsic(canonical_name: str) -> tuple[str, ...] | None:
    """The tag of a kernel-language name (`("scalar", "f32")` for `az.f32`), else None."""
    return _TABLE.get(canonical_name)


def decorator_kind(names: Names, deco: ast.expr) -> str | None:
    """`kernel`, `func` or `launch_contract` for an anodize decorator (called or not), else None."""
    target = deco.func if isinstance(deco, ast.Call) else deco
    for q in names.qualnames(target):
        tag = _TABLE.get(canonical(q))
        if tag is not None and tag[0] == "decorator":
            return tag[1]
    return None


# ---- the module's own names --------------------------------------------------------------


def _wrapped_arg(call: ast.Call) -> ast.expr | None:
    """The function a decorator called as a function wraps: `az.kernel(f)`, `az.kernel(*[f])`'s
    `f`, `az.kernel(fn=f)`; None for a call with no argument."""
    first = call.args[0] if call.args else (call.keywords[0].value if call.keywords else None)
    return first.value if isinstance(first, ast.Starred) else first


def wrapped_function(syms: ModuleSymbols, value: ast.expr) -> ast.Name | None:
    """The module function a module-level call chain of anodize decorators wraps, else None."""
    inner = value
    while isinstance(inner, ast.Call) and syms.decorator_kind(inner.func) is not None:
        arg = _wrapped_arg(inner)
        if arg is None:
            return None
        inner = arg
    return inner if inner is not value and isinstance(inner, ast.Name) else None


class ModuleSymbols:
    """The module-level symbol table of one parsed module (see the module docstring)."""

    def __init__(self, tree: ast.Module, names: Names, source: str | None = None):
        self.tree = tree
        self.names = names
        self.bindings: dict[str, list[ast.stmt]] = {}
        for name, stmt in _module_bindings(tree.body):
            self.bindings.setdefault(name, []).append(stmt)
        if source is None or "global" in source:
            for name, stmt in _global_writes(tree):
                self.bindings.setdefault(name, []).append(stmt)
        self._own: dict[str, Symbol] = {}
        # once per node: the typer asks again per specialisation and per helper call, and the
        # checker's rules ask for the same nodes
        self._resolved: dict[ast.expr, Symbol] = {}
        self._kinds: dict[ast.FunctionDef, FunctionKind] = {}  # `function_kind`, once per function
        self._deco_kinds: dict[ast.expr, str | None] = {}  # `decorator_kind`, once per node (the model and the typer ask per function)
        self.records: dict[ast.ClassDef, Any] = {}  # record_types.py `record_of`, once per class
        # (each cache is made here: asking for an instance's `__dict__` would turn its
        # attributes from 3.11's inline values into a dict, slower to read)
        # module-level names bound once to an anodize decorator: `gpu = az.kernel`,
        # `c64 = az.launch_contract(domain=1, block=64)` (then `@gpu`, `@c64`)
        self.decorator_aliases: dict[str, ast.expr] = {}
        for name, stmts in self.bindings.items():
            s = stmts[0]
            if len(stmts) == 1 and isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name):
                if decorator_kind(names, s.value.func if isinstance(s.value, ast.Call) else s.value) is not None:
                    self.decorator_aliases[name] = s.value
        # functions made kernels or helpers by calls at module level, with the decorators those
        # calls apply (outermost first): `k = az.kernel(f)`, `k = Kernel(f)`, `h = az.func(f)`,
        # `k = az.launch_contract(domain=1, block=64)(az.kernel(f))`
        self.wrapped: dict[str, FunctionKind] = {}
        self.wrapping: dict[str, list[ast.expr]] = {}
        for s in tree.body:
            if isinstance(s, ast.Assign) and isinstance(s.value, ast.Call):
                decos: list[ast.expr] = []
                value: ast.expr = s.value
                while isinstance(value, ast.Call) and self.decorator_kind(value.func) is not None:
                    arg = _wrapped_arg(value)
                    if arg is None:
                        break
                    decos.append(value.func)
                    value = arg
                if decos and isinstance(value, ast.Name):
                    self.wrapping.setdefault(value.id, []).extend(decos)
                    kinds = [self.decorator_kind(d) for d in decos if not isinstance(self.decorator_node(d), ast.Call)]
                    if "kernel" in kinds or "tile_kernel" in kinds:
                        self.wrapped[value.id] = "kernel"
                    elif "func" in kinds and value.id not in self.wrapped:
                        self.wrapped[value.id] = "func"

    # -- queries ---------------------------------------------------------------------------
    def resolve(self, node: ast.expr) -> Symbol:
        """What a name or attribute chain read in a kernel refers to (locals are the caller's)."""
        hit = self._resolved.get(node)
        if hit is None:
            hit = self._resolved[node] = self._resolve(node)
        return hit

    def _resolve(self, node: ast.expr) -> Symbol:
        quals = self.names.qualnames(node)
        if not quals:
            return MISSING
        if len(quals) > 1:
            short = quals[0].split(".")[0]
            own = [q for q in quals if "." not in q]
            return Symbol("rebound", own[0] if own else short, where=tuple(self.bindings.get(own[0] if own else short, ())))
        q = quals[0]
        if "." not in q:
            return self.own(q)
        head = q.split(".")[0]
        mine = self.bindings.get(head, ())
        if mine and "<locals>" not in q and not all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in mine):
            # the module's own `class thread:` (or `math = ...`): not the anodize namespace it spells
            return Symbol("rebound", head, where=tuple(mine)) if len(mine) > 1 else Symbol("other", q)
        c = canonical(q)
        hit = _INTRINSIC_SYMBOLS.get(c)
        if hit is not None:
            return hit
        tag = _TABLE.get(c)
        if tag is not None:
            hit = _INTRINSIC_SYMBOLS[c] = Symbol("intrinsic", c, tag)  # (immutable: one per intrinsic)
            return hit
        if c in _FLOAT_CONSTANTS:
            return Symbol("constant", c, value=_FLOAT_CONSTANTS[c])
        if "<locals>" in q:
            return MISSING
        head = q.split(".")[0]
        if head in self.bindings and len(self.bindings[head]) > 1:
            return Symbol("rebound", head, where=tuple(self.bindings[head]))
        return Symbol("other", c)

    def own(self, name: str) -> Symbol:
        """A module-level name of this module."""
        hit = self._own.get(name)
        if hit is None:
            hit = self._own[name] = self._own_symbol(name)
        return hit

    def _own_symbol(self, name: str) -> Symbol:
        stmts = self.bindings.get(name)
        if not stmts:
            return MISSING
        if len(stmts) > 1:
            return Symbol("rebound", name, where=tuple(stmts))
        s = stmts[0]
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return Symbol("function", name, fn=s, fn_kind=self.function_kind(s))  # type: ignore[arg-type]
        if isinstance(s, ast.ClassDef) and any(decorator_kind(self.names, d) == "record" for d in s.decorator_list):
            return Symbol("record", name, cls=s)
        value = _bound_value(s, name) if isinstance(s, (ast.Assign, ast.AnnAssign)) else None
        if value is not None:
            inner: ast.expr = value
            while isinstance(inner, ast.Call) and self.decorator_kind(inner.func) is not None and _wrapped_arg(inner) is not None:
                inner = _wrapped_arg(inner)  # type: ignore[assignment]
            if inner is not value and isinstance(inner, ast.Name):
                target = self.own(inner.id)
                if target.kind == "function" and target.fn is not None:
                    return Symbol("function", name, fn=target.fn, fn_kind=self.function_kind(target.fn))
            if isinstance(value, ast.Call) and any(canonical(q) == DEVICE_FUNCTION for q in self.names.qualnames(value.func)):
                return Symbol("foreign", name, foreign=read_decl(value, self._scalar_annotation))
            table = self._table(value)
            if table is not None:
                return Symbol("table", name, table=table)
            tv = self._typevar(name, value)
            if tv is not None:
                return tv
            const = self._constant(value)
            if const is not None:
                return Symbol("constant", name, value=const[0], scalar=const[1])
        return Symbol("other", name)

    def function_kind(self, fn: ast.FunctionDef) -> FunctionKind:
        hit = self._kinds.get(fn)
        if hit is None:
            hit = self._kinds[fn] = self._function_kind(fn)
        return hit

    def _function_kind(self, fn: ast.FunctionDef) -> FunctionKind:
        kind: FunctionKind = self.wrapped.get(fn.name, "plain") if self._top_level(fn) else "plain"
        for d in fn.decorator_list:
            k = self.decorator_kind(d)
            called = isinstance(self.decorator_node(d), ast.Call)
            if k == "kernel" and not called:
                return "kernel"
            if k == "tile_kernel":  # `@az.tile_kernel` or `@az.tile_kernel(num_warps=8)`
                return "kernel"
            if k == "func" and not called:
                kind = "func"
        return kind

    def _top_level(self, fn: ast.FunctionDef) -> bool:
        return fn in self.bindings.get(fn.name, ())  # type: ignore[comparison-overlap]

    def decorator_kind(self, deco: ast.expr) -> str | None:
        """`decorator_kind` through this module's aliases (`gpu = az.kernel` makes `@gpu` "kernel")."""
        cache = self._deco_kinds
        if deco in cache:
            return cache[deco]
        kind = cache[deco] = decorator_kind(self.names, self.decorator_node(deco))
        return kind

    def decorator_node(self, deco: ast.expr) -> ast.expr:
        """The decorator expression `deco` stands for: an alias's value (`@c64` is the call
        `az.launch_contract(domain=1, block=64)` it was bound to), else `deco` itself."""
        if isinstance(deco, ast.Name) and deco.id in self.decorator_aliases and decorator_kind(self.names, deco) is None:
            return self.decorator_aliases[deco.id]
        if isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and deco.func.id in self.decorator_aliases:
            alias = self.decorator_aliases[deco.func.id]
            if not isinstance(alias, ast.Call):  # `lc = az.launch_contract`, then `@lc(domain=1, block=64)`
                return ast.copy_location(ast.Call(func=alias, args=deco.args, keywords=deco.keywords), deco)
        return deco

    def decorators(self, fn: ast.FunctionDef) -> list[ast.expr]:
        """`fn`'s anodize decorators as written (aliases resolved by `decorator_node`), the
        ones module-level calls apply to it after them (`k = az.launch_contract(...)(az.kernel(fn))`)."""
        out = [d for d in fn.decorator_list if self.decorator_kind(d) is not None]
        if self._top_level(fn):
            out.extend(self.wrapping.get(fn.name, ()))
        return out

    def tile_decorator(self, fn: ast.FunctionDef) -> ast.expr | None:
        """The `@az.tile_kernel` decorator of a tile kernel (called or not), else None."""
        for d in fn.decorator_list:
            if self.decorator_kind(d) == "tile_kernel":
                return self.decorator_node(d)
        return None

    # -- values ----------------------------------------------------------------------------
    def constant(self, node: ast.expr, env: dict[str, int | float | bool] | None = None) -> tuple[int | float | bool, str | None] | None:
        """The compile-time value of `node` (a literal, a module constant, arithmetic over those)
        with its scalar type (None: a weak literal); None when it is not one.  `env`: a kernel's
        names with a value of their own (its `az.Constant` parameters), read before the module's."""
        if env:
            return self._with_env(node, env)
        return self._constant(node)

    def _with_env(self, node: ast.expr, env: dict[str, int | float | bool]) -> tuple[int | float | bool, str | None] | None:
        if isinstance(node, ast.Name) and node.id in env:
            return env[node.id], None
        if isinstance(node, ast.UnaryOp) and not isinstance(node.operand, ast.Constant):
            inner = self._with_env(node.operand, env)
            if inner is None:
                return None
            return self._constant(ast.UnaryOp(op=node.op, operand=ast.Constant(inner[0]))) if inner[1] is None else None
        if isinstance(node, ast.BinOp):
            a, b = self._with_env(node.left, env), self._with_env(node.right, env)
            if a is None or b is None or a[1] is not None or b[1] is not None:
                return None
            folded = fold(type(node.op), a[0], b[0])
            return None if folded is None else (folded, None)
        return self._constant(node)

    def _constant(self, node: ast.expr) -> tuple[int | float | bool, str | None] | None:
        """A literal number (weak: scalar None), a NumPy scalar of one, or arithmetic over those."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, (bool, int, float)):
                return v, None
            return None
        if isinstance(node, ast.Name):
            sym = self.own(node.id)
            return (sym.value, sym.scalar) if sym.kind == "constant" and sym.value is not None else None
        if isinstance(node, ast.Attribute):
            quals = self.names.qualnames(node)
            if len(quals) == 1 and canonical(quals[0]) in _FLOAT_CONSTANTS:
                return _FLOAT_CONSTANTS[canonical(quals[0])], None
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Invert)):
            inner = self._constant(node.operand)
            if inner is None or inner[1] is not None or isinstance(inner[0], bool):
                return None
            v = inner[0]
            if isinstance(node.op, ast.USub):
                return -v, None
            if isinstance(node.op, ast.Invert):
                return (~v, None) if isinstance(v, int) else None
            return v, None
        if isinstance(node, ast.BinOp):
            a, b = self._constant(node.left), self._constant(node.right)
            if a is None or b is None or a[1] is not None or b[1] is not None:
                return None
            folded = fold(type(node.op), a[0], b[0])
            return None if folded is None else (folded, None)
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
            scalar = self._scalar_ctor(node.func)
            inner = self._constant(node.args[0])
            if scalar is None or inner is None or inner[1] is not None:
                return None
            info = SCALARS[scalar]
            v = inner[0]
            if info.is_float:
                return float(v), scalar
            if info.kind == "b":
                return bool(v), scalar
            if isinstance(v, float):
                return None
            bits = info.bits
            if not (-(1 << (bits - 1)) <= v < (1 << bits)):
                return None  # NumPy refuses an out-of-range Python int
            v &= (1 << bits) - 1
            if info.signed and v >= 1 << (bits - 1):
                v -= 1 << bits
            return int(v), scalar
        return None

    def _typevar(self, name: str, node: ast.expr) -> Symbol | None:
        """`T = TypeVar("T", f32, f64)`: a type variable constrained to anodize scalars."""
        if not (isinstance(node, ast.Call) and node.args and not node.keywords):
            return None
        quals = self.names.qualnames(node.func)
        if len(quals) != 1 or quals[0] not in ("typing.TypeVar", "typing_extensions.TypeVar"):
            return None
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and first.value == name) or len(node.args) < 3:
            return None
        out = []
        for c in node.args[1:]:
            s = self.resolve(c) if isinstance(c, (ast.Name, ast.Attribute)) else MISSING
            if not (s.kind == "intrinsic" and s.tag[0] == "scalar" and s.name.startswith("az.")):
                return None
            out.append(s.tag[1])
        return Symbol("typevar", name, constraints=tuple(dict.fromkeys(out)))

    def _scalar_annotation(self, node: ast.expr) -> str | None:
        """The scalar type an annotation names (`f32`, `az.f32`), else None."""
        for q in self.names.qualnames(node):
            tag = _TABLE.get(canonical(q))
            if tag is not None and tag[0] == "scalar":
                return tag[1]
        return None

    def _scalar_ctor(self, func: ast.expr) -> str | None:
        quals = self.names.qualnames(func)
        if len(quals) != 1:
            return None
        c = canonical(quals[0])
        if c.startswith("numpy."):
            return _NUMPY_SCALARS.get(c[6:])
        tag = _TABLE.get(c)
        return tag[1] if tag is not None and tag[0] == "scalar" and c.startswith("az.") else None

    def _table(self, node: ast.expr) -> Table | None:
        """A tuple of number literals, or `np.array([...], dtype=...)` of them."""
        if isinstance(node, ast.Tuple):
            vals = [self._constant(e) for e in node.elts]
            if not vals or any(v is None or v[1] is not None or isinstance(v[0], bool) for v in vals):
                return None
            nums = tuple(v[0] for v in vals if v is not None)
            scalar = "f64" if any(isinstance(v, float) for v in nums) else "i64"
            return Table(scalar, tuple(float(v) for v in nums) if scalar == "f64" else nums)
        if not (isinstance(node, ast.Call) and node.args and len(node.args) == 1):
            return None
        quals = self.names.qualnames(node.func)
        if len(quals) != 1 or canonical(quals[0]) not in ("numpy.array", "numpy.asarray"):
            return None
        elems = node.args[0]
        if not isinstance(elems, (ast.List, ast.Tuple)) or not elems.elts:
            return None
        vals = [self._constant(e) for e in elems.elts]
        if any(v is None or v[1] is not None or isinstance(v[0], bool) for v in vals):
            return None
        nums = tuple(v[0] for v in vals if v is not None)
        scalar = "f64" if any(isinstance(v, float) for v in nums) else "i64"
        for kw in node.keywords:
            if kw.arg != "dtype":
                return None
            if isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str):
                named = _NUMPY_SCALARS.get(kw.value.value)
            else:
                named = self._scalar_ctor(kw.value)
            if named is None or named == "bool_":
                return None
            scalar = named
        info = SCALARS[scalar]
        if info.is_float:
            return Table(scalar, tuple(float(v) for v in nums))
        if any(isinstance(v, float) for v in nums):
            return None
        lo, hi = (-(1 << (info.bits - 1)), 1 << (info.bits - 1)) if info.signed else (0, 1 << info.bits)
        if not all(lo <= v < hi for v in nums):
            return None
        return Table(scalar, tuple(int(v) for v in nums))


def fold(op: type, a: int | float | bool, b: int | float | bool) -> int | float | bool | None:
    """Constant-fold two weak literals with Python's semantics; None if it cannot."""
    try:
        if op is ast.Add:
            return a + b
        if op is ast.Sub:
            return a - b
        if op is ast.Mult:
            return a * b
        if op is ast.Div:
            return a / b
        if op is ast.FloorDiv:
            return a // b
        if op is ast.Mod:
            return a % b
        if op is ast.Pow:
            return None if (isinstance(b, int) and b < 0) or abs(b) > 4096 else a**b
        if op is ast.LShift:
            return a << b if isinstance(a, int) and isinstance(b, int) and 0 <= b < 64 else None
        if op is ast.RShift:
            return a >> b if isinstance(a, int) and isinstance(b, int) and b >= 0 else None
        if op is ast.BitAnd:
            return a & b  # type: ignore[operator]
        if op is ast.BitOr:
            return a | b  # type: ignore[operator]
        if op is ast.BitXor:
            return a ^ b  # type: ignore[operator]
    except (ArithmeticError, TypeError, ValueError):
        return None
    return None
