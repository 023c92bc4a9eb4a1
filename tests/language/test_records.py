"""anodize/language/records.py's `dataclass` makes the standard library's classes, faster: each
shape is built twice, by `dataclasses.dataclass` and by records', and everything observable
is compared; and every dataclass of the compiler carries the docstring and signature the
standard library would have given it."""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pickle
import pkgutil
import sys
from typing import Any, ClassVar

import pytest

from anodize.language import records

FAST = records._FAST


def _shapes(dc: Any) -> dict[str, Any]:
    """One class of each shape, built with `dc` (the module's globals hold them for pickling)."""

    @dc(frozen=True)
    class Plain:
        name: str
        ty: int
        span: Any = None
        weak: bool = False

    @dc(frozen=True)
    class Documented:
        """Has its own docstring."""

        x: int
        items: tuple[int, ...] = ()

    @dc
    class Mutable:
        a: int
        xs: list[int] = dataclasses.field(default_factory=list)
        d: dict[str, int] = dataclasses.field(default_factory=dict)

    @dc(frozen=True)
    class Fieldopts:
        a: int
        b: Any = dataclasses.field(default=None, compare=False)
        c: int = dataclasses.field(default=3, repr=False)
        h: int = dataclasses.field(default=4, hash=False)

    @dc(eq=False)
    class NoEq:
        a: int

    @dc(frozen=True)
    class OwnHash:
        a: int

        def __hash__(self) -> int:
            return 7

    @dc
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

    @dc(frozen=True)
    class OwnRepr:
        a: int

        def __repr__(self) -> str:
            return "mine"

    @dc(frozen=True)
    class Empty:
        pass

    @dc(frozen=True)
    class One:
        v: float

    @dc
    class Selfish:
        self: int
        other: int = 2

    @dc(frozen=True)
    class Reserved:  # a field name the shared __init__ code uses for its placeholders: compiled on its own
        _az0_: int
        other: tuple[int, ...] = dataclasses.field(default_factory=tuple)

    @dc(frozen=True)
    class WithClassVar:  # falls back to the standard library
        K: ClassVar[int] = 3
        a: int = 1

    @dc(frozen=True)
    class Base:
        a: int

    @dc(frozen=True)
    class Derived(Base):  # a dataclass base: falls back
        b: int = 0

    @dc
    class Post:  # __post_init__: falls back
        a: int

        def __post_init__(self) -> None:
            self.a += 1

    @dc(frozen=True, order=True)
    class Ordered:  # order=True: falls back
        a: int

    return {c.__name__: c for c in (Plain, Documented, Mutable, Fieldopts, NoEq, OwnHash, OwnEq, OwnRepr, Empty, One,
                                    Selfish, Reserved, WithClassVar, Base, Derived, Post, Ordered)}


ARGS: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {  # two argument lists: equal objects, then a different one
    "Plain": (("x", 1), ("x", 2, None, True)),
    "Documented": ((1, (2, 3)), (2,)),
    "Mutable": ((1,), (1, [2])),
    "Fieldopts": ((1, "a", 5, 6), (2,)),
    "NoEq": ((1,), (1,)),
    "OwnHash": ((1,), (2,)),
    "OwnEq": ((1,), (2,)),
    "OwnRepr": ((1,), (2,)),
    "Empty": ((), ()),
    "One": ((1.5,), (2.5,)),
    "Selfish": ((1,), (1, 3)),
    "Reserved": ((1,), (2, (3,))),
    "WithClassVar": ((1,), (2,)),
    "Base": ((1,), (2,)),
    "Derived": ((1, 2), (1, 3)),
    "Post": ((1,), (2,)),
    "Ordered": ((1,), (2,)),
}

STD = _shapes(dataclasses.dataclass)
OURS = _shapes(records.dataclass)


