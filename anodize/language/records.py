"""`dataclass`, as the standard library's, made in a fraction of the time (a cold compile's start-up).

    from anodize.language.records import dataclass

    @dataclass(frozen=True)
    class Const: ...

The typed IR and the tables around it are ~130 dataclasses that every first compile of a process
imports.  On Python 3.11 and 3.12 `dataclasses.dataclass` compiles the source of each generated
method with its own `exec` (six for a frozen class: `__init__`, `__repr__`, `__eq__`,
`__hash__`, `__setattr__`, `__delattr__`) and builds a docstring from `inspect.signature`:
about 0.6 ms a class, ~80 ms of the GEMM's cold compile.  Here the standard library still
collects the fields (so `fields`, `replace`, `asdict`, `is_dataclass`, `__match_args__` and
`__dataclass_params__` are its own), with method generation switched off; `__init__` is then
made from the same text the standard library would write (on its first use; compiled once
per shape of fields, its names then renamed in the code object; a frozen class's calls
`object.__setattr__` from a cell, not through `object` each field), and `__repr__`,
`__eq__`, `__hash__` and the frozen `__setattr__` / `__delattr__` are closures over the field
names, with the standard library's semantics (tests/language/test_records.py compares the two).

Anything outside the common shape -- `order`, `unsafe_hash`, `slots`, `kw_only`, a dataclass
base, a `__post_init__`, `ClassVar` / `InitVar` / `KW_ONLY` annotations, a field with
`init=False` or `kw_only` -- and any Python other than 3.11 / 3.12 (3.13 batches its own
`exec`s) goes to `dataclasses.dataclass` unchanged.
"""

from __future__ import annotations

import dataclasses as _dc
import inspect
import sys
from _thread import get_ident
from operator import attrgetter
from types import CellType, CodeType, FunctionType
from typing import TYPE_CHECKING, Any

__all__ = ["dataclass"]

_FAST = sys.version_info[:2] in ((3, 11), (3, 12))
_PLAIN_KEYS = frozenset(("init", "repr", "eq", "frozen"))
_MISSING = _dc.MISSING


def _dataclass(cls: Any = None, /, **kw: Any) -> Any:
    """`dataclasses.dataclass(cls, **kw)`, with the same result, made faster (module docstring)."""

    def wrap(c: Any) -> Any:
        if not _FAST or not _PLAIN_KEYS.issuperset(kw) or not _plain_class(c):
            return _dc.dataclass(c, **kw)
        return _make(c, kw.get("init", True), kw.get("repr", True), kw.get("eq", True), kw.get("frozen", False))

    return wrap if cls is None else wrap(cls)


if TYPE_CHECKING:  # type checkers see the standard library's decorator (what this one makes)
    from dataclasses import dataclass
else:
    dataclass = _dataclass


def _plain_class(cls: Any) -> bool:
    """No dataclass base, no `__post_init__`, no pseudo-field annotation, no field object
    the fast path does not handle (init=False, kw_only)."""
    if any(hasattr(b, "__dataclass_fields__") for b in cls.__mro__[1:]) or hasattr(cls, "__post_init__"):
        return False
    d = cls.__dict__
    for name, ann in d.get("__annotations__", {}).items():
        text = ann if isinstance(ann, str) else repr(ann)
        if "ClassVar" in text or "InitVar" in text or "KW_ONLY" in text:
            return False
        v = d.get(name)
        if isinstance(v, _dc.Field) and (not v.init or v.kw_only is True):
            return False
    return True


def _make(cls: Any, init: bool, repr_: bool, eq: bool, frozen: bool) -> Any:
    d = cls.__dict__
    own_doc = d.get("__doc__")
    class_hash = d.get("__hash__", _MISSING)
    explicit_hash = not (class_hash is _MISSING or (class_hash is None and "__eq__" in d))
    if not own_doc:
        cls.__doc__ = "-"  # the standard library's docstring comes from the __init__ made below
    # the standard library collects the fields and sets the defaults, params and __match_args__
    cls = _dc.dataclass(cls, init=False, repr=False, eq=False, frozen=False)
    params = cls.__dataclass_params__
    params.init, params.repr, params.eq, params.frozen = init, repr_, eq, frozen
    fields = [f for f in cls.__dataclass_fields__.values() if f._field_type is _dc._FIELD]  # type: ignore[attr-defined]
    _check_defaults(fields)
    made_init = init and "__init__" not in d
    if made_init:
        cls.__init__ = _LazyInit(cls, fields, frozen)
    if repr_:
        _set_new(cls, "__repr__", _repr_fn(tuple(f.name for f in fields if f.repr)))
    if eq:
        _set_new(cls, "__eq__", _eq_fn(_getter([f.name for f in fields if f.compare])))
    if frozen:
        for fn in _frozen_fns(cls, frozenset(f.name for f in fields)):
            if _set_new(cls, fn.__name__, fn):
                raise TypeError(f"Cannot overwrite attribute {fn.__name__} in class {cls.__name__}")
    if eq and not explicit_hash:  # the standard library's hash table, without unsafe_hash
        if frozen:
            fn = _hash_fn(_getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)]))
            fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
            cls.__hash__ = fn
        else:
            cls.__hash__ = None
    if not own_doc:
        cls.__doc__ = cls.__name__ + _text_signature(fields) if made_init else _std_doc(cls)
    return cls


