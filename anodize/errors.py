"""The public exception classes (`anodize.errors`); they live in `anodize.language.errors`."""

from anodize.language.errors import (
    AliasingError,
    ArgumentError,
    CheckError,
    ContractViolation,
    KernelFault,
    LaunchError,
    OutOfMemoryError,
)

__all__ = ["CheckError", "LaunchError", "ContractViolation", "AliasingError", "ArgumentError", "KernelFault", "OutOfMemoryError"]
