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
  floor        bench/floor with kp's default kinds (KPFLOOR_KINDS=kernel,nvtx,cb_api,lazy_copy,
               driver_only), KPFLOOR_WINDOW=30,30, KPFLOOR_DETACH=1
  floor_kernel the same with kernel records only: what every CUPTI kernel tracer pays
  torch_prof   torch.profiler (CUDA activities) entered before step 30, left after step 59,
               outside the timed steps (PyTorch workloads only)
  floor_NAME   --floor-variant floor_NAME=KINDS: the floor with KPFLOOR_KINDS=KINDS (e.g.
               floor_rt=kernel,cb_launch_runtime), windowed like the floor
  kp_NAME      --kp-variant kp_NAME=KP_VAR=VALUE[,KP_VAR=VALUE...]: kp as `kp` with these
               settings in its environment (e.g. kp_noflush=KP_FLUSH_MS=600000; a value may
               be a list: kp_kn=KP_ACTIVITIES=kernel,nvtx,KP_FLUSH_MS=5000)
  kp_apart     --kp-apart CPUS: kp as `kp`, its own threads (named kp-*: the encoder and the
               others) moved onto CPUS, outside --cpus, as they start: what kp's threads cost
               the workload's threads by sharing their CPUs (cores, caches) with them
Workloads: launch (bench/workloads/launch_loop.cu, 3,000 empty-kernel launches per step), tiny
(250 tiny PyTorch ops per step), train (one transformer training step per step).

--segment N makes each of the three parts N steps long (default 30): the training step's own
step-to-step spread needs more steps per part than the launch loop's.

