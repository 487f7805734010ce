#!/usr/bin/env python3
"""kp overhead benchmark driver. Called by bench/run.sh; needs only the standard library.

Runs every workload under every tool in interleaved rounds (each round a fresh shuffled tool
order, so drift in clocks or thermals spreads over all tools), takes medians per (workload, tool),
and judges kp's defaults against the targets: added cost <= 1.05x the bare CUPTI floor's with the
same kinds on the launch loop, the tiny-op loop and the training step; <= half of torch.profiler
(CUDA only)'s added cost on the tiny-op loop and the training step; training step <= 1.03x no
tool; <= 6 bytes per kernel; no drops and host memory flat after 15 s over a 60 s soak at full
launch rate. With --paired-passes N it then runs bench/paired_cost.py (each tool against the
same process's untraced steps, free of the process-to-process spread) in what is left of the
budget, appends its tables, and judges the three cost targets on its cycles instead (the
separate-process and against-no-tool readings beside each verdict); --paired-tiny-passes M adds
up to M passes of kp and the floor on tiny ops alone, pooled with the others' tiny-op runs.

Output: a Markdown report on stdout and in OUT/bench_results.md, raw numbers in OUT/bench_raw.json.
"""

import argparse
import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# --- statistics and scheduling (unit-tested on CI: bench/tests/test_run_bench.py) ---


def median(values):
    """Median of the numbers in `values`, ignoring None; None when there are none."""
    data = sorted(v for v in values if v is not None)
    if not data:
        return None
    mid = len(data) // 2
    if len(data) % 2:
        return data[mid]
    return (data[mid - 1] + data[mid]) / 2.0


def added_cost(tool_value, baseline_value):
    """What a tool adds over the no-tool baseline (same unit); None if either is unknown."""
    if tool_value is None or baseline_value is None:
        return None
    return tool_value - baseline_value


