"""A DistributedDataParallel training loop for kp's range metrics on several ranks.

Run under torchrun: each rank trains the same MLP for --steps steps, each step one NVTX range
"step" on the main thread; the gradients are all-reduced by DDP (NCCL when every rank has a GPU
of its own, gloo when ranks share one, as on a one-GPU machine). The first step is the warm-up
(allocations, cuBLAS heuristics, communicator set-up) that KP_METRICS_SKIP keeps out of the value
sets. Prints `info` lines for the log (rank, device, backend).
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=2048)
    args = parser.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    gpus = torch.cuda.device_count()
    if gpus == 0:
        print(f"info metrics_ddp: rank {rank}: CUDA not available")
        return 2
    device = torch.device("cuda", local_rank % gpus)
    torch.cuda.set_device(device)
    backend = "nccl" if gpus >= world else "gloo"
    dist.init_process_group(backend)
    torch.manual_seed(0)
    w = args.width
    model = nn.Sequential(nn.Linear(w, 4 * w), nn.GELU(), nn.Linear(4 * w, 4 * w), nn.GELU(),
                          nn.Linear(4 * w, w), nn.LayerNorm(w), nn.Linear(w, 10)).to(device)
    ddp = DDP(model, device_ids=[device.index])
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    inputs = torch.randn(args.batch, w, device=device)
    targets = torch.randint(0, 10, (args.batch,), device=device)
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        loss = loss_fn(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"info metrics_ddp: rank {rank}/{world} on cuda:{device.index} ({backend}), "
          f"{args.steps} steps, loss {loss.item():.4f}, pid {os.getpid()}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