def _set_new(cls: Any, name: str, value: Any) -> bool:
    """`dataclasses._set_new_attribute`: never overwrites; True when `name` was there."""
    if name in cls.__dict__:
        return True
    value.__qualname__ = f"{cls.__qualname__}.{value.__name__}"
    setattr(cls, name, value)
    return False


def _getter(names: list[str]) -> Any:
    """obj -> the tuple of its `names` (a 1-tuple for one name, () for none)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = names[0]
        return lambda obj: (getattr(obj, one),)
    return attrgetter(*names)


def _check_defaults(fields: list[Any]) -> None:
    seen_default = False
    for f in fields:
        if not (f.default is _MISSING and f.default_factory is _MISSING):
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


class _LazyInit:
    """A class's `__init__` until its first use: the first lookup (an instance made, or
    `inspect.signature`) compiles it and puts the function in the class in its place.  Many of
    a module's classes are never instantiated in a process; none pays for a compile it does
    not use."""

    __slots__ = ("cls", "fields", "frozen")

    def __init__(self, cls: Any, fields: list[Any], frozen: bool):
        self.cls, self.fields, self.frozen = cls, fields, frozen

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        fn = _init_fn(self.cls, self.fields, self.frozen)
        fn.__qualname__ = f"{self.cls.__qualname__}.__init__"
        if self.cls.__dict__.get("__init__") is self:
            type.__setattr__(self.cls, "__init__", fn)
        return fn if obj is None else fn.__get__(obj, owner)


_TEMPLATES: dict[tuple[bool, str, tuple[bool, ...]], Any] = {}
_SET = "_az_setattr_"  # the cell of a frozen `__init__`'s `object.__setattr__`
_RESERVED = ("_az", "_dflt_", "__dataclass", "_HAS_DEFAULT_FACTORY", "__setattr__")
# the names the standard library's text gives a field's default factory and the factory marker
_DFLT, _FACTORY = ("__dataclass_dflt_{}__", "__dataclass_HAS_DEFAULT_FACTORY__") if sys.version_info >= (3, 12) else \
    ("_dflt_{}", "_HAS_DEFAULT_FACTORY")


def _init_fn(cls: Any, fields: list[Any], frozen: bool) -> Any:
    """`__init__` for these fields: the standard library's text (below), compiled once per shape
    (how many fields, which have a default factory, frozen or not) with placeholder names that
    each class's code object then renames; anything unusual compiles the text itself."""
    if any(f.name.startswith(_RESERVED) for f in fields):
        return _init_fn_exec(cls, fields, frozen)
    self_name = "__dataclass_self__" if any(f.name == "self" for f in fields) else "self"
    kinds = tuple(f.default_factory is not _MISSING for f in fields)
    key = (frozen, self_name, kinds)
    tpl = _TEMPLATES.get(key)
    if tpl is None:
        tpl = _TEMPLATES[key] = _template(frozen, self_name, kinds)
    rename = {f"_az{i}_": f.name for i, f in enumerate(fields)}
    rename.update({_DFLT.format(f"_az{i}_"): _DFLT.format(f.name) for i, f in enumerate(fields)})
    code = tpl.replace(
        co_varnames=tuple(rename.get(n, n) for n in tpl.co_varnames),
        co_names=tuple(rename.get(n, n) for n in tpl.co_names),
        co_freevars=tuple(rename.get(n, n) for n in tpl.co_freevars),
        co_consts=tuple(rename.get(c, c) if type(c) is str else c for c in tpl.co_consts),
    )
    cells = {"__dataclass_builtins_object__": object, _SET: object.__setattr__, _FACTORY: _dc._HAS_DEFAULT_FACTORY}  # type: ignore[attr-defined]
    cells.update({_DFLT.format(f"_az{i}_"): f.default_factory for i, f in enumerate(fields) if kinds[i]})
    defaults = tuple(_dc._HAS_DEFAULT_FACTORY if k else f.default  # type: ignore[attr-defined]
                     for f, k in zip(fields, kinds) if k or f.default is not _MISSING)
    mod = sys.modules.get(cls.__module__)
    fn = FunctionType(code, mod.__dict__ if mod is not None else {}, "__init__", defaults or None,
                      tuple(CellType(cells[n]) for n in tpl.co_freevars))
    fn.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return fn


