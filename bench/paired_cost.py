"""Within-process cost of kp, the bare CUPTI floor and torch.profiler (bench/paired_cost.sh).

Each run is one process of 90 timed steps, each an NVTX range "step"; a tool traces steps
30-59 only and the process's own untraced steps 0-29 are its baseline. A tool's added cost in a
run is median(steps 30-59) - median(steps 0-29); steps 60-89 ("after") show whether any cost
outlives the window. Comparing steps of one process removes the process-to-process spread of
this kind of machine (on the H200 VM the same program's untraced time differed by up to 27-73 %
between processes of one pass), which swamps differences of a few percent between separate
processes (bench/run.sh).

Tools (each run pinned to the same CPUs, tools interleaved in a rotating order per pass):
  none         no tool: the bias of the three segments (should be ~0)
  kp           kptrace run --capture-schedule step:30,0,30,1 (kp's default kinds inside the
               window; CUPTI detached after it)
  kp_kernel    the same with kernel records only (--activities kernel): kp's own cost on top of
               floor_kernel's, without the other kinds
  floor        bench/floor with kp's default kinds (KPFLOOR_KINDS=kernel,nvtx,cb_api,lazy_copy),
               KPFLOOR_WINDOW=30,30, KPFLOOR_DETACH=1
  floor_kernel the same with kernel records only: what every CUPTI kernel tracer pays
  torch_prof   torch.profiler (CUDA activities) entered before step 30, left after step 59,
               outside the timed steps (PyTorch workloads only)
Workloads: launch (bench/workloads/launch_loop.cu, 3,000 empty-kernel launches per step), tiny
(250 tiny PyTorch ops per step), train (one transformer training step per step).

--segment N makes each of the three parts N steps long (default 30): the training step's own
step-to-step spread needs more steps per part than the launch loop's.

Besides wall time, each step's CPU time (the stepping thread's and the whole process's) gives a
second table: where the spread of wall time is time the thread did not run, CPU time spreads
less; the process's CPU time also counts a tool's other threads. (A step that waits on the GPU
spins in cudaDeviceSynchronize by default, so its CPU time includes the wait.)

Writes paired_cost.md and paired_cost_raw.jsonl under --out; prints the tables after each pass.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from run_bench import FLOOR_KINDS_OF_KP_DEFAULTS  # bench/floor's kinds for kp's defaults

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 90
FIRST, COUNT = 30, 30
TOOLS = ("none", "kp", "kp_kernel", "floor", "floor_kernel", "torch_prof")
WORKLOADS = ("launch", "tiny", "train")
UNITS = {"launch": ("us/launch", 3000), "tiny": ("us/iter", 50), "train": ("ms/step", 1e-3)}


def set_segment(steps):
    """Each of the three parts (before, inside, after the window) `steps` steps long."""
    global STEPS, FIRST, COUNT
    STEPS, FIRST, COUNT = 3 * steps, steps, steps


def command(args, work, workload, tool):
    """argv and environment of one run; None where the tool does not apply."""
    env = dict(os.environ)
    if workload == "launch":
        argv = [os.path.join(work, "launch_loop"), "--launches", str(3000 * STEPS), "--copies",
                "0", "--steps", str(STEPS), "--warmup-s", "1", "--step-times"]
    else:
        argv = [args.python, os.path.join(HERE, "workloads", "step_loop.py"), "--workload",
                workload, "--steps", str(STEPS), "--warmup-s", "1"]
    if tool == "torch_prof":
        if workload == "launch":
            return None
        argv += ["--torch-profiler-window", "%d,%d" % (FIRST, COUNT)]
    elif tool in ("kp", "kp_kernel"):
        kinds = ["--activities", "kernel"] if tool == "kp_kernel" else []
        argv = [os.path.join(args.dist, "bin", "kptrace"), "run", "-o",
                os.path.join(work, "%s.kptrace" % workload), "--force", "--log", "quiet",
                "--capture-schedule", "step:%d,0,%d,1" % (FIRST, COUNT)] + kinds + ["--"] + argv
    elif tool in ("floor", "floor_kernel"):
        floor_lib = os.path.join(args.dist, "lib", "libkpfloor.so")
        env.update(CUDA_INJECTION64_PATH=floor_lib, NVTX_INJECTION64_PATH=floor_lib,
                   KPFLOOR_KINDS=FLOOR_KINDS_OF_KP_DEFAULTS if tool == "floor" else "kernel",
                   KPFLOOR_WINDOW="%d,%d" % (FIRST, COUNT), KPFLOOR_DETACH="1")
    return ["taskset", "-c", args.cpus] + argv, env


def segments(step_us):
    """Median step time of before, inside and after the window."""
    m = statistics.median
    return (m(step_us[:FIRST]), m(step_us[FIRST:FIRST + COUNT]), m(step_us[FIRST + COUNT:]))


def kp_kernels(args, work, workload):
    """Kernels in kp's trace of the last run (0 when kp traced nothing)."""
    out = subprocess.run([os.path.join(args.dist, "bin", "kptrace"), "info",
                          os.path.join(work, "%s.kptrace" % workload)],
                         capture_output=True, text=True, timeout=60).stdout
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "kernels":
            try:
                return int(words[1].replace(",", ""))
            except ValueError:
                return 0
    return 0