def safe_ratio(numerator, denominator):
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def interleaved_schedule(tools, rounds, seed):
    """One list per round: every tool once, counterbalanced against drift and position.

    A base order is shuffled from the seed; round r runs it rotated by r // 2 places, and every
    second round runs the previous round's order reversed (ABBA). So each pair of rounds puts a
    tool early once and late once (a drift that is linear within a round cancels), and over the
    rounds every tool takes every position, also when the budget stops the run after a few
    rounds. (Shuffling each round afresh put the no-tool baseline last in all three rounds of
    the 2026-12-01 H200 run.) Deterministic for a given seed.
    """
    rng = random.Random(seed)
    base = list(tools)
    rng.shuffle(base)
    schedule = []
    for r in range(rounds):
        shift = (r // 2) % len(base) if base else 0
        order = base[shift:] + base[:shift]
        if r % 2:
            order.reverse()
        schedule.append(order)
    return schedule


def verdict(ok):
    if ok is None:
        return "UNKNOWN"
    return "PASS" if ok else "MISS"


RSS_SETTLE_INDEX = 3  # the sample at 15 s (one every 5 s, the first at 0 s)


def rss_is_flat(samples_kb, settle_index=RSS_SETTLE_INDEX, tolerance=0.02, floor_kb=8192):
    """True when memory after start-up stays within max(2 %, 8 MiB) of its settled value.

    samples_kb[settle_index] is the sample taken 15 s in (at a 5 s period); earlier samples
    still include buffer pools filling up.
    """
    data = [s for s in samples_kb if s is not None and s >= 0]
    if len(data) <= settle_index:
        return None
    settled = data[settle_index]
    allowed = max(settled * tolerance, floor_kb)
    return max(data[settle_index:]) - settled <= allowed


# --- kptrace info --json: the reader engineer owns its schema, so find fields by name ---


def _walk(obj, path=()):
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _walk(value, path + (str(key).lower(),))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from _walk(value, path + (str(index),))
    else:
        yield path, obj


def _is_count(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


KERNEL_KEYS = ("kernels", "kernel", "kernel_records", "num_kernels", "kernel_count",
               "concurrent_kernel", "kernel_total")


def parse_info_json(obj):
    """Kernel, total-record and dropped counts from `kptrace info --json`, robust to layout.

    Returns dict(kernels, records, dropped, clean_end, stats); a field is None when the
    document does not say. CUPTI's own drop count ("dropped_records" / "cupti_dropped_records",
    the shallowest wins) is preferred over a sum of every field that mentions drops.
    """
    if isinstance(obj, list) and len(obj) == 1:
        obj = obj[0]
    kernels = None
    records_total = None
    record_sum = 0
    record_sum_found = False
    cupti_dropped = None  # (depth, value)
    other_dropped = None
    for path, value in _walk(obj):
        if not path or not _is_count(value):
            continue
        leaf = path[-1]
        parents = path[:-1]
        if "dropped" in leaf or any("dropped" in p for p in parents):
            if leaf in ("dropped_records", "cupti_dropped_records"):
                if cupti_dropped is None or len(path) < cupti_dropped[0]:
                    cupti_dropped = (len(path), int(value))
            else:
                other_dropped = (other_dropped or 0) + int(value)
            continue
        if kernels is None and leaf in KERNEL_KEYS:
            kernels = int(value)
        elif kernels is None and leaf == "count" and parents and parents[-1] in KERNEL_KEYS:
            kernels = int(value)
        if leaf in ("records", "total_records", "records_total", "record_count") and \
                records_total is None:
            records_total = int(value)
        if any(p in ("counts", "records", "record_counts", "records_by_kind") for p in parents):
            record_sum += int(value)
            record_sum_found = True
    if records_total is None and record_sum_found:
        records_total = record_sum
    dropped = cupti_dropped[1] if cupti_dropped is not None else other_dropped
    result = {"kernels": kernels, "records": records_total, "dropped": dropped}
    if isinstance(obj, dict):
        if isinstance(obj.get("clean_end"), bool):
            result["clean_end"] = obj["clean_end"]
        if isinstance(obj.get("stats"), dict):
            result["stats"] = obj["stats"]
    return result


def parse_info_text(text):
    """Fallback for a plain-text `kptrace info`: 'kernels: 200100' style lines."""
    result = {"kernels": None, "records": None, "dropped": None}
    for line in text.splitlines():
        lower = line.lower()
        numbers = re.findall(r"(\d[\d,]*)", lower)
        if not numbers:
            continue
        value = int(numbers[0].replace(",", ""))
        if result["kernels"] is None and re.match(r"\s*kernels?\b", lower):
            result["kernels"] = value
        elif "dropped" in lower:
            result["dropped"] = (result["dropped"] or 0) + value
        elif result["records"] is None and re.match(r"\s*(total )?records\b", lower):
            result["records"] = value
    return result


def parse_json_lines(text):
    """Every stdout line that is a JSON object, keyed by its "workload" field."""
    found = {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and "workload" in obj:
            found[obj["workload"]] = obj
    return found


def parse_floor_line(text):
    for line in text.splitlines():
        if line.startswith("kpfloor: {"):
            try:
                return json.loads(line[len("kpfloor: "):])
            except ValueError:
                return None
    return None


# --- running things ---


def parse_cpu_list(text):
    """'2-5,8' -> [2, 3, 4, 5, 8]; raises ValueError on a malformed list."""
    cpus = []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            low, high = (int(x) for x in part.split("-", 1))
            if high < low:
                raise ValueError("bad CPU range '%s'" % part)
            cpus.extend(range(low, high + 1))
        elif part:
            cpus.append(int(part))
    if not cpus:
        raise ValueError("empty CPU list")
    return sorted(set(cpus))


def cpu_cores(cpus):
    """{cpu: (package, core)} from sysfs, for the CPUs whose topology it names."""
    cores = {}
    for cpu in cpus:
        base = "/sys/devices/system/cpu/cpu%d/topology/" % cpu
        try:
            with open(base + "core_id") as f:
                core = int(f.read())
            with open(base + "physical_package_id") as f:
                package = int(f.read())
        except (OSError, ValueError):
            continue
        cores[cpu] = (package, core)
    return cores


def choose_cpus(setting, available, core_of=None):
    """The CPUs every profiled run is pinned to, or None for no pinning.

    Pinning all runs to the same few cores removes the run-to-run spread that comes from
    where the scheduler happens to place a process (seen on the H200 VM: the same tiny-op loop
    at 38 or 55 us/iteration from one process to the next). Four cores leave room for the
    tools' own threads (CUPTI's, kp's encoder, torch.profiler's). 'auto' takes them on four
    different physical cores when `core_of` ({cpu: core}, cpu_cores()) says which share one:
    a launch-bound thread whose SMT sibling runs a tool's thread (or the CUDA driver's) is
    slower for the whole process, which spreads results from process to process.
    """
    if setting == "all":
        return None
    if setting == "auto":
        cpus = sorted(available)
        if len(cpus) < 8:
            return None
        chosen, cores = [], set()
        for cpu in cpus[2:]:
            core = (core_of or {}).get(cpu, ("cpu", cpu))
            if core in cores:
                continue
            cores.add(core)
            chosen.append(cpu)
            if len(chosen) == 4:
                return chosen
        return cpus[2:6]
    wanted = parse_cpu_list(setting)
    return [c for c in wanted if c in available] or None


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _descendants(pid):
    """pid and every process below it (through /proc/PID/task/TID/children)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            tasks = os.listdir("/proc/%d/task" % current)
        except OSError:
            continue
        for tid in tasks:
            try:
                with open("/proc/%d/task/%s/children" % (current, tid)) as f:
                    queue.extend(int(c) for c in f.read().split())
            except (OSError, ValueError):
                pass
    return found


def tree_threads(root_pid):
    """(pid, tid) of every thread of root_pid's process tree (those gone meanwhile left out)."""
    for pid in _descendants(root_pid):
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            continue
        for tid in tids:
            yield pid, int(tid)


def thread_cpu_snapshot(root_pid):
    """{(pid, tid): {"comm", "cpu_s", "main"}} for every thread under root_pid.

    The poor man's profile where perf is missing (the GPU VM has none): CPU seconds per thread
    separate the application's launch thread from CUPTI's worker and kp's encoder thread.
    """
    snapshot = {}
    for pid, tid in tree_threads(root_pid):
        try:
            with open("/proc/%d/task/%d/stat" % (pid, tid)) as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.find("(") + 1:stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2:].split()
        # fields[11], fields[12]: utime, stime (stat fields 14 and 15)
        cpu = (int(fields[11]) + int(fields[12])) / float(CLOCK_TICKS)
        snapshot[(pid, tid)] = {"comm": comm, "cpu_s": cpu, "main": tid == pid}
    return snapshot


def summarize_threads(snapshot, top=6):
    """The busiest threads of the process that used the most CPU (the profiled program)."""
    by_pid = {}
    for (pid, tid), entry in snapshot.items():
        by_pid.setdefault(pid, []).append(dict(entry, tid=tid))
    if not by_pid:
        return []
    busiest = max(by_pid.values(), key=lambda threads: sum(t["cpu_s"] for t in threads))
    busiest.sort(key=lambda t: -t["cpu_s"])
    return [{"comm": t["comm"], "main": t["main"], "cpu_s": round(t["cpu_s"], 3)}
            for t in busiest[:top]]


def run_measured(argv, env, timeout_s, log_prefix, cpus=None):
    """Runs argv; returns rc, wall seconds, stdout, stderr and the child's peak RSS (KiB).

    os.wait4 gives this child's own rusage (its ru_maxrss covers descendants it waited for,
    e.g. the program under `kptrace run`), unlike RUSAGE_CHILDREN which mixes all runs.
    """
    out_path, err_path = log_prefix + ".out", log_prefix + ".err"
    start = time.perf_counter()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        try:
            proc = subprocess.Popen(
                argv, env=env, stdout=out, stderr=err, start_new_session=True,
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        except OSError as error:
            return {"rc": 127, "wall_s": 0.0, "stdout": "", "stderr": str(error),
                    "maxrss_kb": None}
        deadline = start + timeout_s
        status, usage, timed_out = None, None, False
        threads, polls = {}, 0
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid != 0:
                break
            polls += 1
            if polls % 5 == 0:  # every 0.1 s
                threads.update(thread_cpu_snapshot(proc.pid))
            if time.perf_counter() > deadline:
                timed_out = True
                os.killpg(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    with open(out_path) as f:
        stdout = f.read()
    with open(err_path) as f:
        stderr = f.read()
    return {"rc": 124 if timed_out else proc.returncode, "wall_s": round(wall, 3),
            "stdout": stdout, "stderr": stderr, "maxrss_kb": usage.ru_maxrss if usage else None,
            "timed_out": timed_out, "threads": summarize_threads(threads)}


def capture(argv, timeout_s=30):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        return done.returncode, done.stdout.strip(), done.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        return 1, "", str(error)


def gpu_present():
    """(True, description) when an NVIDIA GPU answers; (False, reason) otherwise."""
    if os.environ.get("KP_BENCH_ASSUME_NO_GPU") == "1":
        return False, "KP_BENCH_ASSUME_NO_GPU=1"
    if shutil.which("nvidia-smi") is None:
        return False, "nvidia-smi not found"
    rc, out, err = capture(["nvidia-smi", "-L"])
    if rc != 0 or "GPU" not in out:
        return False, "nvidia-smi -L lists no GPU (%s)" % (err or out or "rc=%d" % rc)
    return True, out.splitlines()[0]


class Bench:
    def __init__(self, args):
        self.args = args
        self.dist = os.path.abspath(args.dist)
        self.kptrace = os.path.join(self.dist, "bin", "kptrace")
        self.inject = os.path.join(self.dist, "lib", "libkpinject.so")
        self.work = tempfile.mkdtemp(prefix="kpbench-")
        self.bin_dir = os.path.join(self.work, "bin")
        self.trace_dir = os.path.join(self.work, "traces")
        self.log_dir = os.path.join(self.work, "logs")
        for d in (self.bin_dir, self.trace_dir, self.log_dir):
            os.makedirs(d)
        self.cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
        self.python = args.python
        self.phases = []
        self.notes = []
        self.kp_launch_mode = "kptrace run"
        self.runs = []
        self.floor_lib = None
        self.run_index = 0
        available = os.sched_getaffinity(0)
        self.cpus = choose_cpus(args.cpus, available, cpu_cores(available))

    # phase bookkeeping: the whole default run must fit in about 8 minutes
    def phase(self, name, started):
        seconds = time.perf_counter() - started
        self.phases.append({"phase": name, "seconds": round(seconds, 1)})
        print("[bench] phase %-28s %7.1f s (total %.1f s)" % (
            name, seconds, time.perf_counter() - self.t0), file=sys.stderr, flush=True)

    def log(self, message):
        print("[bench] " + message, file=sys.stderr, flush=True)

    # --- build ---
    def build(self):
        nvcc = os.path.join(self.cuda_home, "bin", "nvcc")
        if not os.path.exists(nvcc):
            nvcc = shutil.which("nvcc") or nvcc
        for name in ("launch_loop", "launch_soak"):
            argv = [nvcc, "-O2", "-arch=" + self.args.arch, "-o",
                    os.path.join(self.bin_dir, name), os.path.join(HERE, "workloads", name + ".cu")]
            rc, out, err = capture(argv, timeout_s=300)
            if rc != 0:
                raise RuntimeError("building %s failed: %s" % (name, err or out))
        installed = os.path.join(self.dist, "lib", "libkpfloor.so")
        if os.path.exists(installed):
            self.floor_lib = installed
            return
        # Not installed: build it against the libcupti kp ships, found through the same RPATH.
        self.floor_lib = os.path.join(self.bin_dir, "libkpfloor.so")
        cupti_dirs = [os.path.join(self.dist, "lib"), os.path.join(self.cuda_home, "lib64"),
                      os.path.join(self.cuda_home, "extras", "CUPTI", "lib64")]
        argv = ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden",
                "-I" + os.path.join(self.cuda_home, "include"),
                "-I" + os.path.join(self.cuda_home, "extras", "CUPTI", "include"),
                "-I" + os.path.dirname(HERE), os.path.join(HERE, "floor", "cupti_floor.cc"),
                os.path.join(os.path.dirname(HERE), "inject", "cupti", "api_selection.cc"),
                os.path.join(os.path.dirname(HERE), "inject", "cupti", "nvtx_forward.cc"),
                "-o", self.floor_lib]
        for d in cupti_dirs:
            argv += ["-L" + d, "-Wl,-rpath," + d]
        argv += ["-Wl,--disable-new-dtags", "-Wl,--no-undefined", "-lcupti"]
        rc, out, err = capture(argv, timeout_s=300)
        if rc != 0:
            raise RuntimeError("building libkpfloor.so failed: %s" % (err or out))

    # --- setup recorded with every number ---
    def setup(self):
        info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "rounds": self.args.rounds, "quick": self.args.quick, "seed": self.args.seed,
                "dist": self.dist}
        rc, out, _ = capture(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                              "--format=csv,noheader"])
        if rc == 0 and out:
            parts = [p.strip() for p in out.splitlines()[0].split(",")]
            info["gpu"] = parts[0]
            info["driver"] = parts[1] if len(parts) > 1 else None
            info["sm_clock_max"] = parts[2] if len(parts) > 2 else None
        rc, out, _ = capture([os.path.join(self.cuda_home, "bin", "nvcc"), "--version"])
        match = re.search(r"release ([\d.]+)", out or "")
        info["cuda"] = match.group(1) if match else None
        # Only whether torch is there: importing it here would cost a Python+torch start-up;
        # its version comes from the first torch run (torch_setup line).
        rc, out, err = capture([self.python, "-c", "import importlib.util as u; "
                                "print(u.find_spec('torch') is not None)"], timeout_s=60)
        self.torch_ok = rc == 0 and out == "True"
        info["pytorch"] = None if self.torch_ok else "unavailable"
        # Does the launcher run a program? If not, kp runs inject the library directly.
        rc, out, err = capture([self.kptrace, "run", "--", "true"], timeout_s=60)
        if rc != 0:
            self.kp_launch_mode = "CUDA_INJECTION64_PATH"
            self.notes.append("`kptrace run -- true` failed (rc %d: %s); kp runs use "
                              "CUDA_INJECTION64_PATH=lib/libkpinject.so instead" % (
                                  rc, _last_line(err or out)))
        rc, out, err = capture([self.kptrace, "version"])
        info["kp"] = out if rc == 0 else "unavailable (%s)" % (err or "rc=%d" % rc)
        rc, out, _ = capture(["uname", "-r"])
        info["kernel"] = out
        info["host_cpus"] = os.cpu_count()
        info["pinned_cpus"] = ",".join(str(c) for c in self.cpus) if self.cpus else "not pinned"
        info["gpu_state_at_start"] = self.gpu_state()
        self.setup_info = info
        return info

    def gpu_state(self):
        """SM clock, temperature, power and active clock-throttle reasons, one line; None if
        nvidia-smi does not say."""
        fields = "clocks.sm,clocks.mem,temperature.gpu,power.draw"
        for extra in (",clocks_throttle_reasons.active", ""):  # the last is unknown to some
            rc, out, _ = capture(["nvidia-smi", "--query-gpu=" + fields + extra,
                                  "--format=csv,noheader"])
            if rc == 0 and out:
                break
        if rc != 0 or not out:
            return None
        parts = [p.strip() for p in out.splitlines()[0].split(",")]
        if len(parts) < 4:
            return out.splitlines()[0]
        state = "SM %s, memory %s, %s C, %s" % tuple(parts[:4])
        return state + (", throttle reasons %s" % parts[4] if len(parts) > 4 else "")

    # --- tools ---
    def tool_table(self):
        metrics = "dram__bytes_read.sum,gpu__time_duration.sum"
        # NVTX marker activity reaches CUPTI only through NVTX's injection hook; the floor
        # forwards it to the libcupti in the process (bench/floor/cupti_floor.cc).
        floor_nvtx = {"NVTX_INJECTION64_PATH": self.floor_lib}

        def floor(kinds):
            nvtx = floor_nvtx if "nvtx" in kinds.split(",") else {}
            return {"env": dict(nvtx, CUDA_INJECTION64_PATH=self.floor_lib, KPFLOOR_KINDS=kinds),
                    "kp": False, "workloads": ("launch_loop", "torch")}

        table = {
            "none": {"env": {}, "kp": False, "workloads": ("launch_loop", "torch")},
            # The bare CUPTI subscriber with exactly what kp's defaults enable.
            "floor": floor(FLOOR_KINDS_OF_KP_DEFAULTS),
            "kp": {"env": {}, "kp": True, "workloads": ("launch_loop", "torch")},
            "torch_prof_cuda": {"env": {}, "kp": False, "workloads": ("torch",),
                                "torch_args": ["--torch-profiler", "cuda"]},
            # Optional (--tools): the floor with kernels only, kp's former defaults and their
            # floor, every API call, metrics, torch.profiler with CPU ops.
            # Launch-loop diagnostics (launch_attribution): the floor without the callbacks on
            # the launch calls, kp without API records (copy kinds then on from the start, as
            # without callbacks kp cannot wait for the first copy), kp injected directly, and kp
            # without the periodic CUPTI flush and chunk.
            "floor_no_cb_api": dict(floor(FLOOR_KINDS_WITHOUT_CB_API), workloads=("launch_loop",)),
            "kp_api_none": {"env": {"KP_API": "none"}, "kp": True, "workloads": ("launch_loop",)},
            "kp_direct": {"env": {}, "kp": True, "direct": True, "workloads": ("launch_loop",)},
            "kp_flush_off": {"env": {"KP_FLUSH_MS": "600000"}, "kp": True,
                             "workloads": ("launch_loop",)},
            "floor_kernel": floor("kernel"),
            "floor_old_defaults": floor(FLOOR_KINDS_OF_OLD_DEFAULTS),
            "kp_old_defaults": {"env": {"KP_ACTIVITIES": "default,sync,overhead",
                                        "KP_API": "launch-activity"},
                                "kp": True, "workloads": ("launch_loop", "torch")},
            "kp_api_all": {"env": {"KP_API": "all"}, "kp": True,
                           "workloads": ("launch_loop", "torch")},
            # Its floor: every runtime and driver call as API activity, copy kinds from the start.
            "floor_api_all": floor("kernel,memcpy,memset,nvtx,runtime,driver"),
            # kp's kinds with the launch calls taken from the whole RUNTIME and DRIVER activity
            # kinds instead of callbacks (what torch.profiler enables), copy kinds at the first
            # copy.
            "floor_api_kinds": floor("kernel,nvtx,runtime,driver,lazy_copy"),
            # The launch loop has no NVTX ranges, so metrics there would measure nothing.
            "kp_nvtx_metrics": {"env": {"KP_METRICS": metrics,
                                        "KP_METRICS_RANGES": "forward,backward,optimizer"},
                                "kp": True, "torch_args": ["--nvtx"], "workloads": ("torch",)},
            "torch_prof_cpu_cuda": {"env": {}, "kp": False, "workloads": ("torch",),
                                    "torch_args": ["--torch-profiler", "cpu+cuda"]},
        }
        wanted = DEFAULT_TOOLS + [t for t in self.args.tools.split(",") if t]
        return {name: table[name] for name in TOOL_ORDER if name in wanted}

    def workload_argv(self, workload, tool):
        quick = self.args.quick
        if workload == "launch_loop":
            argv = [os.path.join(self.bin_dir, "launch_loop")]
            if quick:
                argv += ["--launches", "50000", "--copies", "5000"]
            return argv
        argv = [self.python, os.path.join(HERE, "workloads", "torch_suite.py")]
        argv += tool.get("torch_args", [])
        if quick:
            argv += ["--tiny-iterations", "1000", "--steps", "5"]
        return argv

    def base_env(self):
        env = dict(os.environ)
        for key in list(env):
            if key.startswith("KP_") or key in ("CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH"):
                del env[key]
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def run_one(self, round_index, tool_name, tool, workload, timeout_s=180, argv=None):
        self.run_index += 1
        tag = "r%d-%s-%s-%d" % (round_index, tool_name, workload, self.run_index)
        env = self.base_env()
        env.update(tool["env"])
        argv = argv or self.workload_argv(workload, tool)
        trace_pattern = None
        if tool["kp"]:
            trace_pattern = os.path.join(self.trace_dir, tag + "-%p.kptrace")
            env["KP_OUTPUT"] = trace_pattern
            if self.kp_launch_mode == "kptrace run" and not tool.get("direct"):
                full = [self.kptrace, "run", "--"] + argv
            else:
                env["CUDA_INJECTION64_PATH"] = self.inject
                env["NVTX_INJECTION64_PATH"] = self.inject  # as `kptrace run` does
                full = argv
        else:
            full = argv
        result = run_measured(full, env, timeout_s, os.path.join(self.log_dir, tag),
                              cpus=self.cpus)
        outputs = parse_json_lines(result["stdout"])
        record = {"round": round_index, "tool": tool_name, "workload": workload,
                  "rc": result["rc"], "wall_s": result["wall_s"],
                  "maxrss_kb": result["maxrss_kb"], "outputs": outputs,
                  "threads": result.get("threads"),
                  "timed_out": result.get("timed_out", False)}
        if result["rc"] != 0 or not outputs:
            record["stderr_tail"] = result["stderr"][-1500:]
            self.log("run %s failed (rc %s): %s" % (tag, result["rc"],
                                                   _last_line(result["stderr"])))
        if tool_name == "floor":
            record["floor"] = parse_floor_line(result["stderr"])
        if trace_pattern:
            traces = sorted(f for f in os.listdir(self.trace_dir) if f.startswith(tag + "-"))
            record["traces"] = [os.path.join(self.trace_dir, f) for f in traces]
            record["trace"] = self.describe_traces(record["traces"])
        self.runs.append(record)
        return record

    def describe_traces(self, paths):
        """Size, kernels and drops of a run's trace files, summed (one file per process)."""
        if not paths:
            return {"error": "no trace file written"}
        total = {"bytes": 0, "kernels": 0, "records": 0, "dropped": 0, "files": len(paths)}
        for path in paths:
            total["bytes"] += os.path.getsize(path)
            info = self.trace_info(path)
            for key in ("kernels", "records", "dropped"):
                if info.get(key) is None:
                    total[key] = None
                elif total[key] is not None:
                    total[key] += info[key]
            if info.get("error"):
                total["error"] = info["error"]
            if "clean_end" in info:
                total["clean_end"] = total.get("clean_end", True) and info["clean_end"]
            if info.get("stats"):
                total.setdefault("stats", {})
                for key, value in info["stats"].items():
                    if _is_count(value):
                        total["stats"][key] = total["stats"].get(key, 0) + value
        if total["kernels"]:
            total["bytes_per_kernel"] = round(total["bytes"] / total["kernels"], 3)
        return total

    def trace_info(self, path):
        rc, out, err = capture([self.kptrace, "info", "--json", path], timeout_s=120)
        if rc == 0 and out:
            try:
                return parse_info_json(json.loads(out))
            except ValueError:
                pass
        rc2, out2, err2 = capture([self.kptrace, "info", path], timeout_s=120)
        if rc2 == 0 and out2:
            parsed = parse_info_text(out2)
            parsed["error"] = "info --json unusable (rc %d); parsed text output" % rc
            return parsed
        return {"kernels": None, "records": None, "dropped": None,
                "error": "kptrace info failed: %s" % _last_line(err or err2)}

    # --- phases ---
    def interleaved_rounds(self):
        tools = self.tool_table()
        names = [n for n in tools if self.torch_ok or "launch_loop" in tools[n]["workloads"]]
        if not self.torch_ok:
            self.notes.append("PyTorch unavailable: torch workloads and torch.profiler skipped")
        schedule = interleaved_schedule(names, self.args.rounds, self.args.seed)
        # What must be left after the rounds: the soak and the paired passes.
        reserve = 0 if self.args.skip_soak else self.soak_seconds() + 15
        reserve += self.args.paired_passes * PAIRED_PASS_S
        reserve += self.args.paired_tiny_passes * PAIRED_TINY_PASS_S
        last_round_s = 0.0
        for round_index, order in enumerate(schedule, 1):
            elapsed = time.perf_counter() - self.t0
            if round_index > 1 and elapsed + last_round_s + reserve > self.args.budget_s:
                self.notes.append(
                    "stopped after %d of %d rounds to stay within --budget-s %d (%.0f s used, "
                    "a round takes %.0f s)" % (round_index - 1, len(schedule),
                                               self.args.budget_s, elapsed, last_round_s))
                self.log(self.notes[-1])
                break
            started = time.perf_counter()
            self.log("round %d order: %s" % (round_index, " ".join(order)))
            for name in order:
                for workload in tools[name]["workloads"]:
                    if workload == "torch" and not self.torch_ok:
                        continue
                    self.run_one(round_index, name, tools[name], workload)
            self.phase("round %d" % round_index, started)
            last_round_s = time.perf_counter() - started
            state = self.gpu_state()
            if state:  # clocks that drift from round to round show in the step times
                self.notes.append("GPU after round %d: %s" % (round_index, state))
            if self.setup_info.get("pytorch") is None:
                for run in self.runs:
                    torch_setup = run["outputs"].get("torch_setup")
                    if torch_setup:
                        self.setup_info["pytorch"] = "%s (CUDA %s)" % (
                            torch_setup.get("torch"), torch_setup.get("torch_cuda"))
                        break

    def soak_seconds(self):
        return self.args.soak_seconds or (15 if self.args.quick else 60)

    def soak(self):
        seconds = self.soak_seconds()
        argv = [os.path.join(self.bin_dir, "launch_soak"), "--seconds", str(seconds),
                "--sample-seconds", "5"]
        tool = self.tool_table()["kp"]
        record = self.run_one(0, "kp", tool, "launch_soak", timeout_s=seconds + 120, argv=argv)
        record["phase"] = "soak"
        return record

    def compression(self):
        """Trace size of the launch loop with KP_COMPRESSION=none, to set beside the default's."""
        tool = {"env": {"KP_COMPRESSION": "none"}, "kp": True, "workloads": ("launch_loop",)}
        record = self.run_one(0, "kp_uncompressed", tool, "launch_loop")
        return record.get("trace")

    def convert(self, trace_path, records):
        results = []
        for fmt, ext in (("perfetto", "pftrace"), ("csv", "csv"), ("chrome", "json")):
            out_dir = os.path.join(self.work, "convert-" + fmt)
            os.makedirs(out_dir, exist_ok=True)
            out_path = os.path.join(out_dir, "trace." + ext)
            start = time.perf_counter()
            rc, out, err = capture([self.kptrace, "convert", trace_path, "--to", fmt, "-o",
                                    out_path, "--no-progress"], timeout_s=300)
            seconds = time.perf_counter() - start
            size = sum(os.path.getsize(os.path.join(root, f))
                       for root, _, files in os.walk(out_dir) for f in files)
            entry = {"format": fmt, "rc": rc, "seconds": round(seconds, 3), "records": records,
                     "output_bytes": size}
            if rc == 0 and records and seconds > 0:
                entry["records_per_s"] = round(records / seconds)
            else:
                entry["error"] = _last_line(err or out) or "rc %d" % rc
            results.append(entry)
            shutil.rmtree(out_dir, ignore_errors=True)
        return results

    def run(self):
        self.t0 = time.perf_counter()
        started = time.perf_counter()
        self.build()
        self.phase("build workloads + floor", started)
        started = time.perf_counter()
        self.setup()
        self.phase("setup query", started)
        self.interleaved_rounds()
        soak = None
        if not self.args.skip_soak:
            started = time.perf_counter()
            soak = self.soak()
            self.phase("soak", started)
        started = time.perf_counter()
        uncompressed = self.compression()
        self.phase("trace size without compression", started)
        started = time.perf_counter()
        convert = []
        launch_kp = [r for r in self.runs if r["tool"] == "kp" and r["workload"] == "launch_loop"
                     and r.get("traces")]
        if launch_kp:
            last = launch_kp[-1]
            trace = last["trace"]
            records = trace.get("records") or trace.get("kernels")
            convert = self.convert(last["traces"][0], records)
        else:
            self.notes.append("no kp trace of the launch loop: convert throughput not measured")
        self.phase("convert", started)
        paired, paired_summary = None, None
        if self.args.paired_passes > 0:
            started = time.perf_counter()
            paired, paired_summary = self.paired()
            self.phase("paired (within-process) cost", started)
        markdown, raw = build_report(self.setup_info, self.runs, soak, convert, self.phases,
                                     self.notes, self.kp_launch_mode,
                                     time.perf_counter() - self.t0, uncompressed=uncompressed,
                                     paired=paired_summary)
        if paired is not None:
            markdown += ("\n## Within one process (bench/paired_cost.sh)\n\nThe cost targets "
                         "judged free of the process-to-process spread: each tool is switched on "
                         "and off in blocks of %d steps, %d untraced lead blocks then %d traced "
                         "blocks per process, each read against the untraced blocks either side "
                         "of it (bench/README.md).\n\n"
                         % (PAIRED_BLOCK, PAIRED_LEAD, PAIRED_CYCLES) + paired + "\n")
            raw["paired_cost"] = paired
        return markdown, raw

    def paired(self):
        """bench/paired_cost.py with what is left of the budget: its tables and cycle_summary,
        or a note. With --paired-tiny-passes, more passes of kp and the floor on tiny ops alone
        follow; their runs, pooled with the first part's tiny-op kp, floor and no-tool runs, get
        tables of their own and enter the summary as (tiny, kp + POOLED) and (tiny, floor +
        POOLED), which only the kp-against-the-floor verdict reads."""
        import paired_cost  # bench/paired_cost.py, beside this file

        try:
            text, rows = self.paired_part(
                "paired", ["--passes", str(self.args.paired_passes), "--tools",
                           ",".join(PAIRED_TOOLS)])
        except Exception as error:  # a failed diagnostic must not lose the report
            self.notes.append("paired cost not measured: %s" % error)
            return None, None
        parts = text.split("\n\n", 2)  # title, the run's header line, the tables
        tables = parts[2] if len(parts) == 3 else text
        summary = paired_cost.cycle_summary(rows)
        more = self.paired_tiny_part()
        if more:
            pooled = [r for r in rows if r.get("workload") == "tiny"
                      and r.get("tool") in PAIRED_TINY_TOOLS + ("none",)] + more
            pooled_summary = paired_cost.cycle_summary(pooled)
            for tool in PAIRED_TINY_TOOLS:
                if ("tiny", tool) in pooled_summary:
                    summary[("tiny", tool + POOLED)] = pooled_summary[("tiny", tool)]
            names, passes = " and ".join(PAIRED_TINY_TOOLS), len({r.get("pass") for r in more})
            tables += ("\n### Tiny ops: %s pooled with %d more passes of them alone\n\n"
                       "`--paired-tiny-passes`: %d passes of `--workloads tiny --tools %s` "
                       "(as many as the budget allowed), their runs read with the tiny-op runs "
                       "of %s and no tool above; the kp-against-the-floor verdict on tiny ops is "
                       "this table's.\n\n%s\n" % (
                           names, passes, passes, ",".join(PAIRED_TINY_TOOLS), names,
                           paired_cost.tables(pooled)))
        return tables, summary

    def paired_tiny_part(self):
        """--paired-tiny-passes: the rows of the extra tiny-op passes (those finished when it
        failed), or [] with a note when none ran."""
        extra = self.args.paired_tiny_passes
        if extra <= 0:
            return []
        left = self.args.budget_s - (time.perf_counter() - self.t0)
        if left < PAIRED_TINY_PASS_S:
            self.notes.append("more tiny-op passes not run: %.0f s of --budget-s left, a pass "
                              "takes ~%d s" % (max(left, 0), PAIRED_TINY_PASS_S))
            return []
        out_name = "paired_tiny"
        try:
            return self.paired_part(out_name, ["--passes", str(extra), "--workloads", "tiny",
                                               "--tools", ",".join(PAIRED_TINY_TOOLS)])[1]
        except Exception as error:
            raw = os.path.join(self.args.out, out_name, "paired_cost_raw.jsonl")
            done = _read_jsonl(raw) if os.path.exists(raw) else []
            self.notes.append("more tiny-op passes stopped: %s (%d runs kept)" % (
                error, len(done)))
            return done

    def paired_part(self, name, what):
        """One bench/paired_cost.py call into OUT/NAME with the report's settings and `what`
        (passes, tools, workloads) in what is left of the budget: (its Markdown, its rows)."""
        import paired_cost

        left = int(self.args.budget_s - (time.perf_counter() - self.t0))
        out = os.path.join(self.args.out, name)
        argv = [self.dist, "--budget-s", str(max(left, 1)), "--cpus",
                ",".join(str(c) for c in (self.cpus or sorted(os.sched_getaffinity(0)))),
                "--python", self.args.python, "--arch", self.args.arch, "--out", out,
                "--alternate", str(PAIRED_BLOCK), "--cycles", str(PAIRED_CYCLES),
                "--lead", str(PAIRED_LEAD), "--probes"] + what
        paired_cost.main(argv)
        with open(os.path.join(out, "paired_cost.md")) as f:
            text = f.read()
        return text, _read_jsonl(os.path.join(out, "paired_cost_raw.jsonl"))


def _read_jsonl(path):
    """The JSON objects of a file with one per line (bench/paired_cost.py's raw rows)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _last_line(text):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1][:300] if lines else ""


# --- analysis and report ---

# (result key in the workload's JSON line, metric, unit, workload the result comes from)
METRICS = (
    ("launch_loop", "us_per_launch", "us/launch", "launch_loop"),
    ("launch_loop", "us_per_copy", "us/copy", "launch_loop"),
    ("tiny_ops", "us_per_iter", "us/iter", "torch"),
    ("transformer", "step_ms", "ms/step", "torch"),
)
TOOL_ORDER = ("none", "floor", "kp", "torch_prof_cuda", "floor_no_cb_api", "kp_api_none",
              "kp_direct", "kp_flush_off", "floor_kernel", "floor_old_defaults",
              "kp_old_defaults", "kp_api_all", "floor_api_all", "floor_api_kinds",
              "kp_nvtx_metrics", "torch_prof_cpu_cuda")
# The four after torch_prof_cuda run the launch loop only (about 2 s a round each): they split
# kp's launch-loop cost above the floor's (launch_attribution()).
DEFAULT_TOOLS = ["none", "floor", "kp", "torch_prof_cuda", "floor_no_cb_api", "kp_api_none",
                 "kp_direct", "kp_flush_off"]
# What each diagnostic pair isolates: (label, kp tool, kp reference, floor tool, floor reference).
LAUNCH_ATTRIBUTION = (
    ("recording the launch calls (callbacks)", "kp", "kp_api_none", "floor", "floor_no_cb_api"),
    ("launching through `kptrace run` instead of CUDA_INJECTION64_PATH", "kp", "kp_direct",
     None, None),
    ("the periodic flush (KP_FLUSH_MS=1000 against 600000)", "kp", "kp_flush_off", None, None),
)
# bench/floor's KPFLOOR_KINDS for what kp enables by default (inject/cupti/tracer.cc: kernel and
# NVTX marker activity, callbacks on the driver form of the launch-related calls, copy kinds at
# the first copy) and for kp's former defaults (KP_API=launch-activity, sync and overhead on).
FLOOR_KINDS_OF_KP_DEFAULTS = "kernel,nvtx,cb_api,lazy_copy,driver_only"
# The same without the callbacks on the launch calls (the floor_no_cb_api tool).
FLOOR_KINDS_WITHOUT_CB_API = ",".join(
    k for k in FLOOR_KINDS_OF_KP_DEFAULTS.split(",") if k != "cb_api")
# bench/paired_cost.py --alternate 10 --cycles 20 --lead 10 --probes with the tools the targets
# name: ten lead blocks (about a second of training steps) and the CPU probes let what a tool
# leaves on while off be read from the steps taken in the machine's fast state on both sides.
PAIRED_BLOCK, PAIRED_CYCLES, PAIRED_LEAD = 10, 20, 10
PAIRED_TOOLS = ("none", "kp", "floor", "torch_prof")
PAIRED_PASS_S = 140  # one pass of it on the H200 VM
# --paired-tiny-passes: kp against the floor on tiny ops needs the most runs (the spread of one
# run's reading is about the size of the 5 % the target allows); a pass of these two alone.
PAIRED_TINY_TOOLS = ("kp", "floor")
PAIRED_TINY_PASS_S = 16
POOLED = "+pooled"  # the summary's tool suffix for the tiny-op runs of both parts
FLOOR_KINDS_OF_OLD_DEFAULTS = "kernel,memcpy,memset,api_launch,nvtx,sync,overhead"


def summarize(runs):
    """Medians per (result, metric, tool) plus memory, trace size and drop figures."""
    table = {}
    for result_key, metric, unit, workload in METRICS:
        for tool in TOOL_ORDER:
            chosen = [r for r in runs if r["tool"] == tool and r["workload"] == workload
                      and r["round"] > 0]
            if not chosen:
                continue
            values = [r["outputs"].get(result_key, {}).get(metric) for r in chosen]
            rss = [r["maxrss_kb"] for r in chosen]
            bytes_per_kernel = [r.get("trace", {}).get("bytes_per_kernel") for r in chosen]
            drops = [d for d in (_dropped_of(r) for r in chosen) if d is not None]
            traced = sum(1 for r in chosen if r.get("traces"))
            table[(result_key, metric, tool)] = {
                "unit": unit, "n": sum(v is not None for v in values), "values": values,
                "rounds": [r["round"] for r in chosen],
                "median": median(values), "rss_mb": _kb_to_mb(median(rss)),
                "bytes_per_kernel": median(bytes_per_kernel),
                "dropped": sum(drops) if drops else None,
                "failed": sum(1 for r in chosen if r["rc"] != 0),
                # kp runs that left no trace file measured a program kp did not profile.
                "untraced": (len(chosen) - traced) if tool.startswith("kp") else 0,
            }
    return table


def _dropped_of(run):
    if run.get("trace") and "dropped" in run["trace"]:
        return run["trace"]["dropped"]
    if run.get("floor"):
        return run["floor"].get("dropped")
    return None


def _kb_to_mb(kb):
    return None if kb is None else kb / 1024.0


# The issue-10 targets. Each ratio is of medians measured side by side in the same run.
FLOOR_RATIO_MAX = 1.05      # kp's added cost over the bare floor's with the same kinds
TORCH_PROFILER_SHARE = 0.5  # kp's added cost over torch.profiler (CUDA only)'s
STEP_SLOWDOWN_MAX = 1.03    # training step under kp over no tool
BYTES_PER_KERNEL_MAX = 6.0


def launch_attribution(table):
    """Rows (label, kp part, floor part) of the launch loop's cost split by diagnostic tools."""
    def med(tool):
        entry = table.get(("launch_loop", "us_per_launch", tool)) if tool else None
        return entry["median"] if entry else None

    rows = []
    for label, kp, kp_ref, floor, floor_ref in LAUNCH_ATTRIBUTION:
        kp_part = added_cost(med(kp), med(kp_ref))
        floor_part = added_cost(med(floor), med(floor_ref)) if floor else None
        if kp_part is not None:
            rows.append((label, kp_part, floor_part))
    return rows


def paired_ratio(table, result_key, metric, tool, baseline):
    """Median over rounds of tool/baseline within the same round (round-level drift cancels)."""
    entry, base = table.get((result_key, metric, tool)), table.get((result_key, metric, baseline))
    if not entry or not base:
        return None
    by_round = dict(zip(base.get("rounds", []), base.get("values", [])))
    return median([safe_ratio(v, by_round.get(r))
                   for r, v in zip(entry.get("rounds", []), entry.get("values", []))])


PAIRED_WORKLOADS = {"launch_loop": "launch", "tiny_ops": "tiny", "transformer": "train"}


def paired_cost_pair(paired, result_key, tool, baseline, pooled=False):
    """From bench/paired_cost.py's cycle_summary: (tool's cost, baseline's cost, runs) in % of
    the untraced step, against no tool ("net") and from the cycles alone, or None where either
    tool has no cycles or a kp run traced no kernel. With `pooled`, the two tools' pooled
    entries (Bench.paired) where both exist."""
    w = PAIRED_WORKLOADS.get(result_key)
    paired = paired or {}
    pooled = pooled and (w, tool + POOLED) in paired and (w, baseline + POOLED) in paired
    if pooled:
        tool, baseline = tool + POOLED, baseline + POOLED
    a, b = paired.get((w, tool)), paired.get((w, baseline))
    if not a or not b or 0 in a.get("kernels", []) + b.get("kernels", []):
        return None
    return {"net": (a["net"], b["net"]), "cycles": (a["cycles"], b["cycles"]),
            "runs": min(a["runs"], b["runs"]), "pooled": pooled,
            "residual_runs": "%d and %d" % (a.get("residual_runs", a["runs"]),
                                            b.get("residual_runs", b["runs"]))}


def within_floor(kp_add, floor_add):
    """kp's added cost at most FLOOR_RATIO_MAX x the floor's; within noise of nothing (kp adding
    no more than the floor, or nothing) meets it."""
    return kp_add <= FLOOR_RATIO_MAX * max(floor_add, 0.0) or kp_add <= 0


def within_share(kp_add, tp_add):
    """kp's added cost at most TORCH_PROFILER_SHARE of torch.profiler's."""
    return kp_add <= TORCH_PROFILER_SHARE * max(tp_add, 0.0)


def targets(table, soak, paired=None):
    """The verdicts on the cost targets. The cost ratios come from the within-process measurement
    (`paired`, bench/paired_cost.py's cycle_summary) where it ran, judged on its cycles, with
    the cost against no tool and the between-process (rounds) readings beside; else from the
    rounds."""
    def med(result_key, metric, tool):
        entry = table.get((result_key, metric, tool))
        return entry["median"] if entry else None

    def kp_traced(result_key, metric):
        entry = table.get((result_key, metric, "kp"))
        return entry is not None and entry.get("untraced", 0) == 0

    def within(result_key, tool, baseline, name, judge, pooled=False):
        """(ok, text) of the within-process reading, or (None, None) without one. The verdict
        is the cycles' (a tool on against itself attached but off: robust to the machine's
        speed changes); the cost against no tool (plus what each tool leaves on while off,
        read before/after within a run and so much noisier) is given beside it."""
        pair = paired_cost_pair(paired, result_key, tool, baseline, pooled)
        if pair is None:
            return None, None
        (kp_net, base_net), (kp_cyc, base_cyc) = pair["net"], pair["cycles"]
        known = kp_net is not None and base_net is not None
        against = ("kp %+.2f %%, %s %+.2f %%, ratio %s (%s)" % (
            kp_net, name, base_net, _fmt(safe_ratio(kp_net, base_net)),
            verdict(judge(kp_net, base_net))) if known
            else "n/a (too few runs read what a tool leaves on while off)")
        text = ("within one process (%d runs each%s), from the cycles: kp %+.2f %%, %s "
                "%+.2f %%, ratio %s; against no tool (with what each leaves on while off, %s "
                "runs): %s" % (
                    pair["runs"], ", with the tiny-op passes" if pair["pooled"] else "",
                    kp_cyc, name, base_cyc, _fmt(safe_ratio(kp_cyc, base_cyc)),
                    pair["residual_runs"], against))
        return judge(kp_cyc, base_cyc), text

    out = []
    workloads = (("launch loop", "launch_loop", "us_per_launch", "us"),
                 ("tiny ops", "tiny_ops", "us_per_iter", "us"),
                 ("training step", "transformer", "step_ms", "ms"))
    for label, key, metric, unit in workloads:
        none, floor, kp = (med(key, metric, t) for t in ("none", "floor", "kp"))
        kp_add, floor_add = added_cost(kp, none), added_cost(floor, none)
        ratio = safe_ratio(kp_add, floor_add)
        ok = None
        if kp_add is not None and floor_add is not None and kp_traced(key, metric):
            ok = within_floor(kp_add, floor_add)
        rounds = "between processes (rounds): kp +%s %s, floor +%s %s, ratio %s (none %s %s)" % (
            _fmt(kp_add), unit, _fmt(floor_add), unit, _fmt(ratio), _fmt(none), unit)
        paired_ok, paired_text = within(key, "kp", "floor", "floor", within_floor,
                                        pooled=True)
        out.append({
            "target": "%s: kp added cost <= %.2f x the floor's (same kinds)" % (
                label, FLOOR_RATIO_MAX),
            "ok": ok if paired_text is None else paired_ok,
            "detail": rounds if paired_text is None else paired_text + "; " + rounds})
    for label, key, metric, unit in workloads[1:]:
        none, floor, kp, tp = (med(key, metric, t)
                               for t in ("none", "floor", "kp", "torch_prof_cuda"))
        kp_add, tp_add, floor_add = (added_cost(v, none) for v in (kp, tp, floor))
        ok = None
        if kp_add is not None and tp_add is not None and kp_traced(key, metric):
            ok = within_share(kp_add, tp_add)
        rounds = ("between processes (rounds): kp +%s %s, torch.profiler CUDA +%s %s "
                  "(kp/torch.profiler %s); the bare floor of kp's kinds +%s %s "
                  "(floor/torch.profiler %s)" % (
                      _fmt(kp_add), unit, _fmt(tp_add), unit, _fmt(safe_ratio(kp_add, tp_add)),
                      _fmt(floor_add), unit, _fmt(safe_ratio(floor_add, tp_add))))
        paired_ok, paired_text = within(key, "kp", "torch_prof", "torch.profiler", within_share)
        out.append({
            "target": "%s: kp added cost <= %s of torch.profiler (CUDA only)'s" % (
                label, "half" if TORCH_PROFILER_SHARE == 0.5 else TORCH_PROFILER_SHARE),
            "ok": ok if paired_text is None else paired_ok,
            "detail": rounds if paired_text is None else paired_text + "; " + rounds})
    none_s, kp_s, floor_s = (med("transformer", "step_ms", t) for t in ("none", "kp", "floor"))
    slow = safe_ratio(kp_s, none_s)
    ok = None if slow is None or not kp_traced("transformer", "step_ms") \
        else slow <= STEP_SLOWDOWN_MAX
    detail = "between processes (rounds): kp/none = %s (floor/none = %s; median of per-round " \
        "kp/none %s)" % (_fmt(slow), _fmt(safe_ratio(floor_s, none_s)),
                         _fmt(paired_ratio(table, "transformer", "step_ms", "kp", "none")))
    pair = paired_cost_pair(paired, "transformer", "kp", "none")
    if pair is not None:
        limit = (STEP_SLOWDOWN_MAX - 1) * 100
        net, cycles = pair["net"][0], pair["cycles"][0]
        ok = cycles <= limit
        detail = ("within one process (%d runs), from the cycles (kp on against kp attached "
                  "but off): kp %.4f x; against no tool (with what kp leaves on while off): %s; "
                  % (
                      pair["runs"], 1 + cycles / 100, "n/a" if net is None else
                      "kp %.4f x (%s)" % (1 + net / 100, verdict(net <= limit))) + detail)
    out.append({"target": "training step: kp <= %.2f x no tool" % STEP_SLOWDOWN_MAX, "ok": ok,
                "detail": detail})
    bpk = [table.get((k, m, "kp"), {}).get("bytes_per_kernel")
           for k, m in (("launch_loop", "us_per_launch"), ("tiny_ops", "us_per_iter"))]
    bpk_launch = bpk[0]
    out.append({
        "target": "trace size: <= %g bytes per kernel (kp defaults, launch loop)" % (
            BYTES_PER_KERNEL_MAX),
        "ok": None if bpk_launch is None else bpk_launch <= BYTES_PER_KERNEL_MAX,
        "detail": "launch loop %s B/kernel, torch run %s B/kernel (file bytes / kernels; the "
                  "file also holds copies, API calls and the header)" % (
                      _fmt(bpk_launch), _fmt(bpk[1]))})
    if soak is not None:
        output = soak["outputs"].get("launch_soak", {})
        rss = output.get("rss_kb") or []
        dropped = _dropped_of(soak)
        flat = rss_is_flat(rss)
        kernels = (soak.get("trace") or {}).get("kernels")
        launched = None
        if output.get("launches") is not None:
            launched = output["launches"] + output.get("warmup_launches", 0)
        ok = None
        if dropped is not None and flat is not None:
            ok = dropped == 0 and flat and (kernels is None or launched is None
                                            or kernels >= launched)
        out.append({
            "target": "soak: no record dropped at full launch rate, host memory flat after 15 s",
            "ok": ok,
            "detail": "%s s, %s launches (%s us/launch), kernels in trace %s, dropped %s; "
                      "VmRSS first/at 15 s/last/max %s/%s/%s/%s MB" % (
                          _fmt(output.get("seconds")), launched,
                          _fmt(output.get("us_per_launch")), kernels, dropped,
                          _fmt(_kb_to_mb(rss[0]) if rss else None),
                          _fmt(_kb_to_mb(rss[RSS_SETTLE_INDEX])
                               if len(rss) > RSS_SETTLE_INDEX else None),
                          _fmt(_kb_to_mb(rss[-1]) if rss else None),
                          _fmt(_kb_to_mb(max(rss)) if rss else None))})
    return out


def _fmt(value):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        if abs(value) >= 100:
            return "%.1f" % value
        if abs(value) >= 1:
            return "%.3f" % value
        return "%.4f" % value
    return str(value)


def build_report(setup, runs, soak, convert, phases, notes, launch_mode, total_s,
                 uncompressed=None, paired=None):
    table = summarize(runs)
    verdicts = targets(table, soak, paired)
    lines = ["# kp overhead benchmark", ""]
    lines.append("Setup: GPU **%s**, driver %s, CUDA %s, PyTorch %s, kp %s, kernel %s, %s; "
                 "%d round(s)%s, interleaved (counterbalanced tool order: each pair of "
                 "rounds mirrored, rotated from pair to pair), medians with min..max over rounds; "
                 "runs pinned to CPUs %s. kp launched via %s." % (
                     setup.get("gpu"), setup.get("driver"), setup.get("cuda"),
                     setup.get("pytorch"), setup.get("kp"), setup.get("kernel"),
                     setup.get("date"), setup.get("rounds"),
                     " (--quick: shorter loops)" if setup.get("quick") else "",
                     setup.get("pinned_cpus", "n/a"), launch_mode))
    lines += ["", "## Targets", "", "| target | verdict | numbers |", "|---|---|---|"]
    untraced = sorted({k[2] for k, v in table.items() if v.get("untraced")})
    if untraced:
        lines.append("**kp wrote no trace in some runs of %s: those numbers are not kp's cost "
                     "and the kp verdicts below say UNKNOWN.**" % ", ".join(untraced))
        lines.append("")
    for v in verdicts:
        lines.append("| %s | %s | %s |" % (v["target"], verdict(v["ok"]), v["detail"]))
    lines += ["", "## Time per unit of work (median) and cost added over no tool", "",
              "| workload | tool | n | median | min..max | added vs none | ratio to none "
              "| peak RSS MB | trace B/kernel | dropped |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for result_key, metric, unit, _ in METRICS:
        base = table.get((result_key, metric, "none"), {}).get("median")
        for tool in TOOL_ORDER:
            entry = table.get((result_key, metric, tool))
            if not entry:
                continue
            m = entry["median"]
            n_text = str(entry["n"]) + (" (%d failed)" % entry["failed"] if entry["failed"] else "")
            values = [v for v in entry["values"] if v is not None]
            spread = "%s..%s" % (_fmt(min(values)), _fmt(max(values))) if values else "n/a"
            lines.append("| %s | %s | %s | %s %s | %s | %s | %s | %s | %s | %s |" % (
                result_key, tool, n_text, _fmt(m), unit, spread, _fmt(added_cost(m, base)),
                _fmt(safe_ratio(m, base)), _fmt(entry["rss_mb"]), _fmt(entry["bytes_per_kernel"]),
                _fmt(entry["dropped"])))
    lines += ["", "Peak RSS is the profiled process's (launch loop alone; the torch row is the "
              "one Python process running both torch workloads). floor = bare CUPTI subscriber "
              "(bench/floor) enabling exactly the kinds and callbacks of kp's defaults (KPFLOOR_KINDS=" + FLOOR_KINDS_OF_KP_DEFAULTS + "), records counted and freed."]
    attribution = launch_attribution(table)
    if attribution:
        lines += ["", "## Launch loop: where kp's cost above the floor goes (diagnostic tools)",
                  "", "| part | kp (us/launch) | floor, same part (us/launch) |", "|---|---|---|"]
        for label, kp_part, floor_part in attribution:
            lines.append("| %s | %s | %s |" % (label, _fmt(kp_part), _fmt(floor_part)))
        lines += ["", "floor_no_cb_api = the floor without callbacks on the launch calls "
                  "(KPFLOOR_KINDS=" + FLOOR_KINDS_WITHOUT_CB_API + "); kp_api_none = kp with KP_API=none; "
                  "kp_direct = kp through CUDA_INJECTION64_PATH; kp_flush_off = KP_FLUSH_MS=600000."]
    default_bpk = table.get(("launch_loop", "us_per_launch", "kp"), {}).get("bytes_per_kernel")
    lines.append("")
    if uncompressed is not None:
        lines += ["Compression: the launch loop's kp trace takes %s B/kernel with the default "
                  "(zstd) and %s B/kernel with KP_COMPRESSION=none (%s bytes, %s kernels)." % (
                      _fmt(default_bpk), _fmt(uncompressed.get("bytes_per_kernel")),
                      _fmt(uncompressed.get("bytes")), _fmt(uncompressed.get("kernels")))]
    if convert:
        lines += ["", "## kptrace convert throughput (kp trace of the launch loop)", "",
                  "| format | records | seconds | records/s | output MB | note |",
                  "|---|---|---|---|---|---|"]
        for c in convert:
            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                c["format"], c["records"], _fmt(c["seconds"]), c.get("records_per_s", "n/a"),
                _fmt(c["output_bytes"] / 1048576.0), c.get("error", "")))
    if soak is not None:
        output = soak["outputs"].get("launch_soak", {})
        lines += ["", "## Soak (launch loop at full rate under kp)", "",
                  "VmRSS samples (MB, every 5 s): " + ", ".join(
                      _fmt(_kb_to_mb(k)) for k in output.get("rss_kb", []))]
    lines += ["", "## Phases", "", "| phase | seconds |", "|---|---|"]
    for p in phases:
        lines.append("| %s | %s |" % (p["phase"], p["seconds"]))
    lines.append("| total | %.1f |" % total_s)
    if notes:
        lines += ["", "## Notes", ""] + ["- " + n for n in notes]
    for tool in ("kp", "kp_old_defaults", "kp_api_all", "kp_nvtx_metrics"):
        for workload in ("launch_loop", "torch"):
            traced = [r for r in runs if r["tool"] == tool and r["workload"] == workload
                      and (r.get("trace") or {}).get("stats")]
            if traced:
                stats = traced[-1]["trace"]["stats"]
                lines.append("- kp trace stats, %s/%s (last round): %s" % (
                    tool, workload, ", ".join("%s=%s" % kv for kv in sorted(stats.items()))))
    thread_lines = []
    for tool in ("none", "floor", "kp", "kp_old_defaults"):
        chosen = [r for r in runs if r["tool"] == tool and r["workload"] == "launch_loop"
                  and r.get("threads")]
        if chosen:
            thread_lines.append("| %s | %s |" % (tool, ", ".join(
                "%s%s %.2f s" % (t["comm"], " (main)" if t["main"] else "", t["cpu_s"])
                for t in chosen[-1]["threads"])))
    if thread_lines:
        lines += ["", "CPU time by thread of the launch loop (last round; sampled every 0.1 s "
                  "from /proc, so the exit flush is not in it):", "",
                  "| tool | threads |", "|---|---|"] + thread_lines
    unclean = [r for r in runs if (r.get("trace") or {}).get("clean_end") is False]
    if unclean:
        lines += ["", "Traces without a clean end: " + ", ".join(
            "round %s %s/%s" % (r["round"], r["tool"], r["workload"]) for r in unclean)]
    failed = [r for r in runs if r["rc"] != 0 or not r["outputs"]]
    if failed:
        lines += ["", "## Failed runs", ""]
        for r in failed:
            lines.append("- round %s %s/%s rc %s: %s" % (
                r["round"], r["tool"], r["workload"], r["rc"],
                _last_line(r.get("stderr_tail", "")).replace("|", "/")))
    markdown = "\n".join(lines) + "\n"
    raw = {"setup": setup, "targets": verdicts, "phases": phases, "notes": notes,
           "kp_launch_mode": launch_mode, "convert": convert, "soak": soak,
           "uncompressed_launch_trace": uncompressed, "runs": runs,
           "medians": [{"result": k[0], "metric": k[1], "tool": k[2],
                        **{kk: vv for kk, vv in v.items()}} for k, v in table.items()]}
    return markdown, raw


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist", help="kp install prefix (bin/kptrace, lib/libkpinject.so)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 round, shorter loops (smoke)")
    parser.add_argument("--seed", type=int, default=20260501)
    parser.add_argument("--out", default=os.environ.get("OUT") or os.path.join(HERE, "results"))
    parser.add_argument("--python", default=sys.executable or "python3",
                        help="interpreter with PyTorch for the torch workloads")
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--soak-seconds", type=int, default=0)
    parser.add_argument("--skip-soak", action="store_true")
    parser.add_argument("--cpus", default="auto",
                        help="pin every run to these CPUs ('2-5'), 'auto' (4 CPUs on distinct "
                             "physical cores from CPU 2 when there are 8 or more) or 'all' "
                             "(no pinning)")
    parser.add_argument("--budget-s", type=int, default=540,
                        help="start no round that would push the run (soak included) past this")
    parser.add_argument("--keep-work", action="store_true", help="keep traces and logs")
    parser.add_argument("--paired-passes", type=int, default=0,
                        help="then bench/paired_cost.py with this many passes (~%d s each), "
                             "its tables in the report" % PAIRED_PASS_S)
    parser.add_argument("--paired-tiny-passes", type=int, default=0,
                        help="with --paired-passes: then up to this many passes of kp and the "
                             "floor on tiny ops alone (~%d s each, as many as --budget-s "
                             "allows), pooled with the others" % PAIRED_TINY_PASS_S)
    parser.add_argument("--tools", default="",
                        help="comma list of optional tools to add to none, floor, kp and "
                             "torch_prof_cuda: floor_kernel, floor_old_defaults, "
                             "kp_old_defaults, kp_api_all, floor_api_all, floor_api_kinds, "
                             "kp_nvtx_metrics, torch_prof_cpu_cuda")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = 1
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.paired_passes < 0 or args.paired_tiny_passes < 0:
        parser.error("--paired-passes and --paired-tiny-passes cannot be negative")
    if args.paired_tiny_passes > 0 and args.paired_passes < 1:
        parser.error("--paired-tiny-passes needs --paired-passes: its runs are pooled with "
                     "those passes' tiny-op runs")
    unknown = [t for t in args.tools.split(",") if t and t not in TOOL_ORDER]
    if unknown:
        parser.error("--tools: unknown '%s' (known: %s)" % (unknown[0], ", ".join(TOOL_ORDER)))
    if args.cpus not in ("auto", "all"):
        try:
            parse_cpu_list(args.cpus)
        except ValueError as error:
            parser.error("--cpus: %s (want e.g. 2-5,8, auto or all)" % error)

    present, why = gpu_present()
    if not present:
        print("SKIP: kp overhead benchmark needs an NVIDIA GPU: %s" % why)
        return 0
    for needed in (os.path.join(args.dist, "bin", "kptrace"),
                   os.path.join(args.dist, "lib", "libkpinject.so")):
        if not os.path.exists(needed):
            print("run_bench: %s not found: DIST must be a kp install prefix "
                  "(cmake --install BUILD --prefix DIST)" % needed, file=sys.stderr)
            return 2

    bench = Bench(args)
    try:
        markdown, raw = bench.run()
    except RuntimeError as error:
        print("run_bench: %s" % error, file=sys.stderr)
        return 1
    finally:
        if not args.keep_work:
            shutil.rmtree(bench.work, ignore_errors=True)
        else:
            print("[bench] work dir kept: %s" % bench.work, file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "bench_results.md"), "w") as f:
        f.write(markdown)
    with open(os.path.join(args.out, "bench_raw.json"), "w") as f:
        json.dump(raw, f, indent=1, default=str)
    sys.stdout.write(markdown)
    print("[bench] wrote %s and bench_raw.json" % os.path.join(args.out, "bench_results.md"),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
