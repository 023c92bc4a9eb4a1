"""The Tile model's vocabulary: the names of `az.tile` (canonical `tile.<name>`, declared in
tile_ops.py) and their rules.

Read by the symbol table (`symbols.py`), the tile typer (`typer_tiles.py`), the checker's
kernel model and the facade (`anodize/tile.py`)."""

from __future__ import annotations

from anodize.language.tile_ops import TILE_OPS

# every function of `az.tile`: canonical name `tile.<name>` -> its positional arity (min, max), and
# the keywords each one takes (the only keywords of a tile kernel's calls): read from the ops'
# declarations (tile_ops.py, each op's typing function with its `@declare`)
TILE_FUNCS: dict[str, tuple[int, int]] = {n: op.arity for n, op in TILE_OPS.items()}
TILE_KEYWORDS: dict[str, frozenset[str]] = {n: op.keywords for n, op in TILE_OPS.items() if op.keywords}
TILE_REDUCTIONS = ("sum", "max", "min")
PROGRAM_IDS = {"program_id_1d": 1, "program_id_2d": 2, "program_id_3d": 3}
# the coordinates of a program id of each rank, outermost first (`pid.layer`, `pid.row`, `pid.col`)
PROGRAM_ID_PARTS = {1: (), 2: ("row", "col"), 3: ("layer", "row", "col")}
# attributes of a tile value (its methods: intrinsics.py `METHODS`)
TILE_ATTRS = frozenset({"T"})
# `tile.matmul` operand types (both operands alike); the accumulator and result are f32
MATMUL_INPUTS = ("f16", "bf16", "f32")
TILE_MAX_RANK = 3  # of a tile value and of a tile kernel's slices (3: batched work over Slice3D)
TILE_MAX_ELEMS = 1 << 16  # elements of one tile value (a tile lives in shared memory on the GPU)
DEFAULT_NUM_WARPS = 4
NUM_WARPS_CHOICES = (1, 2, 4, 8, 16, 32)
# Compile options a specialisation may carry beside its type variables and Constants (an autotuning
# configuration's `num_warps=` and `num_stages=`, anodize/autotuning.py).  Their keys end in `=`, so no
# parameter name can collide with them; the typer reads them from the specialisation (`spec`).
OPTION_NUM_WARPS = "num_warps="
OPTION_NUM_STAGES = "num_stages="
COMPILE_OPTIONS = (OPTION_NUM_WARPS, OPTION_NUM_STAGES)
NUM_STAGES_CHOICES = (1, 2, 3, 4, 5, 6)