def _observe(cls: Any, args: tuple[Any, ...], other: tuple[Any, ...]) -> dict[str, Any]:
    a, b, c = cls(*args), cls(*args), cls(*other)
    out: dict[str, Any] = {
        "doc": cls.__doc__.replace(cls.__qualname__, "Q"),
        "signature": str(inspect.signature(cls)),
        "init_annotations": cls.__init__.__annotations__ if "__init__" in cls.__dict__ else None,
        "fields": [(f.name, f.type, f.default, f.default_factory, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(cls)],
        "params": repr(cls.__dataclass_params__),
        "match_args": getattr(cls, "__match_args__", None),
        "repr": repr(a).replace(cls.__qualname__, "Q"),
        "eq": (a == b, a == c, a != c, a == 1, a.__eq__(1) if "__eq__" in cls.__dict__ else None),
        "hash_none": cls.__hash__ is None,
        "hash_equal": hash(a) == hash(b) if cls.__hash__ is not None else None,
        "qualnames": sorted(v.__qualname__.replace(cls.__qualname__, "Q") for k, v in cls.__dict__.items()
                            if k.startswith("__") and callable(v) and hasattr(v, "__qualname__")),
        "asdict": dataclasses.asdict(a),
        "replace": repr(dataclasses.replace(a)).replace(cls.__qualname__, "Q") if dataclasses.fields(cls) else None,
        "copy": copy.deepcopy(a) == a,
        "is_dataclass": dataclasses.is_dataclass(cls) and dataclasses.is_dataclass(a),
        "instance_dict": list(vars(a).items()),  # what `__init__` wrote, in its order
    }
    init = cls.__init__  # (made on first use)
    code = getattr(init, "__code__", None)
    if code is not None and code.co_filename == "<string>":  # the generated __init__, down to its bytecode
        import dis

        ops = [(i.opname, i.argval if i.opname != "LOAD_CONST" or not callable(i.argval) else "code")
               for i in dis.get_instructions(code)]
        out["init_code"] = (ops, code.co_varnames, code.co_names, sorted(code.co_freevars), code.co_argcount,
                            [c for c in code.co_consts if isinstance(c, str)], code.co_name, code.co_qualname)
        out["init_defaults"] = init.__defaults__, init.__kwdefaults__
        out["init_closure"] = sorted((n, repr(c.cell_contents)) for n, c in zip(code.co_freevars, init.__closure__ or ()))
    frozen = cls.__dataclass_params__.frozen
    for what, act in (("set", lambda: setattr(a, "name", 1)), ("set_new", lambda: setattr(a, "zz", 1)),
                      ("del", lambda: delattr(a, "name"))):
        try:
            act()
            out[what] = "ok"
        except dataclasses.FrozenInstanceError as e:
            out[what] = ("frozen", str(e))
        except AttributeError as e:
            out[what] = ("attr", type(e).__name__)
    out["frozen"] = frozen
    return out


@pytest.mark.parametrize("name", sorted(ARGS))
def test_records_dataclass_matches_the_standard_librarys(name: str) -> None:
    same, other = ARGS[name]
    ours, std = _observe(OURS[name], same, other), _observe(STD[name], same, other)
    if OURS[name].__dataclass_params__.frozen and ours.get("init_code") != std.get("init_code"):
        # a frozen class's `__init__` calls `object.__setattr__` from a cell of its own
        # (records.py `_SET`), not through `object` each field: the same calls, other bytecode
        assert "__setattr__" not in ours.pop("init_code")[2]
        assert ("_az_setattr_", repr(object.__setattr__)) in ours.pop("init_closure")
        del std["init_code"], std["init_closure"]
    assert ours == std


def test_a_frozen_init_writes_through_a_slot() -> None:
    """A field that is a base's slot is written by `object.__setattr__` into the slot, as the
    standard library's `__init__` writes it."""

    class Slotted:
        __slots__ = ("x",)

    @records.dataclass(frozen=True)
    class WithSlot(Slotted):
        x: int
        y: int = 2

    w = WithSlot(1)
    assert (w.x, w.y) == (1, 2) and vars(w) == {"y": 2}
    assert "_az_setattr_" in WithSlot.__init__.__code__.co_freevars or not FAST


def test_recursive_repr_is_guarded() -> None:
    a = OURS["Mutable"](1)
    a.xs.append(a)
    s = STD["Mutable"](1)
    s.xs.append(s)
    assert repr(a).replace("_shapes.<locals>.", "") == repr(s).replace("_shapes.<locals>.", "")
    assert "..." in repr(a)


def test_frozen_instances_pickle() -> None:
    from anodize.language.diagnostics import Span
    from anodize.language.ir import Const
    from anodize.language.types import ScalarTy

    from anodize.language.vocab import SCALARS

    c = Const(3, ScalarTy(SCALARS["i32"]), Span.point("k.py", 1, 0))
    back = pickle.loads(pickle.dumps(c))
    assert back == c and hash(back) == hash(c) and back is not c


def test_errors_match_the_standard_librarys() -> None:
    for dc in (dataclasses.dataclass, records.dataclass):
        with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
            @dc
            class Bad:
                a: int = 1
                b: int  # type: ignore[misc]

        with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):
            @dc(frozen=True)
            class Bad2:
                a: int

                def __setattr__(self, k: str, v: Any) -> None: ...


