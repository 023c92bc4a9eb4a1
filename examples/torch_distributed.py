"""torch_distributed: anodize kernels in every process of a `torch.distributed` job.

    torchrun --nproc_per_node=2 examples/torch_distributed.py          # one node, two processes
    python examples/torch_distributed.py --nprocs 2                    # the same, spawned by the script

Each process (rank) draws its own shard of samples, runs an anodize kernel over its own
tensors (through `az.torch.custom_op`, so the same code traces under `torch.compile`), and
the per-rank partial sums are all-reduced: NCCL when the tensors are on GPUs (rank r uses
GPU r mod the GPU count), gloo on the CPU backend.  Every rank ends with the total, checked
against NumPy over all shards.  anodize needs nothing of its own for this: each process is an
ordinary PyTorch process whose kernels happen to be anodize's.

Across nodes, start the same program on every node with torchrun's rendezvous, e.g. on two
nodes of 8 GPUs each:

    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=HOST:29500 \
        examples/torch_distributed.py

(or `srun`/`mpirun` setting RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT).  Nothing else
changes: each process compiles (or loads from its compile cache, or from a package built with
`anodize build`) the kernels for its own GPU.  docs/deploy.md has more.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np

import anodize as az
from anodize import DisjointSlice, Slice, f32, kernel, launch_contract, thread


@launch_contract(domain=1, block=256, requires=lambda x, w, y: len(x) == len(y) and len(w) == len(y))
@kernel
def weighted(x: Slice[f32], w: Slice[f32], y: DisjointSlice[f32]) -> None:
    i = thread.index_1d()
    if i in y:
        y[i] = x[i] * w[i] + 1.0


def _shard(rank: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1234 + rank)
    return rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)


def worker(rank: int, world: int, n: int = 10_000, port: int = 29512) -> float:
    """One process of the job: its kernel on its shard, then the all-reduce; returns the total."""
    import torch
    import torch.distributed as dist

    use_gpu = torch.cuda.is_available() and os.environ.get("ANODIZE_DEVICE", "") != "cpu"
    if not use_gpu:
        os.environ["ANODIZE_DEVICE"] = "cpu"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    dist.init_process_group("nccl" if use_gpu else "gloo", rank=rank, world_size=world)
    try:
        device = torch.device(f"cuda:{rank % torch.cuda.device_count()}") if use_gpu else torch.device("cpu")
        if use_gpu:
            torch.cuda.set_device(device)
        op = az.torch.custom_op(
            weighted, name="azdist::weighted",
            outputs=lambda x, w: {"y": (x.shape, az.f32)},
            config=lambda x, w: az.LaunchConfig.for_num_elems(x.numel(), block=256),
        )
        xs, ws = _shard(rank, n)
        y = op(torch.from_numpy(xs).to(device), torch.from_numpy(ws).to(device))
        partial = y.sum(dtype=torch.float64).reshape(1)
        dist.all_reduce(partial)  # every rank now holds the sum over all ranks' shards
        total = float(partial.item())
        expect = 0.0
        for r in range(world):
            x, w = _shard(r, n)
            expect += float(np.sum(x.astype(np.float64) * w + 1.0))
        assert abs(total - expect) <= 1e-6 * abs(expect), (total, expect)
        print(f"rank {rank}/{world} on {device}: total {total:.3f} matches NumPy")
        return total
    finally:
        dist.destroy_process_group()


def _spawned(rank: int, world: int, n: int, port: int) -> None:
    worker(rank, world, n, port)


def main_cli(argv: list[str] | None = None) -> Any:
    p = argparse.ArgumentParser(description="anodize kernels in every process of a torch.distributed job")
    p.add_argument("--nprocs", type=int, default=0, help="spawn this many processes here (without torchrun)")
    p.add_argument("--n", type=int, default=10_000)
    p.add_argument("--port", type=int, default=29512)
    args = p.parse_args(argv)
    if args.nprocs:
        import torch.multiprocessing as mp

        mp.spawn(_spawned, args=(args.nprocs, args.n, args.port), nprocs=args.nprocs, join=True)
        return None
    # under torchrun: RANK and WORLD_SIZE come from the launcher
    return worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args.n, args.port)


if __name__ == "__main__":
    main_cli()
