"""Both PyTorch workloads of the overhead benchmark in one process (Python start-up is paid once).

Prints one JSON line per workload (tiny_ops, transformer). With --torch-profiler cuda|cpu+cuda the
timed loops of each workload run inside a torch.profiler session with those activities.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from torch_tiny_ops import run_tiny_ops  # noqa: E402
from torch_transformer import run_transformer  # noqa: E402


def make_profiler(mode):
    if mode == "none":
        return None
    import torch.profiler as tp

    activities = [tp.ProfilerActivity.CUDA]
    if mode == "cpu+cuda":
        activities.insert(0, tp.ProfilerActivity.CPU)
    return tp.profile(activities=activities)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--torch-profiler", choices=["none", "cuda", "cpu+cuda"], default="none")
    parser.add_argument("--nvtx", action="store_true", help="NVTX ranges in the training step")
    parser.add_argument("--tiny-iterations", type=int, default=3000)
    parser.add_argument("--tiny-warmup", type=int, default=300)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup-steps", type=int, default=10)
    args = parser.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("torch_suite: torch sees no CUDA device", file=sys.stderr)
        return 1
    print(json.dumps({"workload": "torch_setup", "torch": torch.__version__,
                      "torch_cuda": torch.version.cuda,
                      "device": torch.cuda.get_device_name(0)}), flush=True)
    tiny = run_tiny_ops(args.tiny_iterations, args.tiny_warmup,
                        make_profiler(args.torch_profiler))
    print(json.dumps(tiny), flush=True)
    step = run_transformer(args.steps, args.warmup_steps, args.nvtx,
                           make_profiler(args.torch_profiler))
    print(json.dumps(step), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
