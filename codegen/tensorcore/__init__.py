"""Tensor-core code for the NVPTX target: the GEMM tiles (`gemm.py`: mma.sync, `wgmma.py` and
`wgmma_asm.py`: Hopper's wgmma), fused attention (`attention.py`), and their inline-PTX pieces."""
