#!/usr/bin/env python3
"""Cost attribution per record kind (called by bench/attribution.sh; standard library only).

Runs the three workloads (empty-kernel launch loop, PyTorch tiny-op loop, transformer training
step; the two PyTorch ones in one process, bench/workloads/torch_suite.py) under a set of
configurations, in interleaved rounds with a fresh shuffled order per round, every run pinned to
the same CPUs. A configuration is no tool, the bare CUPTI floor (bench/floor) with a given
KPFLOOR_KINDS, kp with given KP_* settings, or torch.profiler (CUDA only). Then for each kind:
CUPTI's own cost (floor with kernels + kind minus floor with kernels) and kp's cost on top (kp
with the same kinds minus the floor with the same kinds). Medians and spread (min..max).

Writes OUT/attribution.md and OUT/attribution_raw.json. Stops starting rounds when the next one
would pass --budget-s.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_bench import (FLOOR_KINDS_OF_KP_DEFAULTS, median, parse_cpu_list,  # noqa: E402
                       parse_floor_line, parse_json_lines)

# name -> (kind of tool, setting). Floor settings are KPFLOOR_KINDS; kp settings KP_* pairs.
PRESETS = {
    "none": ("none", None),
    "torch_prof_cuda": ("torch_prof", "cuda"),
    "f_kernel": ("floor", "kernel"),
    "f_memcpy": ("floor", "kernel,memcpy"),
    "f_memset": ("floor", "kernel,memset"),
    "f_sync": ("floor", "kernel,sync"),
    "f_overhead": ("floor", "kernel,overhead"),
    "f_nvtx": ("floor", "kernel,nvtx"),
    "f_api_launch": ("floor", "kernel,api_launch"),
    "f_api_all": ("floor", "kernel,runtime,driver"),
    "f_cb_launch": ("floor", "kernel,cb_launch"),
    "f_cb_api": ("floor", "kernel,cb_api"),
    "f_cb_sync": ("floor", "kernel,cb_sync"),
    "f_lazy_copy": ("floor", "kernel,lazy_copy"),
    "f_old_default": ("floor", "kernel,memcpy,memset,api_launch,nvtx,sync,overhead"),
    # What kp enables by default.
    "f_default": ("floor", FLOOR_KINDS_OF_KP_DEFAULTS),
    "kp_kernel": ("kp", {"KP_ACTIVITIES": "kernel"}),
    "kp_default": ("kp", {}),
    "kp_old_default": ("kp", {"KP_ACTIVITIES": "kernel,memcpy,memset,api,nvtx,sync,overhead",
                              "KP_API": "launch-activity"}),
}

# (kind, floor config with kernels + kind, kp config with the same kinds or None)
KIND_ROWS = (
    ("memcpy", "f_memcpy", "kp_memcpy"),
    ("memset", "f_memset", "kp_memset"),
    ("sync", "f_sync", "kp_sync"),
    ("overhead", "f_overhead", "kp_overhead"),
    ("nvtx marker", "f_nvtx", "kp_nvtx"),
    ("API activity, launch-related cbids", "f_api_launch", "kp_api_launch"),
    ("API activity, every call", "f_api_all", "kp_api_all"),
    ("callbacks, launch cbids", "f_cb_launch", None),
    ("callbacks, launch-related cbids (KP_API=launch)", "f_cb_api", "kp_api"),
    ("callbacks, sync cbids", "f_cb_sync", None),
    ("memcpy+memset enabled at first copy call", "f_lazy_copy", None),
)

METRICS = (("launch_loop", "us_per_launch", "us/launch", 1.0),
           ("tiny_ops", "us_per_iter", "us/iter", 5.0),
           ("transformer", "step_ms", "ms/step", None))


def spread(values):
    data = sorted(v for v in values if v is not None)
    if not data:
        return "n/a"
    return "%.3g..%.3g" % (data[0], data[-1])


class Attribution:
    def __init__(self, args):
        self.args = args
        self.dist = os.path.abspath(args.dist)
        self.work = tempfile.mkdtemp(prefix="kpattr-")
        self.cpus = parse_cpu_list(args.cpus) if args.cpus != "all" else None
        self.runs = []
        self.cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
        self.floor = os.path.join(self.dist, "lib", "libkpfloor.so")
        self.configs = {}
        for name in args.configs.split(","):
            if name in PRESETS:
                self.configs[name] = PRESETS[name]
            elif name.startswith("kp_"):  # kp_<kind>: KP_ACTIVITIES=kernel,<kind>
                kind = name[3:]
                env = {"KP_ACTIVITIES": "kernel," + ("api" if kind.startswith("api") else kind)}
                if kind == "api_all":
                    env["KP_API"] = "all"
                elif kind == "api_launch":
                    env["KP_API"] = "launch-activity"
                elif kind == "api":
                    env["KP_API"] = "launch"  # from callbacks
                self.configs[name] = ("kp", env)
            else:
                raise SystemExit("attribution: unknown configuration '%s'; known: %s, kp_<kind>"
                                 % (name, ", ".join(PRESETS)))

    def build(self):
        self.launch_loop = os.path.join(self.work, "launch_loop")
        nvcc = os.path.join(self.cuda_home, "bin", "nvcc")
        subprocess.run([nvcc, "-O2", "-arch=sm_90", "-o", self.launch_loop,
                        os.path.join(HERE, "workloads", "launch_loop.cu")], check=True)

    def env_for(self, name):
        tool, setting = self.configs[name]
        env = dict(os.environ)
        for key in list(env):
            if key.startswith(("KP_", "KPFLOOR_")) or key in ("CUDA_INJECTION64_PATH",
                                                              "NVTX_INJECTION64_PATH"):
                del env[key]
        env["PYTHONUNBUFFERED"] = "1"
        torch_args = []
        if tool == "floor":
            env["CUDA_INJECTION64_PATH"] = self.floor
            env["KPFLOOR_KINDS"] = setting
            if "nvtx" in setting.split(","):  # the floor forwards NVTX to the process's libcupti
                env["NVTX_INJECTION64_PATH"] = self.floor
        elif tool == "kp":
            env["CUDA_INJECTION64_PATH"] = os.path.join(self.dist, "lib", "libkpinject.so")
            env["NVTX_INJECTION64_PATH"] = env["CUDA_INJECTION64_PATH"]
            env["KP_LOG"] = "quiet"
            env["KP_OUTPUT"] = os.path.join(self.work, "trace-%s-%%p.kptrace" % name)
            env.update(setting)
        elif tool == "torch_prof":
            torch_args = ["--torch-profiler", setting]
        return env, torch_args

    def run(self, name, workload, round_index, extra=None):
        env, torch_args = self.env_for(name)
        if workload == "launch_loop":
            argv = [self.launch_loop, "--launches", str(self.args.launches), "--copies", "2000"]
        else:
            argv = [sys.executable, os.path.join(HERE, "workloads", "torch_suite.py"),
                    "--tiny-iterations", str(self.args.tiny_iterations), "--steps",
                    str(self.args.steps), "--warmup-steps", "2"] + torch_args + (extra or [])
        for f in os.listdir(self.work):
            if f.startswith("trace-"):
                os.remove(os.path.join(self.work, f))
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120,
                              preexec_fn=(lambda: os.sched_setaffinity(0, self.cpus))
                              if self.cpus else None)
        record = {"config": name, "workload": workload, "round": round_index, "rc": done.returncode,
                  "wall_s": round(time.perf_counter() - start, 2),
                  "outputs": parse_json_lines(done.stdout),
                  "floor": parse_floor_line(done.stderr)}
        if done.returncode != 0:
            record["stderr_tail"] = done.stderr[-800:]
        self.runs.append(record)
        return record

    def kind_counts(self):
        """Records per kind per tiny-op iteration: one untimed floor run of the tiny-op loop
        with every kind and every API call recorded (which calls per op make the records)."""
        env, _ = self.env_for("none")
        env["CUDA_INJECTION64_PATH"] = self.floor
        env["KPFLOOR_KINDS"] = "kernel,memcpy,memset,sync,overhead,runtime,driver"
        iterations, warmup = 2000, 300
        argv = [sys.executable, os.path.join(HERE, "workloads", "torch_tiny_ops.py"),
                "--iterations", str(iterations), "--warmup", str(warmup)]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        floor = parse_floor_line(done.stderr) or {}
        return {"iterations_incl_warmup": iterations + warmup, "floor": floor}

    def main(self):
        t0 = time.perf_counter()
        self.build()
        counts = self.kind_counts()
        rng = random.Random(self.args.seed)
        last_round = 0.0
        rounds_done = 0
        for r in range(1, self.args.rounds + 1):
            elapsed = time.perf_counter() - t0
            if r > 1 and elapsed + last_round > self.args.budget_s:
                print("[attr] stopping after %d rounds (%.0f s used, a round takes %.0f s)" % (
                    r - 1, elapsed, last_round), file=sys.stderr, flush=True)
                break
            started = time.perf_counter()
            order = list(self.configs)
            rng.shuffle(order)
            for name in order:
                for workload in ("launch_loop", "torch"):
                    if self.configs[name][0] == "torch_prof" and workload == "launch_loop":
                        continue
                    self.run(name, workload, r)
            last_round = time.perf_counter() - started
            rounds_done = r
            print("[attr] round %d: %.0f s" % (r, last_round), file=sys.stderr, flush=True)
        markdown = self.report(counts, rounds_done)
        os.makedirs(self.args.out, exist_ok=True)
        with open(os.path.join(self.args.out, "attribution.md"), "w") as f:
            f.write(markdown)
        with open(os.path.join(self.args.out, "attribution_raw.json"), "w") as f:
            json.dump({"counts": counts, "runs": self.runs, "rounds": rounds_done}, f, indent=1)
        sys.stdout.write(markdown)
        shutil.rmtree(self.work, ignore_errors=True)

    def values(self, name, result_key, metric):
        return [r["outputs"].get(result_key, {}).get(metric) for r in self.runs
                if r["config"] == name]

    def report(self, counts, rounds):
        lines = ["# Cost attribution per record kind", "",
                 "%d interleaved rounds (shuffled order per round), medians, spread = min..max "
                 "over rounds; pinned to CPUs %s. floor = bench/floor with KPFLOOR_KINDS; kp = "
                 "libkpinject.so with the KP_* settings shown." % (rounds, self.args.cpus), ""]
        med = {}
        for key, metric, unit, _ in METRICS:
            for name in self.configs:
                med[(key, name)] = median(self.values(name, key, metric))
        lines += ["## Medians per configuration", "",
                  "| configuration | setting | " + " | ".join(
                      "%s (%s) median, added, spread" % (k, u) for k, _, u, _ in METRICS) + " |",
                  "|---|---|" + "---|" * len(METRICS)]
        for name, (tool, setting) in self.configs.items():
            cells = []
            for key, metric, unit, _ in METRICS:
                m, base = med[(key, name)], med[(key, "none")]
                if m is None:
                    cells.append("–")
                    continue
                added = m - base if base is not None else None
                cells.append("%.3f (%s) [%s]" % (m, "%+.3f" % added if added is not None
                                                 else "n/a", spread(self.values(name, key,
                                                                                metric))))
            shown = setting if isinstance(setting, str) else ",".join(
                "%s=%s" % kv for kv in sorted((setting or {}).items())) or "defaults"
            lines.append("| %s | %s | %s |" % (name, tool + ": " + (shown or ""),
                                                " | ".join(cells)))
        lines += ["", "## Per kind: CUPTI's own cost and kp's on top", "",
                  "CUPTI = floor(kernel + kind) - floor(kernel); kp on top = kp(same kinds) - "
                  "floor(same kinds). Per kernel: launch loop 1 kernel per launch, tiny ops 5 "
                  "per iteration.", "",
                  "| kind | " + " | ".join("%s CUPTI | %s kp on top" % (k, k)
                                           for k, _, _, _ in METRICS) + " |",
                  "|---|" + "---|---|" * len(METRICS)]
        for kind, floor_name, kp_name in KIND_ROWS:
            if floor_name not in self.configs:
                continue
            cells = []
            for key, _, _, _ in METRICS:
                f, fk = med.get((key, floor_name)), med.get((key, "f_kernel"))
                k = med.get((key, kp_name)) if kp_name in self.configs else None
                cells.append("%+.3f" % (f - fk) if f is not None and fk is not None else "–")
                cells.append("%+.3f" % (k - f) if k is not None and f is not None else "–")
            lines.append("| %s | %s |" % (kind, " | ".join(cells)))
        pairs = (("kp_kernel", "f_kernel"), ("kp_old_default", "f_old_default"),
                 ("kp_default", "f_default"))
        lines += ["", "## kp against the floor of the same kinds", "",
                  "| kp | floor | " + " | ".join("%s kp added / floor added" % k
                                                for k, _, _, _ in METRICS) + " |",
                  "|---|---|" + "---|" * len(METRICS)]
        for kp_name, floor_name in pairs:
            if kp_name not in self.configs or floor_name not in self.configs:
                continue
            cells = []
            for key, _, _, _ in METRICS:
                base, k, f = med.get((key, "none")), med.get((key, kp_name)), med.get(
                    (key, floor_name))
                if None in (base, k, f) or f == base:
                    cells.append("–")
                else:
                    cells.append("%+.3f / %+.3f = %.2f" % (k - base, f - base,
                                                           (k - base) / (f - base)))
            lines.append("| %s | %s | %s |" % (kp_name, floor_name, " | ".join(cells)))
        floor = counts.get("floor") or {}
        n = counts["iterations_incl_warmup"]
        lines += ["", "## Records per tiny-op iteration (5 ops)", "",
                  "One untimed run of bench/workloads/torch_tiny_ops.py (%d iterations incl. "
                  "warm-up) under the floor with every kind and every API call recorded:" % n, ""]
        for kind, count in sorted((floor.get("kinds") or {}).items()):
            lines.append("- %s: %d records, %.2f per iteration" % (kind, count, count / n))
        lines += ["", "Most frequent API calls (per iteration):", ""]
        for api, count in (floor.get("api_top") or {}).items():
            lines.append("- %s: %.2f" % (api, count / n))
        failed = [r for r in self.runs if r["rc"] != 0]
        if failed:
            lines += ["", "## Failed runs", ""]
            for r in failed:
                lines.append("- %s/%s round %d rc %d: %s" % (
                    r["config"], r["workload"], r["round"], r["rc"],
                    (r.get("stderr_tail") or "").strip().splitlines()[-1:]))
        return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--configs", default=",".join(PRESETS))
    parser.add_argument("--cpus", default="2-5")
    parser.add_argument("--budget-s", type=float, default=380)
    parser.add_argument("--tiny-iterations", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--launches", type=int, default=50000)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--out", default=os.environ.get("OUT") or os.path.join(HERE, "results"))
    args = parser.parse_args()
    Attribution(args).main()
    return 0


if __name__ == "__main__":
    sys.exit(main())
