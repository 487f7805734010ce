"""Workload of bench/paired_cost.py: the benchmark's PyTorch workloads as a loop of timed steps.

Each step is an NVTX range "step" ended by torch.cuda.synchronize(), so a tool that traces only
some steps (kp's --capture-schedule, bench/floor's KPFLOOR_WINDOW, or torch.profiler here with
--torch-profiler-window) can be compared with the untraced steps of the same process.

--workload tiny: a step is 50 iterations of the tiny-op loop (five element-wise ops on 1024
elements, 250 kernel launches; bench/workloads/torch_tiny_ops.py). --workload train: a step is
one training step of the transformer (bench/workloads/torch_transformer.py).
--torch-profiler-window FIRST,COUNT: torch.profiler (CUDA activities only) is entered before
step FIRST and left after step FIRST+COUNT-1, outside the timed steps.
Prints one JSON line: {"workload", "step_us": [...], "step_cpu_us": [...] (the stepping thread's
CPU time), "step_process_cpu_us": [...] (all threads'), "profiled": [first, count] or null}.
"""

import argparse
import gc
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TINY_ITERATIONS_PER_STEP = 50


def make_tiny_step():
    from torch_tiny_ops import make_tiny_body

    body = make_tiny_body()
    return lambda: body(TINY_ITERATIONS_PER_STEP)


def parse_window(text):
    if not text:
        return None
    first, count = (int(v) for v in text.split(","))
    if first < 0 or count < 1:
        raise argparse.ArgumentTypeError("FIRST >= 0 and COUNT >= 1")
    return first, count


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", choices=["tiny", "train"], required=True)
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--warmup-s", type=float, default=1.0,
                        help="untimed steps for at least this long first (clocks, allocator)")
    parser.add_argument("--torch-profiler-window", type=parse_window, default=None,
                        metavar="FIRST,COUNT")
    args = parser.parse_args()

    import torch

    if args.workload == "tiny":
        step = make_tiny_step()
    else:
        from torch_transformer import make_transformer_step

        step = make_transformer_step()
    warmup_start = time.perf_counter()
    warmup_steps = 0
    while warmup_steps < 5 or time.perf_counter() - warmup_start < args.warmup_s:
        step()
        torch.cuda.synchronize()
        warmup_steps += 1

    profiler = None
    window = args.torch_profiler_window
    gc.collect()
    gc.disable()  # a collection inside a timed step is the interpreter's noise, not the tool's
    step_us, step_cpu_us, step_process_cpu_us = [], [], []
    for s in range(args.steps):
        if window is not None and s == window[0]:
            import torch.profiler as tp

            profiler = tp.profile(activities=[tp.ProfilerActivity.CUDA])
            profiler.__enter__()
        start = time.perf_counter()
        cpu_start, process_cpu_start = time.thread_time(), time.process_time()
        torch.cuda.nvtx.range_push("step")
        step()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        step_us.append((time.perf_counter() - start) * 1e6)
        step_cpu_us.append((time.thread_time() - cpu_start) * 1e6)
        step_process_cpu_us.append((time.process_time() - process_cpu_start) * 1e6)
        if profiler is not None and s == window[0] + window[1] - 1:
            profiler.__exit__(None, None, None)
            profiler = None
    if profiler is not None:
        profiler.__exit__(None, None, None)
    gc.enable()
    print(json.dumps({"workload": args.workload, "warmup_steps": warmup_steps,
                      "profiled": list(window) if window else None,
                      "step_us": [round(v, 2) for v in step_us],
                      "step_cpu_us": [round(v, 2) for v in step_cpu_us],
                      "step_process_cpu_us": [round(v, 2) for v in step_process_cpu_us]}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
