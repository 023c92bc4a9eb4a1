"""The NVPTX backend: the GPU `Target`, O3 and PTX emission, ptxas (`ptx.py`), and the atomics
LLVM's NVPTX backend does not lower faithfully (`atomics.py`)."""
