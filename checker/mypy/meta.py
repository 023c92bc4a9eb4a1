"""Facts the plugin attaches to types: a kernel's contract, a buffer's dtype and shape,
a launch config's block.

They ride on `Instance.extra_attrs` as one string-literal attribute holding JSON.
mypy serializes extra attributes into its incremental cache and includes them in
dmypy's dependency snapshots, so a module that launches a kernel imported from
another is re-checked when that kernel's contract changes.
"""

from __future__ import annotations

import json
from typing import Any

from mypy.plugin import CheckerPluginInterface
from mypy.types import ExtraAttrs, Instance, LiteralType, ProperType, Type, get_proper_type

KERNEL = "__anodize_kernel__"
BUFFER = "__anodize_buffer__"
CONFIG = "__anodize_config__"


def attach(api: CheckerPluginInterface, typ: Type, key: str, data: dict[str, Any]) -> Type:
    """`typ` (an Instance) carrying `data` under `key`; other types are returned unchanged."""
    inst = get_proper_type(typ)
    if not isinstance(inst, Instance):
        return typ
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    literal = LiteralType(text, api.named_generic_type("builtins.str", []))
    attrs = inst.extra_attrs.copy() if inst.extra_attrs else ExtraAttrs({}, set(), None)
    attrs.attrs[key] = literal
    attrs.immutable.add(key)
    new = inst.copy_modified()
    new.extra_attrs = attrs
    return new


def read(typ: Type | ProperType | None, key: str) -> dict[str, Any] | None:
    """The data attached under `key`, or None when this type carries none."""
    if typ is None:
        return None
    inst = get_proper_type(typ)
    if not isinstance(inst, Instance) or not inst.extra_attrs:
        return None
    lit = get_proper_type(inst.extra_attrs.attrs.get(key))
    if not isinstance(lit, LiteralType) or not isinstance(lit.value, str):
        return None
    try:
        data = json.loads(lit.value)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
