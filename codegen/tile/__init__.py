"""The tile compiler's GPU half: layouts of tile values (`layout.py`), the tensor-core matmul
statement and its emitters (`mma.py`: mma.sync, `wgmma.py`: Hopper's wgmma), lowered from the
layout plan the language makes (anodize/language/tile_plan.py).  docs/tiles.md describes it."""
