"""The memo of a bundle launch (`BundleLaunch`, anodize/bundle_launch.py): a relaunch with the very
objects of an earlier launch skips the expansion of the bundle into its fields as well as every
check, as the `Launcher`'s own memo does for separate slices (runtime/launch_fast.py).

`bundle_memo_maker(layout, plan)` -> `make`; `make(call, packed, arena, args, flat)` -> `fire`;
`fire(args) -> bool`: when the bundles of `args` are of the classes of the memoised launch's and
their fields and the other arguments are its very objects (each Buffer alive, by a weak
reference; each scalar by identity), mark the fault arena and relaunch `packed`; else return
False.  A bundle is read field by field at every relaunch, never trusted by its own identity,
so a bundle whose field was reassigned (`s.out = b`) misses and the launch is checked again,
and a new bundle of the same fields (`k[cfg](State(pos=a, ...), dt)` in a loop) hits.  What was
checked for those objects cannot have changed: a Buffer never changes pointer, shape, dtype or
device.

`fire` is generated once per launch shape (its bundles' fields, which flat arguments are
Buffers) and cached: each comparison written out costs about half of a loop over the
arguments (bench/records_bench.py measures the bundle's extra host time).
"""

from __future__ import annotations

import keyword
from typing import Any
from weakref import ref as _ref

from anodize.runtime.launch_fast import _BUF, _SCALAR

__all__ = ["bundle_memo_maker"]


def bundle_memo_maker(layout: tuple[tuple[str, ...] | None, ...], plan: Any) -> Any:
    """`make(call, packed, arena, args, flat) -> fire` for launches of `layout` under `plan`
    (see the module), or None when the plan passes an argument otherwise than as an anodize
    Buffer or a scalar (the plan's own memo takes only those) or a field's name cannot be
    written as an attribute.  `make` takes a launch whose `flat` arguments (the bundles'
    fields in their places) the plan's quick path accepted with the packed arguments `packed`.

    `layout` has one entry per launch argument: the bundle's field names, or None for an
    argument passed as itself."""
    kinds = tuple(step[0] == _BUF for step in plan.steps if step[0] in (_BUF, _SCALAR))
    if len(kinds) != len(plan.steps) or sum(1 if f is None else len(f) for f in layout) != len(kinds):
        return None
    key = (layout, kinds)
    make = _FACTORIES.get(key)
    if make is None:
        make = _factory(layout, kinds)
        if len(_FACTORIES) >= _FACTORIES_MAX:
            _FACTORIES.clear()
        _FACTORIES[key] = make
    return make


_FACTORIES: dict[tuple[Any, ...], Any] = {}  # (layout, kinds) -> the generated `make`, or None
_FACTORIES_MAX = 256


def _factory(layout: tuple[tuple[str, ...] | None, ...], kinds: tuple[bool, ...]) -> Any:
    """The generated `make` for one launch shape: per flat argument a weak reference (a Buffer,
    `kinds` True) or the object itself (a scalar); None where a field's name is no identifier."""
    head = ["def make(call, packed, arena, args, flat):"]
    tests: list[str] = []
    body = ["    def fire(args):", f"        if len(args) != {len(layout)}:", "            return False"]
    flat = 0
    for k, fields in enumerate(layout):
        if fields is None:
            exprs = [f"args[{k}]"]
        else:
            if not all(f.isidentifier() and not keyword.iskeyword(f) for f in fields):
                return None
            head.append(f"    cls{k} = args[{k}].__class__")
            body.append(f"        b{k} = args[{k}]")
            tests.append(f"b{k}.__class__ is not cls{k}")
            exprs = [f"b{k}.{f}" for f in fields]
        for expr in exprs:
            if kinds[flat]:
                head.append(f"    k{flat} = ref(flat[{flat}])")
                tests.append(f"k{flat}() is not {expr}")
            else:
                head.append(f"    k{flat} = flat[{flat}]")
                tests.append(f"{expr} is not k{flat}")
            flat += 1
    body.append("        if " + " or ".join(tests) + ":")
    body += ["            return False", "        arena.dirty = True", "        call(*packed)", "        return True"]
    names: dict[str, Any] = {"ref": _ref}
    exec("\n".join([*head, *body, "    return fire"]), names)  # noqa: S102 - generated and checked identifiers only
    return names["make"]