def run_one(args, work, workload, tool, pass_index):
    built = command(args, work, workload, tool)
    if built is None:
        return None
    argv, env = built
    started = time.time()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=args.run_timeout)
    row = {"pass": pass_index, "workload": workload, "tool": tool, "rc": proc.returncode,
           "seconds": round(time.time() - started, 2)}
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{") and "step_us" in l]
    if proc.returncode != 0 or not lines:
        row["error"] = (proc.stderr.strip().splitlines() or ["no step times"])[-1][:300]
        return row
    data = json.loads(lines[-1])
    step_us = data["step_us"]
    if len(step_us) != STEPS:
        row["error"] = "%d step times, expected %d" % (len(step_us), STEPS)
        return row
    before, inside, after = segments(step_us)
    row.update(before=before, inside=inside, after=after, step_us=step_us)
    for key, measure in CPU_MEASURES:
        series = data.get(key)
        if series and len(series) == STEPS:
            row[measure] = dict(zip(("before", "inside", "after"), segments(series)))
            row[key] = series
    if tool in ("kp", "kp_kernel"):
        row["kp_kernels"] = kp_kernels(args, work, workload)
    floor_lines = [l for l in proc.stderr.splitlines() if l.startswith("kpfloor: ")]
    if floor_lines:
        row["floor"] = json.loads(floor_lines[-1][len("kpfloor: "):])
    return row


# Per-step CPU time the workloads also print: the stepping thread's (where a tool's callbacks
# run) and the whole process's (its other threads too: CUPTI's, kp's writer).
CPU_MEASURES = (("step_cpu_us", "thread_cpu"), ("step_process_cpu_us", "process_cpu"))


def per_unit(workload, us_per_step):
    unit, per = UNITS[workload]
    return us_per_step / per if workload != "train" else us_per_step * per


def table(rows):
    """Markdown: per workload and tool, medians over runs of each run's own added cost."""
    ok = [r for r in rows if "inside" in r]
    out = ["Each run: median of its steps %d-%d (traced) minus median of its steps 0-%d "
           "(untraced, the baseline); after = steps %d-%d minus the baseline. Medians over runs, "
           "min..max in brackets." % (FIRST, FIRST + COUNT - 1, FIRST - 1, FIRST + COUNT,
                                       STEPS - 1), "",
           "| workload | tool | runs | baseline | added inside | added, % of baseline "
           "| after the window | kernels traced |",
           "|---|---|---|---|---|---|---|---|"]
    added = {}
    for w in WORKLOADS:
        unit = UNITS[w][0]
        for t in TOOLS:
            mine = [r for r in ok if r["workload"] == w and r["tool"] == t]
            if not mine:
                continue
            base = [per_unit(w, r["before"]) for r in mine]
            add = [per_unit(w, r["inside"] - r["before"]) for r in mine]
            pct = [(r["inside"] - r["before"]) / r["before"] * 100 for r in mine]
            aft = [per_unit(w, r["after"] - r["before"]) for r in mine]
            added[(w, t)] = (statistics.median(add), statistics.median(pct))
            kernels = [r.get("kp_kernels") for r in mine if r.get("kp_kernels") is not None]
            floor_k = [r["floor"].get("kernels") for r in mine if "floor" in r]
            traced = ("%d..%d" % (min(kernels), max(kernels)) if kernels else
                      "%d..%d" % (min(floor_k), max(floor_k)) if floor_k else "–")
            out.append("| %s | %s | %d | %.4g %s | %+.4g [%+.4g..%+.4g] | %+.2f %% "
                       "[%+.2f..%+.2f] | %+.4g [%+.4g..%+.4g] | %s |" % (
                           w, t, len(mine), statistics.median(base), unit,
                           statistics.median(add), min(add), max(add), statistics.median(pct),
                           min(pct), max(pct), statistics.median(aft), min(aft), max(aft),
                           traced))
    out += ["", "| workload | kp / floor (target <= 1.05) | kp / torch.profiler (target <= 0.5) "
            "| floor / torch.profiler | floor_kernel / torch.profiler "
            "| kp_kernel / floor_kernel | kp, % over no tool |",
            "|---|---|---|---|---|---|---|"]

    def ratio(w, a, b):
        if (w, a) not in added or (w, b) not in added or added[(w, b)][0] <= 0:
            return "–"
        return "%.3f" % (added[(w, a)][0] / added[(w, b)][0])

    for w in WORKLOADS:
        if (w, "kp") not in added:
            continue
        out.append("| %s | %s | %s | %s | %s | %s | %+.2f %% |" % (
            w, ratio(w, "kp", "floor"), ratio(w, "kp", "torch_prof"),
            ratio(w, "floor", "torch_prof"), ratio(w, "floor_kernel", "torch_prof"),
            ratio(w, "kp_kernel", "floor_kernel"), added[(w, "kp")][1]))
    errors = [r for r in rows if "error" in r]
    if errors:
        out += ["", "Failed runs:"] + ["- %s/%s pass %d: rc %s, %s" % (
            r["workload"], r["tool"], r["pass"], r["rc"], r["error"]) for r in errors]
    return "\n".join(out)


def cpu_table(rows):
    """Markdown: the added CPU time per step (thread, process) per workload and tool, and the
    kp / floor ratios by each measure."""
    ok = [r for r in rows if "inside" in r]
    out = ["Added CPU time (median over runs of each run's traced minus untraced steps; "
           "min..max in brackets), per %s:" % ", ".join(
               "%s (%s)" % (UNITS[w][0], w) for w in WORKLOADS), "",
           "| workload | tool | runs | thread CPU added | process CPU added |",
           "|---|---|---|---|---|"]
    added = {}
    for w in WORKLOADS:
        for t in TOOLS:
            mine = [r for r in ok if r["workload"] == w and r["tool"] == t]
            cells = []
            runs = 0
            for _, measure in CPU_MEASURES:
                vals = [per_unit(w, r[measure]["inside"] - r[measure]["before"])
                        for r in mine if measure in r]
                if not vals:
                    cells.append("–")
                    continue
                runs = max(runs, len(vals))
                added[(w, t, measure)] = statistics.median(vals)
                cells.append("%+.4g [%+.4g..%+.4g]" % (statistics.median(vals), min(vals),
                                                       max(vals)))
            if runs > 0:
                out.append("| %s | %s | %d | %s | %s |" % (w, t, runs, cells[0], cells[1]))
    out += ["", "| workload | kp / floor, thread CPU | kp / floor, process CPU "
            "| kp_kernel / floor_kernel, thread CPU | kp_kernel / floor_kernel, process CPU |",
            "|---|---|---|---|---|"]
    for w in WORKLOADS:
        cells = []
        for a, b in (("kp", "floor"), ("kp_kernel", "floor_kernel")):
            for _, measure in CPU_MEASURES:
                x, y = added.get((w, a, measure)), added.get((w, b, measure))
                cells.append("%.3f" % (x / y) if x is not None and y and y > 0 else "–")
        if any(c != "–" for c in cells):
            out.append("| %s | %s |" % (w, " | ".join(cells)))
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dist", help="kp install prefix (bin/kptrace, lib/libkpinject.so)")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--budget-s", type=int, default=420,
                        help="start no pass that would end past this many seconds")
    parser.add_argument("--cpus", default=os.environ.get("KP_BENCH_CPUS", "2-5"))
    parser.add_argument("--python", default=sys.executable or "python3")
    parser.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    parser.add_argument("--arch", default="sm_90", help="nvcc -arch for the launch loop")
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument("--tools", default=",".join(TOOLS))
    parser.add_argument("--segment", type=int, default=30,
                        help="steps before, inside and after the window (each)")
    parser.add_argument("--run-timeout", type=int, default=120)
    parser.add_argument("--out", default=os.environ.get("OUT") or os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    args.dist = os.path.abspath(args.dist)
    if args.segment < 5:
        parser.error("--segment must be at least 5 steps")
    set_segment(args.segment)
    workloads = [w for w in args.workloads.split(",") if w]
    tools = [t for t in args.tools.split(",") if t]
    for name, known in ((workloads, WORKLOADS), (tools, TOOLS)):
        bad = [x for x in name if x not in known]
        if bad:
            parser.error("unknown %s (known: %s)" % (bad[0], ", ".join(known)))
    os.makedirs(args.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="kp-paired-")
    if "launch" in workloads:
        build = subprocess.run([args.nvcc, "-arch=" + args.arch, "-O2", "-o",
                                os.path.join(work, "launch_loop"),
                                os.path.join(HERE, "workloads", "launch_loop.cu")],
                               capture_output=True, text=True)
        if build.returncode != 0:
            print("paired_cost: building launch_loop failed:\n" + build.stderr, file=sys.stderr)
            return 1
    raw_path = os.path.join(args.out, "paired_cost_raw.jsonl")
    md_path = os.path.join(args.out, "paired_cost.md")
    rows = []
    start = time.time()
    pass_s = 0.0
    header = ("paired cost: %s, CPUs %s, %d step(s) per run, window %d-%d" % (
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), args.cpus, STEPS, FIRST,
        FIRST + COUNT - 1))
    print(header, flush=True)
    with open(raw_path, "w") as raw:
        for p in range(1, args.passes + 1):
            if p > 1 and time.time() - start + pass_s > args.budget_s:
                print("stopped after %d of %d passes (--budget-s %d)" % (p - 1, args.passes,
                                                                       args.budget_s))
                break
            pass_start = time.time()
            order = tools[(p - 1) % len(tools):] + tools[:(p - 1) % len(tools)]
            if p % 2 == 0:
                order.reverse()
            for w in workloads:
                for t in order:
                    row = run_one(args, work, w, t, p)
                    if row is None:
                        continue
                    rows.append(row)
                    raw.write(json.dumps(row) + "\n")
                    raw.flush()
                    if "error" in row:
                        print("  %s/%s: FAILED %s" % (w, t, row["error"]), flush=True)
                    else:
                        print("  %s/%s: before %.0f inside %.0f after %.0f us/step%s" % (
                            w, t, row["before"], row["inside"], row["after"],
                            " (kp kernels %d)" % row["kp_kernels"] if "kp_kernels" in row
                            else ""), flush=True)
            pass_s = time.time() - pass_start
            print("--- after pass %d (%.0f s)\n%s\n\n%s" % (p, pass_s, table(rows), cpu_table(rows)),
                  flush=True)
    with open(md_path, "w") as md:
        md.write("# Paired cost (bench/paired_cost.sh)\n\n%s\n\n%s\n\n%s\n" % (
            header, table(rows), cpu_table(rows)))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
