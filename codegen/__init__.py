"""The compiler: kernel source to typed IR, to LLVM IR, to PTX (or host code for the CPU backend)."""
