#!/usr/bin/env bash
# red-team GPU twins: the tile lowering's transposed in-place store, the new accept fixtures
# that run kernels, and the coarsening refusal of a block-local witness, on the H200.
set -u
OUTDIR=${OUTDIR:-/tmp/redteam-out}
mkdir -p "$OUTDIR"
python - <<'PY' 2>&1 | tee "$OUTDIR/summary.txt"
import runpy, traceback
import anodize as az
print("device:", az.device())
for f in ["tile_inplace", "grid_stride_inside", "helper_witness_every_path", "local_witness_every_path",
          "range_after_loop_residue", "thread_tile_shared_shape"]:
    try:
        runpy.run_path(f"fixtures/accept/{f}.py")["main"]()
        print("OK  ", f)
    except Exception:
        print("FAIL", f, traceback.format_exc()[-600:])
try:
    import sys
    sys.path.insert(0, "tests/codegen")
    import cg_coarsen as K
    from anodize.codegen.driver import compile_gpu
    ck = K.block_slot.compile("sm_90") if hasattr(K.block_slot, "compile") else None
    print("block_slot coarsen:", getattr(ck, "coarsen", "?"))
except Exception:
    print("FAIL coarsen", traceback.format_exc()[-600:])
PY
