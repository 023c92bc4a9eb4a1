"""Typed IR to LLVM IR (llvmlite.ir), shared by the GPU and the CPU backends: the `Lowerer`
(`lower.py`) and what it lowers statements, expressions, calls and local values with, the LLVM
types of the kernel model (`types.py`), atomics and print (`effects.py`), the collectives, and the
loop mappings (grid-stride loops, coarsening)."""
