"""A training loop fed by a DataLoader with worker processes (argv[1]: fork or spawn). The
workers only build CPU tensors; the main process runs BATCHES NVTX ranges "batch", each one
copy to the GPU and K multiplies."""
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset

BATCHES, K = 12, 4


class Numbers(Dataset):
    def __len__(self):
        return BATCHES * 8

    def __getitem__(self, i):
        return torch.full((1024,), float(i)), os.getpid()


if __name__ == "__main__":
    torch.cuda.init()
    loader = DataLoader(Numbers(), batch_size=8, num_workers=2,
                        multiprocessing_context=sys.argv[1])
    worker_pids = set()
    for batch, pids in loader:
        worker_pids.update(int(p) for p in pids)
        torch.cuda.nvtx.range_push("batch")
        y = batch.cuda()
        for _ in range(K):
            y.mul_(1.0001)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    print(f"WORKERS {len(worker_pids - {os.getpid()})} pid {os.getpid()}", flush=True)