def _template(frozen: bool, self_name: str, kinds: tuple[bool, ...]) -> Any:
    """The code object of `__init__` for fields `_az0_`, `_az1_`, ... (`kinds[i]`: a factory)."""
    body = []
    for i, factory in enumerate(kinds):
        name = f"_az{i}_"
        value = f"{_DFLT.format(name)}() if {name} is {_FACTORY} else {name}" if factory else name
        # a frozen class's `object.__setattr__` comes from a cell of its own (the standard
        # library's text looks it up on `object` once a field: a sixth of the cost of a
        # frozen instance, of which the typer and the checker make ~50,000 a 10,000-line check)
        body.append(f"  {_SET}({self_name},{name!r},{value})" if frozen
                    else f"  {self_name}.{name}={value}")
    outer = ["__dataclass_builtins_object__", _SET, _FACTORY] + [_DFLT.format(f"_az{i}_") for i, k in enumerate(kinds) if k]
    params = ",".join([self_name] + [f"_az{i}_" for i in range(len(kinds))])
    text = (f"def __create_fn__({', '.join(outer)}):\n def __init__({params}):\n"
            + ("\n".join(body) or "  pass") + "\n return __init__")
    module = compile(text, "<string>", "exec", dont_inherit=True)
    create = next(c for c in module.co_consts if isinstance(c, CodeType))
    return next(c for c in create.co_consts if isinstance(c, CodeType))


def _init_fn_exec(cls: Any, fields: list[Any], frozen: bool) -> Any:
    """`__init__`, from the text `dataclasses._init_fn` writes for these fields (one exec)."""
    self_name = "__dataclass_self__" if any(f.name == "self" for f in fields) else "self"
    loc: dict[str, Any] = {f"_type_{f.name}": f.type for f in fields}
    loc.update({"MISSING": _MISSING, _FACTORY: _dc._HAS_DEFAULT_FACTORY,  # type: ignore[attr-defined]
                "__dataclass_builtins_object__": object, "_return_type": None})
    params, body = [self_name], []
    for f in fields:
        value = f.name
        dflt = _DFLT.format(f.name)
        if f.default_factory is not _MISSING:
            loc[dflt] = f.default_factory
            value = f"{dflt}() if {f.name} is {_FACTORY} else {f.name}"
            params.append(f"{f.name}:_type_{f.name}={_FACTORY}")
        elif f.default is not _MISSING:
            loc[dflt] = f.default
            params.append(f"{f.name}:_type_{f.name}={dflt}")
        else:
            params.append(f"{f.name}:_type_{f.name}")
        body.append(f"  __dataclass_builtins_object__.__setattr__({self_name},{f.name!r},{value})" if frozen
                    else f"  {self_name}.{f.name}={value}")
    text = (f"def __create_fn__({', '.join(loc)}):\n def __init__({','.join(params)})->_return_type:\n"
            + ("\n".join(body) or "  pass") + "\n return __init__")
    mod = sys.modules.get(cls.__module__)
    ns: dict[str, Any] = {}
    # dont_inherit: this module's `from __future__ import annotations` must not turn the
    # annotations into strings ("_type_x") as the standard library's text would not
    code = compile(text, "<string>", "exec", dont_inherit=True)
    exec(code, mod.__dict__ if mod is not None else {}, ns)  # noqa: S102 - the standard library's own scheme
    return ns["__create_fn__"](**loc)


def _repr_fn(names: tuple[str, ...]) -> Any:
    running: set[tuple[int, int]] = set()

    def __repr__(self: Any) -> str:
        key = (id(self), get_ident())  # `dataclasses._recursive_repr`
        if key in running:
            return "..."
        running.add(key)
        try:
            return f"{self.__class__.__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"
        finally:
            running.discard(key)

    return __repr__


def _eq_fn(get: Any) -> Any:
    def __eq__(self: Any, other: Any) -> Any:
        if other is self:  # (what the tuples' comparison finds: it tests each item's identity first)
            return True
        if other.__class__ is self.__class__:
            return get(self) == get(other)
        return NotImplemented

    return __eq__


def _hash_fn(get: Any) -> Any:
    def __hash__(self: Any) -> int:
        return hash(get(self))

    return __hash__


def _frozen_fns(cls: Any, names: frozenset[str]) -> tuple[Any, Any]:
    error = _dc.FrozenInstanceError

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise error(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise error(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _text_signature(fields: list[Any]) -> str:
    """`str(inspect.signature(cls))` of the `__init__` made here, as the standard library's
    docstring writes it (annotations as `inspect` formats them, `<factory>` for a factory)."""
    parts = []
    for f in fields:
        ann = inspect.formatannotation(f.type)
        if f.default_factory is not _MISSING:
            parts.append(f"{f.name}: {ann} = <factory>")
        elif f.default is not _MISSING:
            parts.append(f"{f.name}: {ann} = {f.default!r}")
        else:
            parts.append(f"{f.name}: {ann}")
    return "(" + ", ".join(parts) + ")"


def _std_doc(cls: Any) -> str:
    try:
        return f"{cls.__name__}" + str(inspect.signature(cls)).replace(" -> None", "")
    except (TypeError, ValueError):
        return f"{cls.__name__}"
