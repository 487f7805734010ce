"""Training-step PyTorch workload of the overhead benchmark (bench/run_bench.py).

Four encoder layers (d=1024, 16 heads, FFN 4096), batch 16, sequence 512, bf16 autocast, AdamW:
a realistic training step. Warm-up runs at least `warmup` steps and at least WARMUP_MIN_S
seconds (cuBLAS/cuDNN heuristics, the caching allocator and the GPU clocks settle), then each
timed step sits between torch.cuda.synchronize calls, with Python's garbage collector off; the
median step time is reported. With --nvtx the step is annotated with NVTX ranges
forward/backward/optimizer (the ranges kp measures metrics on).
"""

import argparse
import gc
import json
import statistics
import time

WARMUP_MIN_S = 1.0


def make_transformer_step(nvtx=False):
    """The model, optimizer and data of the workload; returns step(), one training step."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=1024, nhead=16, dim_feedforward=4096,
                                       dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randn(16, 512, 1024, device="cuda")

    def push(name):
        if nvtx:
            torch.cuda.nvtx.range_push(name)

    def pop():
        if nvtx:
            torch.cuda.nvtx.range_pop()

    def step():
        optimizer.zero_grad(set_to_none=True)
        push("forward")
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = model(data).float().pow(2).mean()
        pop()
        push("backward")
        loss.backward()
        pop()
        push("optimizer")
        optimizer.step()
        pop()

    return step


def run_transformer(steps=30, warmup=10, nvtx=False, profiler=None):
    """Times `steps` training steps; `profiler` (a started-on-enter context) wraps them."""
    import torch

    step = make_transformer_step(nvtx)
    warmup_start = time.perf_counter()
    warmup_steps = 0
    while warmup_steps < warmup or time.perf_counter() - warmup_start < WARMUP_MIN_S:
        step()
        torch.cuda.synchronize()
        warmup_steps += 1
    warmup_s = time.perf_counter() - warmup_start
    gc.collect()
    gc.disable()  # a collection inside a timed step is noise of the interpreter, not the tool
    times_ms = []
    context = profiler if profiler is not None else _NullContext()
    with context:
        if profiler is not None:
            step()  # the profiler's own first-use costs stay out of the timing
            torch.cuda.synchronize()
        for _ in range(steps):
            start = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times_ms.append((time.perf_counter() - start) * 1e3)
        exit_start = time.perf_counter()
    exit_s = time.perf_counter() - exit_start if profiler is not None else 0.0
    gc.enable()
    return {
        "workload": "transformer",
        "steps": steps,
        "warmup_steps": warmup_steps,
        "warmup_s": round(warmup_s, 3),
        "nvtx": nvtx,
        "step_ms": round(statistics.median(times_ms), 4),
        "step_ms_all": [round(t, 4) for t in times_ms],
        "profiler_exit_s": round(exit_s, 4),
    }


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--nvtx", action="store_true")
    args = parser.parse_args()
    print(json.dumps(run_transformer(args.steps, args.warmup, args.nvtx)), flush=True)


if __name__ == "__main__":
    main()
