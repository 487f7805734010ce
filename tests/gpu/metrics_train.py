"""A PyTorch MLP training loop for kp's per-range metrics test (issue 4).

Each step is one NVTX range "step" holding "forward", "backward" and "optimizer" and nothing
else, so that the DRAM bytes of the three phases, measured as three ranges, can be set against
the bytes of the whole step measured as one range. The model is wide enough (about 270 MB of
fp32 weights, AdamW state three times that) that its traffic goes to DRAM, not just to L2.
Prints `expect` lines for tests/gpu/trace_expect.cc and `info` lines for the log.
"""

import argparse
import os
import threading

import torch
import torch.nn as nn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--width", type=int, default=2048)
    args = parser.parse_args()

    if not torch.cuda.is_available():
        print("info metrics_train: CUDA not available")
        return 2
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    w = args.width
    model = nn.Sequential(
        nn.Linear(w, 4 * w),
        nn.GELU(),
        nn.Linear(4 * w, 4 * w),
        nn.GELU(),
        nn.Linear(4 * w, w),
        nn.LayerNorm(w),
        nn.Linear(w, 10),
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    inputs = torch.randn(args.batch, w, device=device)
    targets = torch.randint(0, 10, (args.batch,), device=device)
    params = sum(p.numel() for p in model.parameters())

    tid = threading.get_native_id()
    first_loss = None
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.range_push("forward")
        loss = loss_fn(model(inputs), targets)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("backward")
        loss.backward()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_push("optimizer")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        if first_loss is None:
            first_loss = loss.item()
    torch.cuda.synchronize()
    final_loss = loss.item()

    s = args.steps
    print(f"expect nvtx_range_count[step]={s}")
    for name in ("forward", "backward", "optimizer"):
        print(f"expect nvtx_range_count[{name}]={s}")
        print(f"expect nvtx_range_depth[{name}]=2")
        print(f"expect nvtx_range_thread[{name}]={tid}")
    print(f"expect nvtx_range_depth[step]=1")
    print(f"info metrics_train: {s} steps, {params / 1e6:.1f} M parameters, loss "
          f"{first_loss:.4f} -> {final_loss:.4f}, torch {torch.__version__}, pid {os.getpid()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
