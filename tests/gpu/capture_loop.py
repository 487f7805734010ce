"""A PyTorch loop for kp's capture-window GPU tests (tests/gpu/capture_cases.py).

Every step is an outermost NVTX range "step" holding an inner range "idx_<i>" (which step it is)
and the same fixed work; the step ends with torch.cuda.synchronize() inside the range, so each
kernel of step i runs inside step i's range. Warm-up iterations before the loop run outside any
range, so every step launches the same kernels.

--profiler A,B calls cudaProfilerStart before step A and cudaProfilerStop after step B.
--tail S: after the steps (or the edge probe), S seconds more of the same work outside any range
(kp detaches CUPTI some 0.1 s after the last window: a program that ends sooner never sees it).
--graphs S: after the steps, S seconds of CUDA graph captures (torch.cuda.graph, each holding many
launches) and replays, each replay checked against the same work run eagerly; prints
"graphs N ok" (kp detaches CUPTI while they run: a detach must not break a capture).
--edge runs the edge probe instead: a spin kernel launched before cudaProfilerStart that runs
into the window, a range "outer" pushed before the window and popped inside it, and a spin
kernel launched inside the window that is still running at cudaProfilerStop.
"""

import argparse
import os
import sys
import time

import torch


def work(a, b):
    for _ in range(4):
        c = torch.mm(a, b)
        a = torch.relu(c) * 0.5
    return a


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sleep", type=float, default=0.0, help="seconds of host sleep per step")
    ap.add_argument("--profiler", default="")
    ap.add_argument("--edge", action="store_true")
    ap.add_argument("--ready-file", default="")
    ap.add_argument("--graphs", type=float, default=0.0)
    ap.add_argument("--tail", type=float, default=0.0)
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    a = torch.randn(256, 256, device=dev)
    b = torch.randn(256, 256, device=dev)
    for _ in range(3):
        work(a, b)
    torch.cuda.synchronize()

    if args.edge:
        torch.cuda.nvtx.range_push("outer")
        torch.cuda._sleep(200_000_000)  # ~0.1 s spin, launched before the window
        torch.cuda.profiler.start()
        torch.cuda.nvtx.range_pop()
        work(a, b)
        torch.cuda.nvtx.range_push("inner")
        torch.cuda._sleep(200_000_000)  # launched inside, still running at the stop
        torch.cuda.profiler.stop()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        work(a, b)
        torch.cuda.synchronize()
        tail(a, b, args.tail)
        print("edge probe done", flush=True)
        return 0

    start_at, stop_after = -1, -1
    if args.profiler:
        start_at, stop_after = (int(x) for x in args.profiler.split(","))
    if args.ready_file:
        with open(args.ready_file + ".tmp", "w") as f:
            f.write(f"{os.getpid()}\n")
        os.rename(args.ready_file + ".tmp", args.ready_file)
    for i in range(args.steps):
        if i == start_at:
            torch.cuda.profiler.start()
        torch.cuda.nvtx.range_push("step")
        torch.cuda.nvtx.range_push(f"idx_{i}")
        work(a, b)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        if i == stop_after:
            torch.cuda.profiler.stop()
        if args.sleep:
            time.sleep(args.sleep)
    tail(a, b, args.tail)
    print(f"steps done {args.steps}", flush=True)
    if args.graphs:
        return graphs(a, b, args.graphs)
    return 0


def tail(a, b, seconds):
    end = time.time() + seconds
    while time.time() < end:
        work(a, b)
        torch.cuda.synchronize()


def graphs(a, b, seconds):
    def many(x):
        for _ in range(10):
            x = work(x, b)
        return x

    want = many(a)
    torch.cuda.synchronize()
    n = 0
    end = time.time() + seconds
    while time.time() < end:
        g = torch.cuda.CUDAGraph()
        static_in = a.clone()
        with torch.cuda.graph(g):
            static_out = many(static_in)
        g.replay()
        torch.cuda.synchronize()
        if not torch.allclose(static_out, want, rtol=1e-4, atol=1e-4):
            print(f"graph {n}: replay differs from the eager result", flush=True)
            return 3
        n += 1
    print(f"graphs {n} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
