"""The runtime half of `Kernel` (anodize/kernel.py): what a kernel object calls to launch,
specialise or compile, in one module that `Kernel` loads on its first use of them, so that
`import anodize` (the checker, the mypy plugin, `anodize check`) loads neither the runtime nor
NumPy.  Nothing here is public API: `Kernel`'s methods are."""

from __future__ import annotations

from anodize.bundle import BundleLaunch, bundle_positions, expand, has_bundles
from anodize.language.errors import USER_ERRORS, ArgumentError
from anodize.runtime.compile import compile_for_gpu
from anodize.runtime.config import LaunchConfig
from anodize.runtime.generic import (
           GenericLaunch,
           check_bindings,
           generic_signature,
           specialise,
)
from anodize.runtime.launch import prepare

__all__ = ["USER_ERRORS", "ArgumentError", "BundleLaunch", "GenericLaunch", "LaunchConfig", "bundle_positions",
           "check_bindings", "compile_for_gpu", "expand", "generic_signature", "has_bundles", "prepare", "specialise"]