--alternate BLOCK [--cycles C] [--lead L]: instead of one window, every tool is switched on and
off in turn, blocks of BLOCK steps: L untraced lead blocks (default 3), then C times (default
20) a traced and an untraced block (kp: --capture-schedule step:BLOCK,0,BLOCK,0,(L-1)*BLOCK; the
floor: KPFLOOR_WINDOW=L*BLOCK,BLOCK,2*BLOCK; torch.profiler entered and left around each traced
block). The first and last step of each block are left out (a tool switching on or off runs in
them). Each traced block is read against the mean of the untraced blocks either side of it (a
cycle); a run's added cost is the median over its cycles. The CPU of the H200 VM runs for
seconds at a time in a fast state or one ~1.6 x slower, with or without a tool; one window and
its baseline often fall in different states, a cycle (three blocks) rarely does, and the median
over cycles drops those that do. CUPTI stays attached between blocks, so the cycles compare a
tool on with itself attached but off; the untraced blocks after the first traced one against
the lead blocks give what it leaves on while off (with --probes, from the steps taken in the
machine's fast state only), and the two summed, less no tool's own reading, its cost against no
tool.

Besides wall time, each step's CPU time (the stepping thread's and the whole process's) gives a
second table: where the spread of wall time is time the thread did not run, CPU time spreads
less; the process's CPU time also counts a tool's other threads. (A step that waits on the GPU
spins in cudaDeviceSynchronize by default, so its CPU time includes the wait.)

--probes (PyTorch workloads): after each step, outside its timing, the workload times a fixed
pure-Python loop and a fixed GPU matrix product (bench/workloads/step_loop.py). The speed of this
kind of machine changes over seconds (a fast and a ~1.6 x slower state), with and without a
tool, which is most of the spread between runs; a table reads each step against the probes
taken around it (step time x the run's median probe / the median of the probes of the 5 steps
around it), so that drift common to the step and the probe cancels, and another keeps only the
steps taken in the fast state. --blocking-sync: steps end on a blocking-sync
event, so the stepping thread's CPU time excludes the wait for the GPU.

Writes paired_cost.md and paired_cost_raw.jsonl under --out; prints the tables after each pass.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from run_bench import FLOOR_KINDS_OF_KP_DEFAULTS  # bench/floor's kinds for kp's defaults
from run_bench import parse_cpu_list  # '2-5,8' -> [2, 3, 4, 5, 8]
from run_bench import tree_threads  # (pid, tid) of a process tree's threads, from /proc

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 90
FIRST, COUNT = 30, 30
TOOLS = ("none", "kp", "kp_kernel", "floor", "floor_kernel", "torch_prof")
# The floor tools' KPFLOOR_KINDS; --floor-variant adds to it (and to TOOLS).
FLOOR_KINDS = {"floor": FLOOR_KINDS_OF_KP_DEFAULTS, "floor_kernel": "kernel"}
# --kp-variant tools: kp with extra KP_* settings in its environment.
KP_SETTINGS = {}
WORKLOADS = ("launch", "tiny", "train")
UNITS = {"launch": ("us/launch", 3000), "tiny": ("us/iter", 50), "train": ("ms/step", 1e-3)}


def is_kp(tool):
    """Whether `tool` runs kp (under kptrace run, its trace's kernels counted)."""
    return tool in ("kp", "kp_kernel", "kp_apart") or tool in KP_SETTINGS


APART_CPUS = None  # --kp-apart: the CPUs kp_apart's own threads are moved onto


def move_kp_threads(pid, cpus, moved):
    """Pins each thread named kp-* (kp's own: encoder, capture control, ...) of pid's process
    tree onto `cpus`, once; `moved` holds the thread ids already moved. Returns how many it
    moved this time."""
    count = 0
    for p, tid in tree_threads(pid):
        if tid in moved:
            continue
        try:
            with open("/proc/%d/task/%d/comm" % (p, tid)) as f:
                name = f.read().strip()
            if name.startswith("kp-"):
                os.sched_setaffinity(tid, cpus)
                moved.add(tid)
                count += 1
        except OSError:
            pass  # the thread ended
    return count


def run_moving_kp_threads(argv, env, timeout, cpus):
    """subprocess.run(argv) while another thread (itself on `cpus`) moves the run's kp-*
    threads onto `cpus` as they appear (every 5 ms). Returns (CompletedProcess, threads moved)."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    moved, done = set(), threading.Event()

    def mover():
        os.sched_setaffinity(0, cpus)  # this thread only: off the workload's CPUs
        while not done.wait(0.005):
            move_kp_threads(proc.pid, cpus, moved)

    watcher = threading.Thread(target=mover, daemon=True)
    watcher.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        done.set()
        watcher.join()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), len(moved)


ALTERNATE = 0  # --alternate: steps per block (0: one window)
LEAD = 0  # --alternate: untraced blocks before the first traced one
EDGE = 1  # steps left out at each end of a block (a tool switching on or off runs in them)


def set_segment(steps):
    """Each of the three parts (before, inside, after the window) `steps` steps long."""
    global STEPS, FIRST, COUNT, ALTERNATE, LEAD
    STEPS, FIRST, COUNT, ALTERNATE, LEAD = 3 * steps, steps, steps, 0, 0


def set_alternate(block, cycles, lead=3):
    """Blocks of `block` steps: `lead` untraced ones (before any tool switched anything on),
    then `cycles` times a traced and an untraced one."""
    global STEPS, FIRST, COUNT, ALTERNATE, LEAD
    STEPS, FIRST, COUNT = block * (lead + 2 * cycles), block * lead, block
    ALTERNATE, LEAD = block, lead


def blocks(steps=None, block=None, lead=None):
    """(first step, end step, traced) of each block, in order; edges left out. By default the
    run's set-up (set_alternate); a recorded row's own with its steps, block and lead."""
    steps, block = steps or STEPS, block or ALTERNATE
    lead = LEAD if lead is None else lead
    return [(b + EDGE, b + block - EDGE, b // block >= lead and (b // block - lead) % 2 == 0)
            for b in range(0, steps, block)]


def cycle_costs(series):
    """--alternate: each traced block's median over the mean of the medians of the untraced
    blocks either side of it, in % minus 100: a drift of the machine slower than two blocks
    cancels in each."""
    m = statistics.median
    meds = [(m(series[a:b]), traced) for a, b, traced in blocks()]
    return [(meds[k][0] / ((meds[k - 1][0] + meds[k + 1][0]) / 2) - 1) * 100
            for k in range(LEAD, len(meds) - 1, 2)]


def residual_cost(series, keep=None, block=None, lead=None):
    """--alternate: the untraced blocks after the first traced one against the lead blocks
    (before any tool switched anything on), in % minus 100: what a tool leaves behind while it
    is attached but off (CUPTI is not detached between windows), which the cycles do not see.
    `keep`: only the steps of this set count (fast_steps); None where the lead or the later
    blocks keep fewer than FAST_MIN_STEPS of them. `block`, `lead`: a recorded run's (blocks())."""
    m = statistics.median
    lead = LEAD if lead is None else lead
    parts = blocks(len(series), block, lead)
    first = [series[i] for a, b, _ in parts[:lead] for i in range(a, b)
             if keep is None or i in keep]
    later = [series[i] for a, b, traced in parts[lead + 1:] if not traced for i in range(a, b)
             if keep is None or i in keep]
    if keep is not None and min(len(first), len(later)) < FAST_MIN_STEPS:
        return None
    return (m(later) / m(first) - 1) * 100


def schedule():
    """kp's --capture-schedule for the steps the other tools trace: one window, or (--alternate)
    after LEAD untraced blocks (SKIP_FIRST plus the first WAIT) a traced block every other one."""
    if ALTERNATE:
        return "step:%d,0,%d,0,%d" % (ALTERNATE, ALTERNATE, (LEAD - 1) * ALTERNATE)
    return "step:%d,0,%d,1" % (FIRST, COUNT)


def command(args, work, workload, tool):
    """argv and environment of one run; None where the tool does not apply."""
    env = dict(os.environ)
    if workload == "launch":
        argv = [os.path.join(work, "launch_loop"), "--launches", str(3000 * STEPS), "--copies",
                "0", "--steps", str(STEPS), "--warmup-s", "1", "--step-times"]
    else:
        argv = [args.python, os.path.join(HERE, "workloads", "step_loop.py"), "--workload",
                workload, "--steps", str(STEPS), "--warmup-s", "1"]
        argv += ["--probes"] if args.probes else []
        argv += ["--blocking-sync"] if args.blocking_sync else []
    if tool == "torch_prof":
        if workload == "launch":
            return None
        argv += ["--torch-profiler-window", "%d,%d" % (FIRST, COUNT) if not ALTERNATE else
                 "%d,%d,%d" % (FIRST, COUNT, 2 * ALTERNATE)]
    elif is_kp(tool):
        env.update(KP_SETTINGS.get(tool, {}))
        kinds = ["--activities", "kernel"] if tool == "kp_kernel" else []
        argv = [os.path.join(args.dist, "bin", "kptrace"), "run", "-o",
                os.path.join(work, "%s.kptrace" % workload), "--force", "--log", "quiet",
                "--capture-schedule", schedule()] + kinds + ["--"] + argv
    elif tool in FLOOR_KINDS:
        floor_lib = os.path.join(args.dist, "lib", "libkpfloor.so")
        env.update(CUDA_INJECTION64_PATH=floor_lib, NVTX_INJECTION64_PATH=floor_lib,
                   KPFLOOR_KINDS=FLOOR_KINDS[tool])
        if ALTERNATE:
            env["KPFLOOR_WINDOW"] = "%d,%d,%d" % (FIRST, COUNT, 2 * ALTERNATE)
        else:
            env.update(KPFLOOR_WINDOW="%d,%d" % (FIRST, COUNT), KPFLOOR_DETACH="1")
    return ["taskset", "-c", args.cpus] + argv, env


def segments(step_us):
    """Median step time of before, inside and after the window. --alternate: of the untraced
    blocks, the traced blocks and the last block (edges left out)."""
    m = statistics.median
    if ALTERNATE:
        parts = blocks()
        return (m([t for a, b, traced in parts if not traced for t in step_us[a:b]]),
                m([t for a, b, traced in parts if traced for t in step_us[a:b]]),
                m(step_us[parts[-1][0]:parts[-1][1]]))
    return (m(step_us[:FIRST]), m(step_us[FIRST:FIRST + COUNT]), m(step_us[FIRST + COUNT:]))


def is_baseline(i):
    """Whether step i is an untraced step the added cost is measured from."""
    return in_block(i, traced=False) if ALTERNATE else i < FIRST


def is_traced(i):
    """Whether step i is a traced step the added cost is measured on."""
    return in_block(i, traced=True) if ALTERNATE else FIRST <= i < FIRST + COUNT


def in_block(i, traced):
    """--alternate: whether step i lies inside (edges left out) a block traced or not as asked."""
    a, b, is_traced_block = blocks()[i // ALTERNATE]
    return is_traced_block == traced and a <= i < b


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
    moved = None
    if tool == "kp_apart":
        proc, moved = run_moving_kp_threads(argv, env, args.run_timeout, APART_CPUS)
    else:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                              timeout=args.run_timeout)
    row = {"pass": pass_index, "workload": workload, "tool": tool, "rc": proc.returncode,
           "seconds": round(time.time() - started, 2)}
    if moved is not None:
        row["kp_threads_moved"] = moved
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
    if ALTERNATE:
        row.update(block=ALTERNATE, lead=LEAD, cycle_pct=[round(c, 3) for c in
                                                          cycle_costs(step_us)],
                   residual_pct=round(residual_cost(step_us), 3))
    for key, measure in CPU_MEASURES:
        series = data.get(key)
        if series and len(series) == STEPS:
            row[measure] = dict(zip(("before", "inside", "after"), segments(series)))
            row[key] = series
    for key in PROBES:
        series = data.get(key)
        if series and len(series) == STEPS:
            row[key] = series
    if is_kp(tool):
        row["kp_kernels"] = kp_kernels(args, work, workload)
    floor_lines = [l for l in proc.stderr.splitlines() if l.startswith("kpfloor: ")]
    if floor_lines:
        row["floor"] = json.loads(floor_lines[-1][len("kpfloor: "):])
    return row


# Per-step CPU time the workloads also print: the stepping thread's (where a tool's callbacks
# run) and the whole process's (its other threads too: CUPTI's, kp's writer).
CPU_MEASURES = (("step_cpu_us", "thread_cpu"), ("step_process_cpu_us", "process_cpu"))


# Per-step probe times the PyTorch workloads print with --probes.
PROBES = ("probe_cpu_us", "probe_gpu_us")
PROBE_SPAN = 2  # steps each side of a step whose probes give its speed


def by_tool(rows):
    """(workload, tool, its rows) for each workload and tool that has rows, in table order."""
    for w in WORKLOADS:
        for t in TOOLS:
            mine = [r for r in rows if r["workload"] == w and r["tool"] == t]
            if mine:
                yield w, t, mine


def probed_steps(row, probe):
    """The run's step times read against `probe`: each step x the run's median probe / the
    median probe of the steps within PROBE_SPAN of it."""
    steps, probes = row["step_us"], row[probe]
    whole = statistics.median(probes)
    out = []
    for i, t in enumerate(steps):
        near = probes[max(0, i - PROBE_SPAN):i + PROBE_SPAN + 1]
        out.append(t * whole / statistics.median(near))
    return out


def probe_table(rows):
    """Markdown: each tool's added cost in % of the untraced steps, from the raw step times and
    from the step times read against each probe; the spread of the `none` rows is each
    measure's noise. Empty when no run has probes."""
    ok = [r for r in rows if "inside" in r and all(p in r for p in PROBES)]
    if not ok:
        return ""
    measures = (("raw", None), ("against the CPU probe", "probe_cpu_us"),
                ("against the GPU probe", "probe_gpu_us"))
    out = ["Added cost in % of the untraced steps, per run read three ways: the raw step times, "
           "and the step times read against each probe (median [min..max] over runs; the "
           "`none` rows are the noise of each measure). Probe medians: CPU probe inside the "
           "window / before it, GPU probe the same (a tool that slowed the probes would show "
           "here).", "",
           "| workload | tool | runs | " + " | ".join(m for m, _ in measures) +
           " | CPU probe in/before | GPU probe in/before |",
           "|---|---|---|---|---|---|---|---|"]
    added = {}
    for w, t, mine in by_tool(ok):
        cells = []
        for name, probe in measures:
            pct = []
            for r in mine:
                series = r["step_us"] if probe is None else probed_steps(r, probe)
                before, inside, _ = segments(series)
                pct.append((inside - before) / before * 100)
            added[(w, t, name)] = statistics.median(pct)
            cells.append("%+.2f [%+.2f..%+.2f]" % (statistics.median(pct), min(pct),
                                                   max(pct)))
        for probe in PROBES:
            ratios = [segments(r[probe])[1] / segments(r[probe])[0] for r in mine]
            cells.append("%.3f" % statistics.median(ratios))
        out.append("| %s | %s | %d | %s |" % (w, t, len(mine), " | ".join(cells)))
    out += ["", "| workload | ratio | " + " | ".join(m for m, _ in measures) + " |",
            "|---|---|---|---|---|"]
    for w in WORKLOADS:
        for a, b in (("kp", "floor"), ("kp", "torch_prof"), ("kp_kernel", "floor_kernel")):
            cells = []
            for name, _ in measures:
                cells.append(ratio_cell(added.get((w, a, name)), added.get((w, b, name))))
            if any(c != "–" for c in cells):
                out.append("| %s | %s / %s | %s |" % (w, a, b, " | ".join(cells)))
    return "\n".join(out)


FAST_STATE = 1.15  # a step counts as fast when the CPU probes around it are within 15 % of
FAST_PERCENTILE = 5  # ... the 5th percentile of all the workload's CPU probes (its fast speed)
FAST_MIN_STEPS = 15  # fewest fast steps a segment needs for its run to count


def fast_steps(row, threshold):
    """Indices of the run's steps whose CPU probes (the one after the step and the one before
    it) are both under `threshold`: steps taken while the machine ran at its fast speed."""
    probes = row["probe_cpu_us"]
    return [i for i in range(len(row["step_us"]))
            if probes[i] < threshold and (i == 0 or probes[i - 1] < threshold)]


def fast_thresholds(rows):
    """Per workload with CPU probes: FAST_STATE x the FAST_PERCENTILE-th of all its runs' CPU
    probes (the machine's fast speed); a step under it was taken in the fast state."""
    out = {}
    for w in WORKLOADS:
        probes = sorted(p for r in rows if r["workload"] == w for p in r.get("probe_cpu_us", ()))
        if probes:
            out[w] = FAST_STATE * probes[len(probes) * FAST_PERCENTILE // 100]
    return out


def fast_state_table(rows):
    """Markdown: each tool's added cost from its fast-state steps only. The CPU of this kind of
    machine switches, over seconds and with or without a tool, between a fast state and one
    ~1.6 x slower (the pure-Python probe reads ~0.9 ms or ~1.5 ms); a run whose window falls in
    a different state than its baseline reads that switch as cost. Keeping, in each segment,
    the steps taken in the fast state compares like with like. Empty when no run has probes."""
    ok = [r for r in rows if "inside" in r and "probe_cpu_us" in r]
    if not ok:
        return ""
    out = ["Added cost in %% of the untraced steps from fast-state steps only: a step counts "
           "when the CPU probes before and after it are under %.2f x the %dth percentile of "
           "the workload's CPU probes; a run counts when each of its before and inside "
           "segments has at least %d such steps (median [min..max] over the runs that count)."
           % (FAST_STATE, FAST_PERCENTILE, FAST_MIN_STEPS), "",
           "| workload | tool | runs counted / run | fast steps before, inside (median) "
           "| added, % | kp / floor | kp / torch.profiler |",
           "|---|---|---|---|---|---|---|"]
    thresholds = fast_thresholds(ok)
    added, lines = {}, []
    for w, t, mine in by_tool(ok):
        pct, counts = [], []
        for r in mine:
            fast = fast_steps(r, thresholds[w])
            before = [r["step_us"][i] for i in fast if is_baseline(i)]
            inside = [r["step_us"][i] for i in fast if is_traced(i)]
            counts.append((len(before), len(inside)))
            if len(before) >= FAST_MIN_STEPS and len(inside) >= FAST_MIN_STEPS:
                b = statistics.median(before)
                pct.append((statistics.median(inside) - b) / b * 100)
        if pct:
            added[(w, t)] = statistics.median(pct)
        lines.append((w, t, "%d / %d" % (len(pct), len(mine)), "%d, %d" % (
            statistics.median(c[0] for c in counts), statistics.median(c[1] for c in counts)),
            spread(pct) if pct else "–"))
    for w, t, runs, steps, cell in lines:
        ratios = [ratio_cell(added.get((w, "kp")), added.get((w, other))) if t == "kp" else "–"
                  for other in ("floor", "torch_prof")]
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (w, t, runs, steps, cell,
                                                           ratios[0], ratios[1]))
    return "\n".join(out)


def cycle_summary(rows):
    """--alternate: (workload, tool) -> a tool's added cost in % over its runs, in table order:
    "per_run" (each run's median over its cycles), "pooled" (all cycles, sorted), "residual"
    (residual_cost of each run that gives one), "summed" (per such run the two summed), "runs",
    "residual_runs", "fast" (whether the residual is read from fast-state steps: runs with CPU
    probes, where a run counts when its lead and later blocks keep FAST_MIN_STEPS such steps),
    "kernels" (kp's kernels traced per run, where kp ran), and the medians over runs "cycles"
    (from the cycles), "left_on" (left on while off), "total" (the two summed) and "net" (total
    less no tool's total in the same workload, its drift from the lead blocks to the later
    ones: the cost against no tool; total itself where no tool did not run). The last three
    are None where no run gives a residual (or, for "net", where no tool's gives none)."""
    ok = [r for r in rows if r.get("cycle_pct")]
    thresholds = fast_thresholds(ok)
    out = {}
    for w, t, mine in by_tool(ok):
        per_run = [statistics.median(r["cycle_pct"]) for r in mine]
        fast = w in thresholds and all("probe_cpu_us" in r for r in mine)
        residual = [residual_cost(r["step_us"], set(fast_steps(r, thresholds[w])),
                                  r.get("block"), r.get("lead"))
                    if fast else r.get("residual_pct") for r in mine]
        summed = [c + r for c, r in zip(per_run, residual) if r is not None]
        residual = [r for r in residual if r is not None]
        out[(w, t)] = {"runs": len(mine), "per_run": per_run, "residual": residual,
                       "summed": summed, "residual_runs": len(residual), "fast": fast,
                       "kernels": [r["kp_kernels"] for r in mine if "kp_kernels" in r],
                       "pooled": sorted(c for r in mine for c in r["cycle_pct"]),
                       "cycles": statistics.median(per_run),
                       "left_on": statistics.median(residual) if residual else None,
                       "total": statistics.median(summed) if summed else None}
    for (w, t), c in out.items():
        none = out[(w, "none")]["total"] if (w, "none") in out else 0.0
        c["net"] = None if c["total"] is None or none is None else c["total"] - none
    return out


def cycle_table(rows):
    """Markdown (--alternate): each tool's added cost from its cycles (a traced block against
    the untraced blocks either side of it): per run the median over its cycles; median
    [min..max] over runs, and the median and quartiles of all cycles of all runs; what the tool
    leaves behind while off (residual_cost), and the two summed per run: the cost against no
    tool. Empty without cycles."""
    ok = [r for r in rows if r.get("cycle_pct")]
    if not ok:
        return ""
    out = ["Added cost in %% from cycles: each traced block of %d steps against the mean of the "
           "untraced blocks before and after it (%d step(s) at each end of a block left out), "
           "per run the median over its cycles. Left on while off: the untraced blocks after "
           "the first traced one against the %d untraced blocks before it (CUPTI stays attached "
           "between blocks); with CPU probes, from the steps taken in the machine's fast "
           "state only (a run counts when its lead and later blocks each keep %d such steps). "
           "Summed: the two per run (against no tool once no tool's own sum is subtracted, "
           "as the second ratio table does). Medians over runs [min..max]; `none` is the noise "
           "of each measure." % (ALTERNATE, EDGE, LEAD, FAST_MIN_STEPS), "",
           "| workload | tool | runs | cycles | added, from cycles | all cycles: median "
           "[25th..75th percentile] | left on while off | summed |",
           "|---|---|---|---|---|---|---|---|"]
    summary = cycle_summary(rows)
    for (w, t), c in summary.items():
        q = (statistics.quantiles(c["pooled"], n=4, method="inclusive")
             if len(c["pooled"]) >= 2 else c["pooled"] * 3)
        counted = (" (fast state, %d of %d runs)" % (c["residual_runs"], c["runs"])
                   if c["fast"] else "")
        out.append("| %s | %s | %d | %d | %s | %+.2f [%+.2f..%+.2f] | %s | %s |" % (
            w, t, c["runs"], len(c["pooled"]), spread(c["per_run"]),
            statistics.median(c["pooled"]), q[0], q[2], spread(c["residual"]) + counted,
            spread(c["summed"])))
    added = {k: c["cycles"] for k, c in summary.items()}
    net = {k: c["net"] for k, c in summary.items()}
    out += ["", "From the cycles (each tool switched on against itself attached but off):", ""]
    out += ratio_rows(added, {w: v for (w, t), v in added.items() if t == "kp"})
    out += ["", "Against no tool (cycles plus what is left on while off, less no tool's own "
            "reading of the two):", ""]
    out += ratio_rows(net, {w: v for (w, t), v in net.items() if t == "kp"})
    return "\n".join(out)


def spread(values):
    """'median [min..max]' of percentages; "–" for none."""
    if not values:
        return "–"
    return "%+.2f [%+.2f..%+.2f]" % (statistics.median(values), min(values), max(values))


def ratio_cell(x, y):
    """x / y to three places; "–" where either is missing or y is no cost at all."""
    return "%.3f" % (x / y) if x is not None and y is not None and y > 0 else "–"


def ratio_rows(added, kp_pct):
    """Markdown rows of the target ratios, per workload with a kp row: `added` maps (workload,
    tool) to a tool's added cost, `kp_pct` a workload to kp's added cost in %."""
    def ratio(w, a, b):
        return ratio_cell(added.get((w, a)), added.get((w, b)))

    out = ["| workload | kp / floor (target <= 1.05) | kp / torch.profiler (target <= 0.5) "
           "| floor / torch.profiler | floor_kernel / torch.profiler | kp_kernel / floor_kernel "
           "| kp, % added (target <= 3, training step) |", "|---|---|---|---|---|---|---|"]
    for w in WORKLOADS:
        if w in kp_pct:
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                w, ratio(w, "kp", "floor"), ratio(w, "kp", "torch_prof"),
                ratio(w, "floor", "torch_prof"), ratio(w, "floor_kernel", "torch_prof"),
                ratio(w, "kp_kernel", "floor_kernel"),
                "–" if kp_pct[w] is None else "%+.2f %%" % kp_pct[w]))
    return out


