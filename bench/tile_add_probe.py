"""The tile add at the copy ceiling: tile shapes, warps and PTX cache hints, against torch.add
and the SIMT vecadd, interleaved rounds of event-timed batches (median of 150 calls each).

    python3 bench/tile_add_probe.py      # on the GPU machine, after source tools/device_setup.sh

A-G are the example's 1024-element tile over 4 warps with the loads and stores of its PTX
rewritten (A none; B `ld.global.nc.L2::256B`; C `st.global.cs`; D `L1::no_allocate` + `.cs`;
E B + C; F plain `ld.global`; G `L1::no_allocate`); 1k8 and 512x4 are 1024 over 8 warps and
512 over 4 (one 16-byte access per operand a thread).  Results: bench/RESULTS.md.
"""
import re
import statistics
import sys

sys.path.insert(0, "examples")
sys.path.insert(0, "bench")
import torch  # noqa: E402

import anodize as az  # noqa: E402
from anodize import DisjointSlice, Slice, f32, tile  # noqa: E402
from anodize.codegen.gpu import ptx as _ptx  # noqa: E402
from suite import time_events  # noqa: E402


@az.launch_contract(domain=1, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@az.tile_kernel(num_warps=4)
def add4(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], BLOCK: az.Constant[int], V: az.Constant[int]) -> None:
    pid = tile.program_id_1d()  # `V` picks a specialisation (one compile) per PTX rewrite
    tile.store(c, pid, tile.load(a, pid, BLOCK) + tile.load(b, pid, BLOCK))


@az.launch_contract(domain=1, requires=lambda a, b, c: len(a) == len(c) and len(b) == len(c))
@az.tile_kernel(num_warps=8)
def add8(a: Slice[f32], b: Slice[f32], c: DisjointSlice[f32], BLOCK: az.Constant[int]) -> None:
    pid = tile.program_id_1d()
    tile.store(c, pid, tile.load(a, pid, BLOCK) + tile.load(b, pid, BLOCK))


LD, ST = r"ld\.global\.nc\.v4", r"st\.global\.v4"
SUBS = {"A": [], "B": [(LD, "ld.global.nc.L2::256B.v4")], "C": [(ST, "st.global.cs.v4")],
        "D": [(LD, "ld.global.nc.L1::no_allocate.v4"), (ST, "st.global.cs.v4")],
        "E": [(LD, "ld.global.nc.L2::256B.v4"), (ST, "st.global.cs.v4")],
        "F": [(LD, "ld.global.v4")], "G": [(LD, "ld.global.nc.L1::no_allocate.v4")]}
VARIANT = ["A"]
_emit = _ptx.emit_ptx


def emit(*a, **kw):  # noqa: ANN002, ANN003, ANN201
    ir, text = _emit(*a, **kw)
    for pat, rep in SUBS[VARIANT[0]]:
        text = re.sub(pat, rep, text)
    return ir, text


def main() -> None:
    import vecadd

    _ptx.emit_ptx = emit
    dev = az.device(0)
    n = 1 << 28
    a = torch.rand(n, device="cuda")
    b = torch.rand(n, device="cuda")
    c = torch.empty_like(a)
    c2 = torch.empty_like(a)
    runs = {}

    def ours(name: str, launch) -> None:  # noqa: ANN001
        launch(a, b, c)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, a + b)
        runs[name] = (lambda: launch(a, b, c), "anodize")

    for v_i, v in enumerate(SUBS):
        VARIANT[0] = v
        ours(v, lambda x, y, z, v_i=v_i: add4[az.LaunchConfig.for_tiles((n,), (1024,))](x, y, z, 1024, v_i))
    VARIANT[0] = "A"
    ours("1k8", lambda x, y, z: add8[az.LaunchConfig.for_tiles((n,), (1024,))](x, y, z, 1024))
    ours("512x4", lambda x, y, z: add4[az.LaunchConfig.for_tiles((n,), (512,))](x, y, z, 512, 0))
    runs["torch"] = (lambda: torch.add(a, b, out=c2), "torch")
    vk = vecadd.vecadd[az.LaunchConfig.for_num_elems(n, block=256)]
    runs["simt"] = (lambda: vk(a, b, c), "anodize")
    res: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(15):
        for name, (fn, be) in runs.items():
            res[name] += time_events(fn, 10, be, dev.stream)
    tm = statistics.median(res["torch"])
    for name, xs in res.items():
        m = statistics.median(xs)
        print(f"{name:6s} median {m:.4f} ms  min {min(xs):.4f}  ratio vs torch {tm / m:.4f}  GB/s {3 * 4 * n / m / 1e6:.0f}")


if __name__ == "__main__":
    main()
