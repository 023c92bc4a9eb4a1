"""The fully qualified names the plugin's hooks answer to (mypy's spelling).

Kept apart from the hook modules so that the dispatcher (`anodize.checker.mypy_plugin`)
can decide whether a name is its business without importing them: on a warm mypy cache
no hook fires, and the plugin then costs only its own import."""

from __future__ import annotations

from anodize.language.math_table import MATH

KERNEL_FULLNAME = "anodize.kernel.kernel"
FUNC_FULLNAME = "anodize.kernel.func"
CONTRACT_FULLNAME = "anodize.kernel.launch_contract"
CONFIG_FULLNAME = "anodize.runtime.config.LaunchConfig"
KERNEL_CLASS = "anodize.kernel.Kernel"
TILE_KERNEL_CLASS = "anodize.kernel.TileKernel"  # a Kernel whose launches fill in the block
TILE_KERNEL_FULLNAME = "anodize.kernel.tile_kernel"
LAUNCH_CLASS = "anodize.kernel.Launch"
FUNC_CALL = "anodize.kernel.Func.__call__"
RUNTIME_PREFIX = "anodize.runtime."
ARRAY_FULLNAME = "anodize.record.Array"  # a record's `az.Array[T, n]` field (mypy/records.py)
RECORD_FULLNAME = "anodize.record.record"
BUNDLE_FULLNAME = "anodize.bundle.Bundle"
# Calls after which the module's engine results are reported (kernel modules, host modules).
REPORTING_CALLS = frozenset({FUNC_FULLNAME, CONTRACT_FULLNAME, TILE_KERNEL_FULLNAME, "anodize.runtime.device.device"})
TILE_CLASS = "anodize.tile.Tile"
# Element-wise on a tile as on a float: Python's `math` functions of the kernel vocabulary
# (language/math_table.py; `anodize.math` names the same ones) but its classifications, and
# `abs`, `min`, `max`.  typeshed types them as floats; with a tile argument the plugin types
# the result as a tile.
ELEMENTWISE_CALLS = frozenset(
    {"builtins.abs", "builtins.min", "builtins.max"} | {f"math.{n}" for n, f in MATH.items() if f.python and not f.predicate}
)