def per_unit(workload, us_per_step):
    unit, per = UNITS[workload]
    return us_per_step / per if workload != "train" else us_per_step * per


def table(rows):
    """Markdown: per workload and tool, medians over runs of each run's own added cost."""
    ok = [r for r in rows if "inside" in r]
    if ALTERNATE:
        what = ("Each run: median of its traced steps minus median of its untraced steps (blocks "
                "of %d steps in turn, %d step(s) at each end of a block left out); after = the "
                "last block minus the untraced median. Medians over runs, min..max in brackets."
                % (ALTERNATE, EDGE))
    else:
        what = ("Each run: median of its steps %d-%d (traced) minus median of its steps 0-%d "
                "(untraced, the baseline); after = steps %d-%d minus the baseline. Medians over "
                "runs, min..max in brackets." % (FIRST, FIRST + COUNT - 1, FIRST - 1,
                                                 FIRST + COUNT, STEPS - 1))
    out = [what, "",
           "| workload | tool | runs | baseline | added inside | added, % of baseline "
           "| after the window | kernels traced |",
           "|---|---|---|---|---|---|---|---|"]
    added = {}
    for w, t, mine in by_tool(ok):
        unit = UNITS[w][0]
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
    if not ALTERNATE:  # with blocks, the ratios come from the cycles (cycle_table)
        out += [""] + ratio_rows({k: v[0] for k, v in added.items()},
                                 {w: v[1] for (w, t), v in added.items() if t == "kp"})
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
    for w, t, mine in by_tool(ok):
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
                cells.append(ratio_cell(added.get((w, a, measure)), added.get((w, b, measure))))
        if any(c != "–" for c in cells):
            out.append("| %s | %s |" % (w, " | ".join(cells)))
    return "\n".join(out)


