"""A plain CUDA process with known work: ROUNDS NVTX ranges "work" of K multiplies each, spread
over about two seconds so that two copies started together overlap."""
import os
import time

import torch

ROUNDS, K = 5, 10
x = torch.ones(1 << 16, device="cuda")
for _ in range(ROUNDS):
    torch.cuda.nvtx.range_push("work")
    for _ in range(K):
        x.mul_(1.0001)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    time.sleep(0.4)
print(f"pid {os.getpid()} mul_kernels {ROUNDS * K}", flush=True)
