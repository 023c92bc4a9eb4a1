"""The launch half of `Kernel` (anodize/kernel.py): what a kernel object calls to launch, in one
module that `Kernel` loads on its first launch, so that `import anodize` (the checker, the mypy
plugin, `anodize check`) and a compile load neither the launch path nor NumPy.  Nothing here is
public API: `Kernel`'s methods are."""

from __future__ import annotations

from anodize.bundle import bundle_positions, expand, has_bundles
from anodize.bundle_launch import BundleLaunch
from anodize.runtime.config import LaunchConfig
from anodize.runtime.generic import GenericLaunch, specialise
from anodize.runtime.launch import prepare

__all__ = ["BundleLaunch", "GenericLaunch", "LaunchConfig", "bundle_positions", "expand", "has_bundles", "prepare",
           "specialise"]