def tables(rows):
    """Every table that has rows, blank-line separated."""
    parts = (cycle_table(rows), table(rows), cpu_table(rows), probe_table(rows),
             fast_state_table(rows))
    return "\n\n".join(p for p in parts if p)


def main(argv=None):
    global TOOLS, APART_CPUS  # --floor-variant, --kp-variant and --kp-apart append to TOOLS
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
    parser.add_argument("--tools", default=None,
                        help="comma list (default: every tool, --floor-variant and --kp-variant "
                        "ones included)")
    parser.add_argument("--floor-variant", action="append", default=[], metavar="floor_NAME=KINDS",
                        help="one more tool: the floor with these KPFLOOR_KINDS (repeatable)")
    parser.add_argument("--kp-variant", action="append", default=[],
                        metavar="kp_NAME=KP_VAR=VALUE[,KP_VAR=VALUE...]",
                        help="one more tool: kp with these settings in its environment "
                        "(repeatable)")
    parser.add_argument("--kp-apart", default=None, metavar="CPUS",
                        help="one more tool, kp_apart: kp whose own threads (kp-*) are moved "
                        "onto CPUS (outside --cpus) as they start")
    parser.add_argument("--segment", type=int, default=30,
                        help="steps before, inside and after the window (each)")
    parser.add_argument("--alternate", type=int, default=0, metavar="BLOCK",
                        help="untraced and traced blocks of BLOCK steps in turn instead of one "
                        "window (with --cycles)")
    parser.add_argument("--cycles", type=int, default=None,
                        help="--alternate: traced blocks per run (default 20)")
    parser.add_argument("--lead", type=int, default=3,
                        help="--alternate: untraced blocks before the first traced one")
    parser.add_argument("--run-timeout", type=int, default=120)
    parser.add_argument("--probes", action="store_true",
                        help="PyTorch workloads time a fixed CPU and GPU probe after each step")
    parser.add_argument("--blocking-sync", action="store_true",
                        help="PyTorch workloads end each step on a blocking-sync event")
    parser.add_argument("--out", default=os.environ.get("OUT") or os.path.join(HERE, "results"))
    args = parser.parse_args(argv)
    args.dist = os.path.abspath(args.dist)
    if args.segment < 5:
        parser.error("--segment must be at least 5 steps")
    set_segment(args.segment)
    if args.alternate:
        cycles = 20 if args.cycles is None else args.cycles
        if args.alternate < 2 * EDGE + 2 or cycles < 1 or args.lead < 1:
            parser.error("--alternate needs blocks of at least %d steps, --cycles >= 1 and "
                         "--lead >= 1" % (2 * EDGE + 2))
        set_alternate(args.alternate, cycles, args.lead)
    elif args.cycles is not None:
        parser.error("--cycles needs --alternate")
    for variant in args.floor_variant:
        name, _, kinds = variant.partition("=")
        if not name.startswith("floor_") or name in TOOLS or not kinds:
            parser.error("--floor-variant %r is not floor_NAME=KINDS with a new NAME" % variant)
        FLOOR_KINDS[name] = kinds
        TOOLS = TOOLS + (name,)
    for variant in args.kp_variant:
        name, _, settings = variant.partition("=")
        # A comma starts the next setting only before "KP_": values may be lists themselves.
        pairs = [p.partition("=") for p in re.split(r",(?=KP_)", settings)]
        if (not name.startswith("kp_") or name in TOOLS or not settings or
                any(not var.startswith("KP_") or not eq for var, eq, _ in pairs)):
            parser.error("--kp-variant %r is not kp_NAME=KP_VAR=VALUE[,KP_VAR=VALUE...] with a "
                         "new NAME" % variant)
        KP_SETTINGS[name] = {var: value for var, _, value in pairs}
        TOOLS = TOOLS + (name,)
    if args.kp_apart is not None:
        try:
            APART_CPUS = set(parse_cpu_list(args.kp_apart))
        except ValueError:
            parser.error("--kp-apart %r is not a CPU list such as 10-13" % args.kp_apart)
        if APART_CPUS & set(parse_cpu_list(args.cpus)):
            parser.error("--kp-apart's CPUs must lie outside --cpus")
        TOOLS = TOOLS + ("kp_apart",)
    workloads = [w for w in args.workloads.split(",") if w]
    tools = [t for t in (args.tools or ",".join(TOOLS)).split(",") if t]
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
    header = ("paired cost: %s, CPUs %s, %d step(s) per run, %s%s%s" % (
        time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), args.cpus, STEPS,
        "window %d-%d" % (FIRST, FIRST + COUNT - 1) if not ALTERNATE else
        "blocks of %d steps, %d untraced then %d traced in turn" % (ALTERNATE, LEAD, cycles),
        ", probes" if args.probes else "",
        ", blocking sync" if args.blocking_sync else ""))
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
            print("--- after pass %d (%.0f s)\n%s" % (p, pass_s, tables(rows)), flush=True)
    with open(md_path, "w") as md:
        md.write("# Paired cost (bench/paired_cost.sh)\n\n%s\n\n%s\n" % (header, tables(rows)))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
