"""The tile compiler: tile kernels to plain kernel IR (`plain.py`, its compute loops in
`compute.py`), the register form of row-shaped kernels (`rows*.py`), the attention form
(`attention.py`), and the GPU half lowered from the layout plan the language makes
(anodize/language/tile_plan.py): layouts of tile values (`layout.py`), register tiles (`lower.py`),
the tensor-core matmul statement and its emitters (`mma.py`: mma.sync, `wgmma.py`: Hopper's wgmma).
docs/tiles.md describes it."""
