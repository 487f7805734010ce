"""A small PyTorch training loop with NVTX ranges, for kp's GPU tests.

Each step is one NVTX range "step" holding "forward", "backward" and "optimizer" (pushed with
torch.cuda.nvtx.range_push/pop). The script prints `expect key=value` lines that
tests/gpu/trace_expect.cc checks against the trace: counts and nesting of the ranges, the thread
that pushed them, and kernels inside each phase.
"""

import argparse
import os
import threading

import torch
import torch.nn as nn


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=1024)
    args = parser.parse_args()

    if not torch.cuda.is_available():
        print("info pytorch_train: CUDA not available")
        return 2
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(args.width, 4 * args.width),
        nn.GELU(),
        nn.Linear(4 * args.width, args.width),
        nn.LayerNorm(args.width),
        nn.Linear(args.width, 10),
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    inputs = torch.randn(args.batch, args.width, device=device)
    targets = torch.randint(0, 10, (args.batch,), device=device)

    # torch.cuda.nvtx talks to NVTX from this (the main) thread; the trace must say so.
    tid = threading.get_native_id()
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.range_push("forward")
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
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
    torch.cuda.synchronize()
    final_loss = loss.item()

    props = torch.cuda.get_device_properties(device)
    uuid = str(props.uuid).replace("-", "") if hasattr(props, "uuid") else ""
    if uuid.startswith("GPU"):
        uuid = uuid[3:]
    if uuid:
        print(f"expect device_name[{uuid}]={props.name}")
        print(f"expect device_cc[{uuid}]={props.major}.{props.minor}")
    s = args.steps
    print(f"expect nvtx_range_count[step]={s}")
    for name in ("forward", "backward", "optimizer"):
        print(f"expect nvtx_range_count[{name}]={s}")
        print(f"expect nvtx_range_depth[{name}]=2")
        print(f"expect nvtx_range_thread[{name}]={tid}")
        # Every phase launches GPU work in every step. Autograd runs backward on its own device
        # thread, so for "backward" the launch calls are matched by time on any thread.
        inside = "during" if name == "backward" else "inside"
        print(f"expect nvtx_kernels_{inside}_min[{name}]={s}")
    print(f"expect nvtx_range_depth[step]=1")
    print(f"expect nvtx_range_thread[step]={tid}")
    print(f"expect kernels_min={3 * s}")
    print(f"info pytorch_train: {s} steps, final loss {final_loss:.4f}, torch {torch.__version__},"
          f" pid {os.getpid()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
