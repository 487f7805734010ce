"""One rank of a data-parallel loop: STEPS steps, each an NVTX range "step" holding K in-place
multiplies (one MulFunctor kernel each) and an all-reduce. Run under torchrun.
Backend: PT_BACKEND (default gloo with CUDA tensors, which works with two ranks on one GPU;
nccl needs one GPU per rank)."""
import os

import torch
import torch.distributed as dist

STEPS = int(os.environ.get("PT_STEPS", "8"))
K = 5

dist.init_process_group(os.environ.get("PT_BACKEND", "gloo"))
rank = dist.get_rank()
torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
x = torch.ones(1 << 16, device="cuda")
torch.cuda.synchronize()
for _ in range(STEPS):
    torch.cuda.nvtx.range_push("step")
    for _ in range(K):
        x.mul_(1.0001)
    dist.all_reduce(x)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
print(f"rank {rank} pid {os.getpid()} steps {STEPS} mul_kernels {STEPS * K}", flush=True)
dist.destroy_process_group()
