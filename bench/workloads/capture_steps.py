"""Workload of bench/capture_window_cost.sh: a loop of steps, each an NVTX range "step".

--workload tiny: each step is 50 iterations of five tiny element-wise ops (launch-bound, the
cost a tracer adds per launch); --workload train: each step is one training step of a small MLP
(forward, backward, AdamW). Warm-up runs outside any range. Prints one JSON line with the wall
time of the timed loop (synchronized at the end).
"""

import argparse
import json
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["tiny", "train"], required=True)
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--warmup-s", type=float, default=0.0,
                    help="then warm-up steps for this many seconds more (clocks settle)")
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    if args.workload == "tiny":
        x = torch.randn(1024, device=dev)

        def step():
            nonlocal x
            for _ in range(50):
                y = x * 1.0001
                y = y + 0.5
                y = torch.relu(y)
                y = y.sin()
                x = y * 0.5
    else:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                    torch.nn.Linear(4096, 1024), torch.nn.LayerNorm(1024),
                                    torch.nn.Linear(1024, 10)).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        loss_fn = torch.nn.CrossEntropyLoss()
        inputs = torch.randn(64, 1024, device=dev)
        targets = torch.randint(0, 10, (64,), device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(inputs), targets)
            loss.backward()
            opt.step()
    for _ in range(args.warmup):
        step()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < args.warmup_s:
        step()
        torch.cuda.synchronize()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        torch.cuda.nvtx.range_push("step")
        step()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    print(json.dumps({"workload": args.workload, "steps": args.steps, "seconds": seconds,
                      "us_per_step": seconds / args.steps * 1e6}), flush=True)


if __name__ == "__main__":
    main()
