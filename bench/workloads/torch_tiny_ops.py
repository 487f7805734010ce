"""Launch-bound PyTorch workload of the overhead benchmark (bench/run_bench.py).

A loop of five tiny element-wise ops on a 1024-element tensor: every op is one small kernel, so
the time per iteration is CPU launch cost, the cost a tracer adds per launch. Run alone it
prints one JSON line; bench/workloads/torch_suite.py runs it in the same process as the
transformer step to pay Python start-up once.
"""

import argparse
import gc
import json
import statistics
import time

OPS_PER_ITERATION = 5
BLOCKS = 10


def make_tiny_body():
    """body(n): n iterations of the five ops on one 1024-element tensor it keeps."""
    import torch

    x = torch.randn(1024, device="cuda")

    def body(n):
        nonlocal x
        for _ in range(n):
            y = x * 1.0001
            y = y + 0.5
            y = torch.relu(y)
            y = y.sin()
            x = y * 0.5

    return body


def run_tiny_ops(iterations=3000, warmup=300, profiler=None):
    """Times `iterations` loops of 5 ops; `profiler` (a started-on-enter context) wraps them.

    us_per_iter is the median over ten equal blocks of the timed loop.
    """
    import torch

    body = make_tiny_body()
    body(warmup)
    torch.cuda.synchronize()
    gc.collect()
    gc.disable()  # no collection inside the timed blocks (interpreter noise, not the tool's)
    result = {"workload": "tiny_ops", "iterations": iterations,
              "ops_per_iteration": OPS_PER_ITERATION,
              "timed_kernels": OPS_PER_ITERATION * iterations}
    context = profiler if profiler is not None else _NullContext()
    with context:
        if profiler is not None:
            body(warmup)  # the profiler's own first-use costs stay out of the timing
            torch.cuda.synchronize()
        # Ten blocks, each ended by a sync: the median block resists one-off hiccups
        # (a page fault, a descheduled thread) that a single total would absorb.
        blocks = BLOCKS if iterations >= BLOCKS else 1
        per_block = max(iterations // blocks, 1)
        block_us = []
        start = time.perf_counter()
        for _ in range(blocks):
            block_start = time.perf_counter()
            body(per_block)
            torch.cuda.synchronize()
            block_us.append((time.perf_counter() - block_start) * 1e6 / per_block)
        elapsed = time.perf_counter() - start
        exit_start = time.perf_counter()
    exit_s = time.perf_counter() - exit_start if profiler is not None else 0.0
    gc.enable()
    result["iterations"] = blocks * per_block
    result["timed_kernels"] = OPS_PER_ITERATION * blocks * per_block
    result["profiler_exit_s"] = round(exit_s, 4)
    result["seconds"] = round(elapsed, 6)
    result["us_per_iter"] = round(statistics.median(block_us), 4)
    result["us_per_iter_mean"] = round(elapsed * 1e6 / (blocks * per_block), 4)
    return result


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args()
    print(json.dumps(run_tiny_ops(args.iterations, args.warmup)), flush=True)


if __name__ == "__main__":
    main()
