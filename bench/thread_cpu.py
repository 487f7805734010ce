"""Which thread a tool's CPU cost is on: kp, its variants and the bare CUPTI floor on the
PyTorch step loop, each run traced from start to end, each thread's CPU time over the timed steps.

    python3 bench/thread_cpu.py DIST [--runs N] [--steps N] [--workloads train,tiny]
                                     [--tools none,floor,kp,...] [--cpus 2-5] [--out DIR]

Each run is one process of bench/workloads/step_loop.py --thread-cpu (tools in a rotating order
per round, pinned to --cpus). Per workload and tool the table gives medians over runs, per step:
the wall time, the whole process's CPU time, and the CPU time of each group of threads (threads
grouped by name: the stepping thread is "python3", PyTorch's backward thread "pt_autograd_0",
CUPTI's and kp's threads carry their own names). A tool's added CPU per step is its row less the
`none` row. Raw lines go to thread_cpu_raw.jsonl under --out.

Tools:
  none          no tool
  floor         bench/floor with kp's default kinds
                (KPFLOOR_KINDS=kernel,nvtx,cb_api,lazy_copy,driver_only)
  floor_kernel  bench/floor with kernel records only
  kp            kptrace run with kp's defaults
  kp_kernel     kp with kernel records only (--activities kernel)
  kp_flush10s   kp with KP_FLUSH_MS=10000 (a chunk written every 10 s instead of every 1 s)
  kp_raw        kp with KP_COMPRESSION=none
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from run_bench import FLOOR_KINDS_OF_KP_DEFAULTS

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = ("none", "floor", "floor_kernel", "kp", "kp_kernel", "kp_flush10s", "kp_raw")


def command(args, work, workload, tool):
    """argv and environment of one run."""
    env = dict(os.environ)
    argv = [args.python, os.path.join(HERE, "workloads", "step_loop.py"), "--workload", workload,
            "--steps", str(args.steps), "--warmup-s", "1", "--thread-cpu"]
    if tool.startswith("floor"):
        lib = os.path.join(args.dist, "lib", "libkpfloor.so")
        env.update(CUDA_INJECTION64_PATH=lib, NVTX_INJECTION64_PATH=lib,
                   KPFLOOR_KINDS=FLOOR_KINDS_OF_KP_DEFAULTS if tool == "floor" else "kernel")
    elif tool.startswith("kp"):
        extra = {"kp_kernel": ["--activities", "kernel"], "kp_flush10s": ["--flush-ms", "10000"],
                 "kp_raw": ["--compression", "none"]}.get(tool, [])
        argv = [os.path.join(args.dist, "bin", "kptrace"), "run", "-o",
                os.path.join(work, "t.kptrace"), "--force", "--log", "quiet"] + extra + ["--"] + argv
    return ["taskset", "-c", args.cpus] + argv, env


def group(thread):
    """A thread's group: its name without the tid, digits of numbered names folded."""
    name = thread.rsplit("/", 1)[0]
    return re.sub(r"\d+$", "#", name) if not name.startswith("python") else name


def run_one(args, work, workload, tool, round_index):
    argv, env = command(args, work, workload, tool)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.run_timeout)
    row = {"round": round_index, "workload": workload, "tool": tool, "rc": proc.returncode}
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{") and "step_us" in l]
    if proc.returncode != 0 or not lines:
        row["error"] = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return row
    data = json.loads(lines[-1])
    steps = len(data["step_us"])
    groups = {}
    for thread, seconds in data.get("thread_cpu_s", {}).items():
        groups[group(thread)] = groups.get(group(thread), 0.0) + seconds
    row.update(step_us=statistics.median(data["step_us"]),
               process_cpu_us=sum(data["step_process_cpu_us"]) / steps,
               groups_us={g: s * 1e6 / steps for g, s in groups.items()},
               threads=data.get("thread_cpu_s", {}))
    return row


def table(rows):
    ok = [r for r in rows if "error" not in r]
    out = ["Per step, medians over runs (min..max): wall time, the process's CPU time, and each "
           "thread group's CPU time (us); groups under 1 % of the process's CPU in every run "
           "are left out.", ""]
    for w in sorted({r["workload"] for r in ok}):
        mine = [r for r in ok if r["workload"] == w]
        total = {}
        for r in mine:
            for g, v in r["groups_us"].items():
                if v > 0.01 * r["process_cpu_us"]:
                    total[g] = True
        groups = sorted(total)
        out += ["| %s | runs | wall | process CPU | %s |" % (w, " | ".join(groups)),
                "|---|---|---|---|%s" % ("---|" * len(groups))]
        for t in TOOLS:
            rs = [r for r in mine if r["tool"] == t]
            if not rs:
                continue

            def cell(values):
                return "%.0f (%.0f..%.0f)" % (statistics.median(values), min(values),
                                              max(values))
            cells = [cell([r["step_us"] for r in rs]), cell([r["process_cpu_us"] for r in rs])]
            cells += [cell([r["groups_us"].get(g, 0.0) for r in rs]) for g in groups]
            out.append("| %s | %d | %s |" % (t, len(rs), " | ".join(cells)))
        out.append("")
    errors = [r for r in rows if "error" in r]
    out += ["- %s/%s round %d: rc %s, %s" % (r["workload"], r["tool"], r["round"], r["rc"],
                                              r["error"]) for r in errors]
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dist", help="kp install prefix (bin/kptrace, lib/libkpfloor.so)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--workloads", default="train")
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--cpus", default=os.environ.get("KP_BENCH_CPUS", "2-5"))
    parser.add_argument("--python", default=sys.executable or "python3")
    parser.add_argument("--budget-s", type=int, default=400)
    parser.add_argument("--run-timeout", type=int, default=120)
    parser.add_argument("--out", default=os.environ.get("OUT") or os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    args.dist = os.path.abspath(args.dist)
    tools = [t for t in args.tools.split(",") if t]
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        parser.error("unknown tool %s (known: %s)" % (bad[0], ", ".join(TOOLS)))
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kp-thread-cpu-")
    rows = []
    start = time.time()
    with open(os.path.join(args.out, "thread_cpu_raw.jsonl"), "w") as raw:
        for i in range(1, args.runs + 1):
            if i > 1 and (time.time() - start) * i / (i - 1) > args.budget_s:
                print("stopped after %d of %d rounds (--budget-s %d)" % (i - 1, args.runs,
                                                                       args.budget_s))
                break
            order = tools[(i - 1) % len(tools):] + tools[:(i - 1) % len(tools)]
            for w in [w for w in args.workloads.split(",") if w]:
                for t in order:
                    row = run_one(args, work, w, t, i)
                    rows.append(row)
                    raw.write(json.dumps(row) + "\n")
                    raw.flush()
    text = table(rows)
    with open(os.path.join(args.out, "thread_cpu.md"), "w") as md:
        md.write("# CPU time by thread (bench/thread_cpu.py)\n\n%s\n" % text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
