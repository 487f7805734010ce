"""A small PyTorch training loop with NVTX ranges: the demo that kp profiles.

    kptrace run -o demo.kptrace -- python3 examples/demo_train.py [--steps N]

Each step is wrapped in NVTX ranges "step" > "forward" / "backward" / "optimizer", as the
profiling workflow recommends, so kp's summary can report per-phase statistics (and metrics
with KP_METRICS=sol).
"""
import argparse

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dim", type=int, default=1024)
    args = ap.parse_args()

    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Linear(args.dim, 4 * args.dim),
        torch.nn.GELU(),
        torch.nn.Linear(4 * args.dim, args.dim),
        torch.nn.LayerNorm(args.dim),
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, 128, args.dim, device=dev)
    y = torch.randn(args.batch, 128, args.dim, device=dev)

    nvtx = torch.cuda.nvtx
    for step in range(args.steps):
        nvtx.range_push("step")
        nvtx.range_push("forward")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
        nvtx.range_pop()
        nvtx.range_push("backward")
        loss.backward()
        nvtx.range_pop()
        nvtx.range_push("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        nvtx.range_pop()
        nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"demo_train: {args.steps} steps, final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