@pytest.mark.skipif(not FAST, reason="Python 3.13+ uses the standard library's decorator unchanged")
def test_the_fast_path_is_taken_for_the_common_shapes() -> None:
    """(so that the comparisons above test records' own methods, not the fallback)"""
    for name in ("Plain", "Documented", "Mutable", "Fieldopts", "NoEq", "One", "Selfish"):
        cls = OURS[name]
        assert "__create_fn__" not in getattr(cls.__dict__.get("__repr__"), "__qualname__", "__create_fn__")
        assert cls.__dict__.get("__repr__") is None or cls.__repr__.__code__.co_filename == records.__file__
    assert STD["Plain"].__repr__.__code__.co_filename != records.__file__
    for name in ("WithClassVar", "Derived", "Post", "Ordered"):  # the fallback
        assert OURS[name].__repr__.__code__.co_filename != records.__file__


def _compiler_dataclasses() -> list[type]:
    import anodize

    out = []
    for pkg in ("anodize.language", "anodize.checker", "anodize.codegen", "anodize.runtime"):
        mod = importlib.import_module(pkg)
        for info in pkgutil.iter_modules(mod.__path__, pkg + "."):
            try:
                m = importlib.import_module(info.name)
            except ImportError:
                continue
            out += [v for v in vars(m).values()
                    if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__ == m.__name__]
    assert anodize is not None
    return out


def test_every_compiler_dataclass_has_the_standard_docstring_and_signature() -> None:
    classes = _compiler_dataclasses()
    assert len(classes) > 100
    for cls in classes:
        own = cls.__dict__.get("__doc__")
        std = cls.__name__ + str(inspect.signature(cls)).replace(" -> None", "")
        assert own and (own == std or not own.startswith(cls.__name__ + "(")), cls
        if getattr(cls.__init__, "__code__", None) is None or cls.__init__.__code__.co_filename != "<string>":
            continue  # the class's own __init__
        params = inspect.signature(cls).parameters
        init_fields = [f for f in dataclasses.fields(cls) if f.init]
        assert list(params) == [f.name for f in init_fields], cls


def test_import_time_is_spent_once_per_class() -> None:
    """The typed IR's module builds its ~50 classes without one `exec` per method."""
    if not FAST:
        pytest.skip("standard library path")
    calls = []
    real = dataclasses._create_fn  # type: ignore[attr-defined]

    def counting(*a: Any, **kw: Any) -> Any:
        calls.append(a[0])
        return real(*a, **kw)

    saved = {k: v for k, v in sys.modules.items() if k == "anodize.language.ir"}
    package = sys.modules["anodize.language"]
    saved_attr = package.__dict__.get("ir")
    try:
        dataclasses._create_fn = counting  # type: ignore[attr-defined]
        sys.modules.pop("anodize.language.ir", None)
        importlib.import_module("anodize.language.ir")
    finally:
        dataclasses._create_fn = real  # type: ignore[attr-defined]
        sys.modules.update(saved)
        # the import also bound the fresh module as the package's attribute: a later
        # `from anodize.language import ir` would read it, and the IR's classes would be two
        if saved_attr is not None:
            package.ir = saved_attr  # type: ignore[attr-defined]
    assert calls == []  # every method made by records (its __init__ exec is its own)
