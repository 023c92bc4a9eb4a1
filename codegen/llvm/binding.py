"""llvmlite's binding (LLVM itself, a large shared library) and the optimisation pipeline both
backends run over a module.

The binding is imported here, in `binding()`, where a compile first needs it, and nowhere else
in the GPU path: a first compile loads it on a background thread (runtime/compile.py
`_preload_llvm`) while this thread types and lowers the kernel, and only optimising and
emitting code wait for it.  (The CPU backend, codegen/cpu/, imports it with its modules: a CPU
compile JIT-compiles at once.)
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import llvmlite.binding as llvm


def binding() -> ModuleType:
    """`llvmlite.binding`, imported on first use."""
    import llvmlite.binding

    return llvmlite.binding


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine, opt: int, keep: set[str]) -> None:
    """Internalise every definition but `keep`, then run the O`opt` pipeline."""
    llvm = binding()
    for f in mod.functions:
        if f.name not in keep and not f.is_declaration:
            f.linkage = "internal"
    for g in mod.global_variables:
        if not g.is_declaration and g.name not in keep:
            g.linkage = "internal"
    pto = llvm.create_pipeline_tuning_options(speed_level=max(0, min(opt, 3)))
    pb = llvm.create_pass_builder(tm, pto)
    if opt <= 0:  # no optimisation, but drop the unused (internalised) libdevice functions
        mpm = llvm.create_new_module_pass_manager()
        mpm.add_global_dead_code_eliminate_pass()
    else:
        mpm = pb.getModulePassManager()
    try:
        mpm.run(mod, pb)
    finally:
        # llvmlite (0.44-0.50) never frees a module pass manager: its `close` reaches ObjectRef's
        # empty `_dispose` before NewPassManager's, so every pipeline (30-80 KB) stayed.
        llvm.ffi.lib.LLVMPY_DisposeNewModulePassManger(mpm)
        mpm.detach()
