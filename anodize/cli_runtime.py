"""What `anodize compile`, `run`, `doctor` and `build` need of the runtime, loaded by the command
that runs (anodize/cli.py `_runtime`): `anodize check` and `anodize --help` load neither the
runtime nor NumPy."""

from __future__ import annotations

from anodize.build import build_package
from anodize.runtime.compile import compile_for_cpu
from anodize.runtime.device import devices_used
from anodize.runtime.doctor import describe_ptxas, doctor_info

__all__ = ["build_package", "compile_for_cpu", "describe_ptxas", "devices_used", "doctor_info"]
