"""torch.profiler started inside a process that kp profiles: a second CUPTI client.

CUPTI allows one subscriber per process, and kp subscribes first (as "kp", cuptiSubscribe_v2),
so torch.profiler's CUDA activity collection cannot start. This script runs the same small
workload in three NVTX ranges -- "before", "profiled" (inside torch.profiler.profile) and
"after" -- and checks what docs/robustness.md promises for that order:
  - the program keeps running and exits 0, as without kp;
  - kp's trace is complete: every range, with its kernels, including those while torch.profiler
    ran (the `expect` lines, checked by kp_trace_expect);
  - what torch.profiler got is printed (`info torch_profiler: cuda_events=N`); when it got no
    GPU events the run's stderr must name kp as CUPTI's holder (run_gpu_tests.sh checks).
"""

import argparse
import os

import torch
from torch.profiler import ProfilerActivity, profile


def work(x: torch.Tensor, steps: int) -> torch.Tensor:
    for _ in range(steps):
        x = torch.relu(x @ x) / x.shape[0]
    return x


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("info torch_profiler: CUDA not available")
        return 2
    x = torch.randn(512, 512, device="cuda")
    s = args.steps

    torch.cuda.nvtx.range_push("before")
    x = work(x, s)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.cuda.nvtx.range_push("profiled")
        x = work(x, s)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    cuda_events = sum(
        1 for e in prof.events() if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA
    )

    torch.cuda.nvtx.range_push("after")
    x = work(x, s)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    checksum = float(x.sum().item())

    for name in ("before", "profiled", "after"):
        print(f"expect nvtx_range_count[{name}]=1")
        print(f"expect nvtx_kernels_inside_min[{name}]={s}")
    print(f"expect kernels_min={3 * s}")
    print(f"info torch_profiler: cuda_events={cuda_events} checksum={checksum:.6g}"
          f" torch {torch.__version__} pid {os.getpid()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
