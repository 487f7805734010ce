"""Workload of bench/paired_cost.py: the benchmark's PyTorch workloads as a loop of timed steps.

Each step is an NVTX range "step" ended by torch.cuda.synchronize(), so a tool that traces only
some steps (kp's --capture-schedule, bench/floor's KPFLOOR_WINDOW, or torch.profiler here with
--torch-profiler-window) can be compared with the untraced steps of the same process.

--workload tiny: a step is 50 iterations of the tiny-op loop (five element-wise ops on 1024
elements, 250 kernel launches; bench/workloads/torch_tiny_ops.py). --workload train: a step is
one training step of the transformer (bench/workloads/torch_transformer.py).
--torch-profiler-window FIRST,COUNT: torch.profiler (CUDA activities only) is entered before
step FIRST and left after step FIRST+COUNT-1, outside the timed steps. FIRST,COUNT,PERIOD: the
same window again every PERIOD steps (a new profiler each time) until the last step.
--probes: after each step, outside its timing, two fixed pieces of work are timed: a pure-Python
loop that makes no CUDA call ("probe_cpu_us": how fast the machine runs the interpreter just
then) and one bf16 4096x4096 matrix product timed with CUDA events ("probe_gpu_us": how fast the
GPU runs just then). Step times can be read against them (bench/paired_cost.py): the speed of
this kind of machine changes over seconds (a fast and a ~1.6 x slower state), in processes with
and without a tool alike.
--blocking-sync: each step ends by waiting on a blocking-sync CUDA event instead of
torch.cuda.synchronize's spin, so the stepping thread's CPU time is its own work (Python,
dispatch, launches, a tool's callbacks), not the wait for the GPU.
--thread-cpu: "thread_cpu_s" gives each thread's CPU seconds over the timed steps (from
/proc/self/task, read before and after them), keyed "name/tid": which thread a tool's cost is on.
Prints one JSON line: {"workload", "step_us": [...], "step_cpu_us": [...] (the stepping thread's
CPU time), "step_process_cpu_us": [...] (all threads'), "profiled": [first, count] or [first,
count, period] or null} and, with --probes, "probe_cpu_us" and "probe_gpu_us"; with --thread-cpu,
"thread_cpu_s".
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
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (2, 3):
        raise argparse.ArgumentTypeError("FIRST,COUNT or FIRST,COUNT,PERIOD")
    first, count, period = values + [0] * (3 - len(values))
    if first < 0 or count < 1 or (len(values) == 3 and period <= count):
        raise argparse.ArgumentTypeError("FIRST >= 0, COUNT >= 1, PERIOD > COUNT")
    return first, count, period


def window_edges(window, s):
    """(opens, closes): whether the profiler window opens before step s and closes after it."""
    first, count, period = window
    if s < first:
        return False, False
    phase = (s - first) % period if period else s - first
    return phase == 0, phase == count - 1


PROBE_LOOP = 20000  # iterations of the CPU probe: ~1 ms of interpreter work on the H200 VM


def cpu_probe():
    """Microseconds a fixed pure-Python loop takes now (no CUDA call: no tool callback runs)."""
    start = time.perf_counter()
    total = 0
    for i in range(PROBE_LOOP):
        total += i * i
    elapsed = (time.perf_counter() - start) * 1e6
    if total < 0:  # never: keeps the loop's result used
        print(total)
    return elapsed


def make_gpu_probe():
    """A function returning the microseconds one fixed bf16 matrix product takes on the GPU now."""
    import torch

    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    begin = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)

    def probe():
        begin.record()
        torch.mm(a, b)
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e3

    return probe


def thread_cpu_seconds():
    """{"name/tid": CPU seconds so far} for every thread of this process."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open("/proc/self/task/%s/stat" % tid) as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out["%s/%s" % (name, tid)] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", choices=["tiny", "train"], required=True)
    parser.add_argument("--steps", type=int, default=90)
    parser.add_argument("--warmup-s", type=float, default=1.0,
                        help="untimed steps for at least this long first (clocks, allocator)")
    parser.add_argument("--torch-profiler-window", type=parse_window, default=None,
                        metavar="FIRST,COUNT[,PERIOD]")
    parser.add_argument("--probes", action="store_true",
                        help="time a fixed CPU and a fixed GPU piece of work after each step")
    parser.add_argument("--blocking-sync", action="store_true",
                        help="end each step waiting on a blocking-sync event, not spinning")
    parser.add_argument("--thread-cpu", action="store_true",
                        help="report each thread's CPU seconds over the timed steps")
    args = parser.parse_args()

    import torch

    if args.workload == "tiny":
        step = make_tiny_step()
    else:
        from torch_transformer import make_transformer_step

        step = make_transformer_step()
    if args.blocking_sync:
        done = torch.cuda.Event(blocking=True)

        def finish():
            done.record()
            done.synchronize()
    else:
        finish = torch.cuda.synchronize
    gpu_probe = make_gpu_probe() if args.probes else None
    warmup_start = time.perf_counter()
    warmup_steps = 0
    while warmup_steps < 5 or time.perf_counter() - warmup_start < args.warmup_s:
        step()
        finish()
        if gpu_probe is not None:
            cpu_probe()
            gpu_probe()
        warmup_steps += 1

    profiler = None
    window = args.torch_profiler_window
    gc.collect()
    gc.disable()  # a collection inside a timed step is the interpreter's noise, not the tool's
    step_us, step_cpu_us, step_process_cpu_us = [], [], []
    probe_cpu_us, probe_gpu_us = [], []
    threads_before = thread_cpu_seconds() if args.thread_cpu else None
    for s in range(args.steps):
        opens, closes = window_edges(window, s) if window is not None else (False, False)
        if opens:
            import torch.profiler as tp

            profiler = tp.profile(activities=[tp.ProfilerActivity.CUDA])
            profiler.__enter__()
        start = time.perf_counter()
        cpu_start, process_cpu_start = time.thread_time(), time.process_time()
        torch.cuda.nvtx.range_push("step")
        step()
        finish()
        torch.cuda.nvtx.range_pop()
        step_us.append((time.perf_counter() - start) * 1e6)
        step_cpu_us.append((time.thread_time() - cpu_start) * 1e6)
        step_process_cpu_us.append((time.process_time() - process_cpu_start) * 1e6)
        if gpu_probe is not None:
            probe_cpu_us.append(cpu_probe())
            probe_gpu_us.append(gpu_probe())
        if profiler is not None and closes:
            profiler.__exit__(None, None, None)
            profiler = None
    threads_after = thread_cpu_seconds() if args.thread_cpu else None
    if profiler is not None:
        profiler.__exit__(None, None, None)
    gc.enable()
    result = {"workload": args.workload, "warmup_steps": warmup_steps,
              "profiled": list(window[:2] if not window[2] else window) if window else None,
              "step_us": [round(v, 2) for v in step_us],
              "step_cpu_us": [round(v, 2) for v in step_cpu_us],
              "step_process_cpu_us": [round(v, 2) for v in step_process_cpu_us]}
    if threads_after is not None:
        result["thread_cpu_s"] = {k: round(v - threads_before.get(k, 0.0), 3)
                                  for k, v in sorted(threads_after.items())
                                  if v - threads_before.get(k, 0.0) > 0}
    if gpu_probe is not None:
        result["probe_cpu_us"] = [round(v, 2) for v in probe_cpu_us]
        result["probe_gpu_us"] = [round(v, 2) for v in probe_gpu_us]
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
