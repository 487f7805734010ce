"""Capture-window GPU cases (issue 17, item 1), run by run_capture_tests.sh.

Each case runs tests/gpu/capture_loop.py under `kptrace run` with one trigger and checks the trace
exactly: which steps' "idx_<i>" ranges it holds, that every kernel runs inside a captured step,
that the kernel count is the number of captured steps times the kernels of one step (measured
from a full trace of the same loop), and the capture windows kptrace info reports.
"""

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time

from gpu_case_checks import check, log, run_cases

PY = sys.executable
HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "capture_loop.py")
KPTRACE = ""
WORK = ""
PER_STEP = 0


def run(cmd, timeout=120, env=None):
    log("$ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    for line in (p.stdout + p.stderr).splitlines():
        log("    " + line)
    return p


def profile(name, flags, loop_args, env=None):
    path = os.path.join(WORK, name + ".kptrace")
    p = run([KPTRACE, "run", "-o", path, "--force"] + flags + ["--", PY, LOOP] + loop_args,
            env=env)
    check(f"{name}/exit", p.returncode == 0, f"rc {p.returncode}")
    return path


def read(path):
    """(info json, kernels, ranges) of one trace."""
    p = subprocess.run([KPTRACE, "info", "--json", "--file-only", path], capture_output=True,
                       text=True)
    info = json.loads(p.stdout)[0] if p.returncode == 0 else {}
    out = path + "_csv"
    subprocess.run([KPTRACE, "convert", "--file-only", path, "--to", "csv", "-o", out,
                    "--no-progress"], capture_output=True, text=True)
    def rows(name):
        try:
            with open(os.path.join(out, name)) as f:
                return list(csv.DictReader(f))
        except OSError:
            return []
    return info, rows("kernels.csv"), rows("nvtx_ranges.csv")


def steps_of(ranges):
    """{step index: (start, end)} from the idx_<i> ranges."""
    out = {}
    for r in ranges:
        if r["name"].startswith("idx_"):
            out[int(r["name"][4:])] = (int(r["start_ns"]), int(r["end_ns"]))
    return out


def kernels_in(kernels, span):
    return [k for k in kernels if span[0] <= int(k["start_ns"]) and int(k["end_ns"]) <= span[1]]


DETACHED = "CUPTI is detached"
# Work after the steps, outside any range: kp detaches CUPTI ~0.1 s after the last window (it
# waits until no more records come), so a case that expects the detach runs on a while.
TAIL = ["--tail", "0.5"]


def detach_check(name, info, want):
    """Whether kp detached CUPTI after the last window (a trigger that can open no more)."""
    notes = [n["message"] for n in info.get("notices", []) if n.get("component") == "capture"]
    got = any(DETACHED in m for m in notes)
    check(f"{name}/detached" if want else f"{name}/stays-attached", got == want,
          f"capture notices {notes}")


def step_checks(name, path, want_steps, want_windows, detached=True):
    info, kernels, ranges = read(path)
    steps = steps_of(ranges)
    check(f"{name}/steps", sorted(steps) == sorted(want_steps),
          f"captured steps {sorted(steps)}, want {sorted(want_steps)}")
    inside = sum(len(kernels_in(kernels, s)) for s in steps.values())
    check(f"{name}/kernels", len(kernels) == len(want_steps) * PER_STEP and inside == len(kernels),
          f"{len(kernels)} kernels ({inside} inside captured steps), want "
          f"{len(want_steps)} x {PER_STEP}")
    windows = info.get("capture_windows", [])
    check(f"{name}/windows", len(windows) == want_windows,
          f"{len(windows)} windows, want {want_windows}: "
          + "; ".join(f"{w['trigger']} {w['first_step']}..{w['last_step']} {w['end_reason']}"
                      for w in windows))
    check(f"{name}/clean", info.get("clean_end") is True and not info.get("damage"),
          f"end {info.get('end_reason')}, damage {info.get('damage')}, stats {info.get('stats')}")
    detach_check(name, info, detached)
    return info, kernels, ranges


def case_full():
    global PER_STEP
    path = profile("full", [], ["--steps", "12"])
    info, kernels, ranges = read(path)
    steps = steps_of(ranges)
    counts = [len(kernels_in(kernels, steps[i])) for i in sorted(steps)]
    PER_STEP = counts[5] if len(counts) > 5 else 0
    check("full/steps", sorted(steps) == list(range(12)), f"steps {sorted(steps)}")
    check("full/per-step", PER_STEP > 0 and all(c == PER_STEP for c in counts),
          f"kernels per step {counts}")
    check("full/no-window", bool(info) and "capture_windows" not in info,
          "no trigger: no window record")
    detach_check("full", info, False)


def case_nvtx_first():
    path = profile("nvtx-first", ["--capture-range", "step"], ["--steps", "12"] + TAIL)
    info, _, _ = step_checks("nvtx-first", path, [0], 1)


def case_nvtx_every():
    # --capture-range-end repeat (no N): a window per step; another can always open, so CUPTI
    # stays attached to the end.
    path = profile("nvtx-every", ["--capture-range", "step", "--capture-range-end", "repeat"],
                   ["--steps", "6"])
    step_checks("nvtx-every", path, list(range(6)), 6, detached=False)


def case_nvtx_repeat():
    path = profile("nvtx-repeat", ["--capture-range", "step", "--capture-range-end", "repeat:3"],
                   ["--steps", "12"] + TAIL)
    info, _, _ = step_checks("nvtx-repeat", path, [0, 1, 2], 3)
    reasons = [w["end_reason"] for w in info.get("capture_windows", [])]
    check("nvtx-repeat/reasons", reasons == ["range end"] * 3, f"{reasons}")


def case_schedule():
    # torch.profiler.schedule(wait=3, warmup=1, active=2, repeat=2): steps 4,5 and 10,11.
    path = profile("schedule", ["--capture-schedule", "step:3,1,2,2"], ["--steps", "14"] + TAIL)
    info, _, _ = step_checks("schedule", path, [4, 5, 10, 11], 2)
    spans = [(w["first_step"], w["last_step"]) for w in info.get("capture_windows", [])]
    check("schedule/window-steps", spans == [(4, 5), (10, 11)], f"{spans}")


def case_window_k_n():
    # A window over steps 5..7 of a 12-step loop: wait 5, active 3, once.
    path = profile("steps-5-7", ["--capture-schedule", "step:5,0,3,1"], ["--steps", "12"] + TAIL)
    step_checks("steps-5-7", path, [5, 6, 7], 1)


def case_window_at_end():
    # The window holds the last steps: the detach starts while the program ends (the exit finish
    # then either finds CUPTI detached or cancels the detach and flushes as usual).
    name = "window-at-end"
    path = profile(name, ["--capture-schedule", "step:5,0,3,1"], ["--steps", "8"])
    info, kernels, ranges = read(path)
    steps = steps_of(ranges)
    check(f"{name}/steps", sorted(steps) == [5, 6, 7], f"captured steps {sorted(steps)}")
    check(f"{name}/kernels", len(kernels) == 3 * PER_STEP, f"{len(kernels)} kernels, want "
          f"3 x {PER_STEP}")
    check(f"{name}/clean", info.get("clean_end") is True and not info.get("damage"),
          f"end {info.get('end_reason')}, damage {info.get('damage')}")


def case_graphs_after_window():
    # CUDA graph captures run while kp detaches CUPTI (a window over steps 1-2, then 3 s of
    # captures and replays): none may fail, every replay matches the eager result.
    name = "graphs-after-window"
    path = os.path.join(WORK, name + ".kptrace")
    p = run([KPTRACE, "run", "-o", path, "--force", "--capture-schedule", "step:1,0,2,1", "--",
             PY, LOOP, "--steps", "4", "--graphs", "3"])
    graphs = [l for l in p.stdout.splitlines() if l.startswith("graphs ")]
    check(f"{name}/exit", p.returncode == 0 and graphs and graphs[-1].endswith(" ok"),
          f"rc {p.returncode}, {graphs}")
    info, kernels, ranges = read(path)
    check(f"{name}/steps", sorted(steps_of(ranges)) == [1, 2] and len(kernels) == 2 * PER_STEP,
          f"steps {sorted(steps_of(ranges))}, {len(kernels)} kernels, want 2 x {PER_STEP}")
    detach_check(name, info, True)


def case_profiler_api():
    path = profile("profiler-api", ["--capture", "cudaProfilerApi"],
                   ["--steps", "12", "--profiler", "3,6"] + TAIL)
    info, _, _ = step_checks("profiler-api", path, [3, 4, 5, 6], 1)
    w = info.get("capture_windows", [{}])
    check("profiler-api/reason", w and w[0].get("end_reason") == "cudaProfilerStop", f"{w}")


def case_edge_probe():
    """What CUPTI delivers at window edges (the behaviour docs/capture-windows.md states)."""
    path = profile("edge", ["--capture", "cudaProfilerApi"], ["--edge"] + TAIL)
    info, kernels, ranges = read(path)
    spin = [k for k in kernels if "spin" in k["name"].lower() or "sleep" in k["name"].lower()]
    names = sorted(set(k["name"][:60] for k in kernels))
    log(f"    edge: {len(kernels)} kernels, spin {len(spin)}, names {names}")
    log("    edge ranges: " + "; ".join(f"{r['name']} open={r['open']} {r['start_ns']}..{r['end_ns']}"
                                      for r in ranges))
    windows = info.get("capture_windows", [])
    log(f"    edge windows: {windows}")
    check("edge/launched-inside-finishing-after-kept", len(spin) >= 1,
          "the spin kernel launched inside the window and running at cudaProfilerStop is kept")
    check("edge/launched-before-dropped", len(spin) == 1,
          f"{len(spin)} spin kernels: the one launched before cudaProfilerStart is not recorded")
    check("edge/work-kept", len(kernels) - len(spin) == PER_STEP,
          f"{len(kernels) - len(spin)} work kernels in the window, want {PER_STEP}")
    # The spin kernel still runs when the window closes: kp detaches CUPTI only once it is done,
    # so its record (checked above) is complete.
    detach_check("edge", info, True)
    spin_done = [k for k in spin if int(k["end_ns"]) > int(k["start_ns"]) > 0]
    check("edge/detach-waits-for-running-work", len(spin_done) == len(spin),
          f"{len(spin_done)} of {len(spin)} spin kernels with a start and an end")


def wait_ready(path, timeout=60):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            with open(path) as f:
                return int(f.read().strip())
        time.sleep(0.05)
    return 0


def case_on_demand():
    name = "on-demand"
    path = os.path.join(WORK, name + ".kptrace")
    ready = os.path.join(WORK, name + ".ready")
    cmd = [KPTRACE, "run", "-o", path, "--force", "--capture", "signal", "--", PY, LOOP,
           "--steps", "150", "--sleep", "0.01", "--ready-file", ready]
    log("$ " + " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pid = wait_ready(ready)
    time.sleep(0.3)
    # start through the launcher's pid (kptrace finds the traced child), stop through the child's
    s = run([KPTRACE, "start", str(proc.pid)])
    check(f"{name}/start", s.returncode == 0 and str(pid) in s.stdout, f"rc {s.returncode}")
    time.sleep(0.4)
    t = run([KPTRACE, "stop", str(pid)])
    check(f"{name}/stop", t.returncode == 0, f"rc {t.returncode}")
    out, _ = proc.communicate(timeout=120)
    for line in out.splitlines():
        log("    " + line)
    check(f"{name}/exit", proc.returncode == 0, f"rc {proc.returncode}")
    info, kernels, ranges = read(path)
    windows = info.get("capture_windows", [])
    check(f"{name}/window", len(windows) == 1 and windows[0]["end_reason"] == "kptrace stop"
          and windows[0]["trigger"] == "on demand", f"{windows}")
    detach_check(name, info, False)  # another `kptrace start` may come
    steps = steps_of(ranges)
    whole = [i for i in steps if len(kernels_in(kernels, steps[i])) == PER_STEP]
    w0 = windows[0] if windows else {"start_ns": 0, "end_ns": 0}
    early = [k for k in kernels if int(k["start_ns"]) < w0["start_ns"]]
    check(f"{name}/kernels", len(kernels) > 0 and not early
          and len(kernels) <= (len(steps) + 1) * PER_STEP and len(whole) >= len(steps) - 2,
          f"{len(kernels)} kernels over {len(steps)} steps ({len(whole)} whole), "
          f"{len(early)} before the window")
    # Refused without harm: a process that kp does not trace with KP_CAPTURE=signal.
    sleeper = subprocess.Popen(["sleep", "30"])
    r = run([KPTRACE, "start", str(sleeper.pid)])
    time.sleep(0.2)
    check(f"{name}/refuses-untraced", r.returncode == 1 and sleeper.poll() is None,
          f"rc {r.returncode}, process alive: {sleeper.poll() is None}")
    sleeper.kill()
    sleeper.wait()


def case_delay_duration():
    name = "delay-duration"
    path = profile(name, ["--delay", "1", "--duration", "0.5"],
                   ["--steps", "200", "--sleep", "0.01"])
    info, kernels, ranges = read(path)
    windows = info.get("capture_windows", [])
    base = int(info.get("header", {}).get("start_time_trace_ns", 0) or 0)
    ok = len(windows) == 1
    w = windows[0] if ok else {"start_ns": 0, "end_ns": 0}
    length = (w["end_ns"] - w["start_ns"]) / 1e9
    after = (w["start_ns"] - base) / 1e9 if base else -1
    check(f"{name}/window", ok and 0.49 <= length <= 0.7 and w.get("end_reason") == "duration",
          f"{len(windows)} windows, {length:.3f} s long, opened {after:.3f} s after start, {w}")
    early = [k for k in kernels if int(k["start_ns"]) < w["start_ns"]]
    late = [k for k in kernels if int(k["start_ns"]) > w["end_ns"] + 50_000_000]
    check(f"{name}/kernels", len(kernels) > 0 and not early and not late,
          f"{len(kernels)} kernels, {len(early)} before, {len(late)} long after the window")
    detach_check(name, info, True)


def case_bad_value():
    p = run([KPTRACE, "run", "-o", os.path.join(WORK, "bad.kptrace"), "--force",
             "--capture-schedule", "step:1,1", "--", PY, "-c", "import torch; torch.zeros(1, device='cuda')"])
    lines = [l for l in p.stderr.splitlines() if "KP_CAPTURE_SCHEDULE" in l]
    check("bad-value/one-line", p.returncode == 0 and len(lines) == 1,
          f"rc {p.returncode}, lines naming the variable: {len(lines)}")


def main():
    global KPTRACE, WORK
    ap = argparse.ArgumentParser()
    ap.add_argument("--kptrace", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    KPTRACE, WORK = a.kptrace, a.work
    os.makedirs(WORK, exist_ok=True)
    cases = {
        "full": case_full,
        "nvtx-first": case_nvtx_first,
        "nvtx-repeat": case_nvtx_repeat,
        "nvtx-every": case_nvtx_every,
        "schedule": case_schedule,
        "steps-5-7": case_window_k_n,
        "window-at-end": case_window_at_end,
        "graphs-after-window": case_graphs_after_window,
        "profiler-api": case_profiler_api,
        "edge": case_edge_probe,
        "on-demand": case_on_demand,
        "delay-duration": case_delay_duration,
        "bad-value": case_bad_value,
    }
    return run_cases(cases, a.only, always=("full",))


if __name__ == "__main__":
    sys.exit(main())
