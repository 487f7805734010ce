#!/usr/bin/env python3
"""check_pm_sampling.py CSV_DIR PROGRAM_JSON [--tolerance 0.05]: the numeric checks of the
PM-sampling GPU test on one run of tests/gpu/programs/pm_sampling.cu under KP_PM_SAMPLING=gpu.

Reads the run's `kptrace convert --to csv` tables (pm_samples.csv, kernels.csv,
nvtx_ranges.csv, processes.csv) and the program's JSON line (known bytes, event-timed ms).
Prints PASS/FAIL/INFO lines:
  samples     pm_samples.csv has rows and the gpu set's SM and DRAM columns
  span        every sample lies inside the trace's span (first record .. last record + 1 s)
  dram        samples wholly under the Copy kernel read (dram read + write rate) within the
              tolerance of known bytes / the kernel's duration from the same trace
  idle        samples wholly inside the NVTX range "idle" with no kernel under them read SM
              active below 1 %
  fma         samples wholly under the Fma kernel read SM active above 90 %
  alignment   shifting the samples against the kernels: the shift that best matches "SM active
              above 50 %" to "a kernel runs" is within two sample intervals of 0
Standard library only.
"""
import csv
import json
import statistics
import sys

SM = "sm__cycles_active.avg.pct_of_peak_sustained_elapsed"
RD = "dram__bytes_read.sum.per_second"
WR = "dram__bytes_write.sum.per_second"


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(v):
    return float(v) if v not in ("", None) else float("nan")


def main(argv):
    if len(argv) < 3:
        print("usage: check_pm_sampling.py CSV_DIR PROGRAM_JSON [--tolerance 0.05]")
        return 2
    d, prog_path = argv[1], argv[2]
    tol = float(argv[argv.index("--tolerance") + 1]) if "--tolerance" in argv else 0.05
    prog = None
    with open(prog_path) as f:
        for line in f:
            if line.startswith("{"):
                prog = json.loads(line)
    failed = 0

    def result(ok, name, text):
        nonlocal failed
        print(("PASS" if ok else "FAIL") + f" [{name}] {text}")
        failed += 0 if ok else 1

    samples = rows(f"{d}/pm_samples.csv")
    kernels = rows(f"{d}/kernels.csv")
    ranges = rows(f"{d}/nvtx_ranges.csv")
    if prog is None:
        result(False, "program", "no JSON line from the program")
        return 1
    have = bool(samples) and all(c in samples[0] for c in (SM, RD, WR))
    result(have, "samples", f"{len(samples)} samples, columns {list(samples[0].keys())[7:] if samples else []}")
    if not have:
        return 1
    s = [(int(r["start_ns"]), int(r["end_ns"]), num(r[SM]), num(r[RD]) + num(r[WR])) for r in samples]
    s.sort()
    interval = statistics.median(e - b for b, e, _, _ in s)
    print(f"INFO [interval] median sample duration {interval / 1e3:.1f} us")

    times = [int(k["start_ns"]) for k in kernels] + [int(k["end_ns"]) for k in kernels]
    times += [int(r["start_ns"]) for r in ranges] + [int(r["end_ns"]) for r in ranges]
    lo, hi = min(times), max(times)
    procs = rows(f"{d}/processes.csv")
    if procs and procs[0].get("start_time_trace_ns"):
        lo = min(lo, int(procs[0]["start_time_trace_ns"]))
    outside = [x for x in s if x[0] < lo or x[1] > hi + 1_000_000_000]
    result(not outside, "span",
           f"{len(s) - len(outside)}/{len(s)} samples inside the trace span "
           f"[{lo}, {hi} + 1 s]" + (f"; first outside: {outside[0][:2]}" if outside else ""))

    def kernel(name_part, min_ms):
        ks = [k for k in kernels if name_part in k["name"] and int(k["duration_ns"]) >= min_ms * 1e6]
        return max(ks, key=lambda k: int(k["duration_ns"])) if ks else None

    def under(b, e):
        return [x for x in s if x[0] >= b and x[1] <= e]

    copy = kernel("Copy", 50)
    if copy is None:
        result(False, "dram", "no Copy kernel of 50 ms or more in kernels.csv")
    else:
        b, e = int(copy["start_ns"]), int(copy["end_ns"])
        inside = under(b, e)
        expected = prog["copy_bytes"] / ((e - b) * 1e-9)
        if len(inside) < 5:
            result(False, "dram", f"only {len(inside)} samples under the {(e - b) / 1e6:.1f} ms Copy kernel")
        else:
            got = statistics.mean(x[3] for x in inside)
            rel = abs(got - expected) / expected
            result(rel <= tol, "dram",
                   f"{len(inside)} samples under Copy ({(e - b) / 1e6:.2f} ms): dram read+write "
                   f"{got / 1e9:.1f} GB/s; known bytes / kernel duration {expected / 1e9:.1f} GB/s "
                   f"({rel * 100:.2f} % apart, limit {tol * 100:.0f} %); event-timed "
                   f"{prog['copy_bytes_per_s'] / 1e9:.1f} GB/s")
            print(f"INFO [dram] SM active under Copy: mean {statistics.mean(x[2] for x in inside):.1f} %")

    idle = [r for r in ranges if r["name"] == "idle"]
    if not idle:
        result(False, "idle", "no NVTX range 'idle'")
    else:
        b, e = int(idle[0]["start_ns"]), int(idle[0]["end_ns"])
        busy = [(int(k["start_ns"]), int(k["end_ns"])) for k in kernels]
        quiet = [x for x in under(b, e) if not any(kb < x[1] and ke > x[0] for kb, ke in busy)]
        if len(quiet) < 3:
            result(False, "idle", f"only {len(quiet)} samples in the {(e - b) / 1e6:.1f} ms idle gap")
        else:
            worst = max(x[2] for x in quiet)
            result(worst < 1.0, "idle",
                   f"{len(quiet)} samples in the {(e - b) / 1e6:.1f} ms idle gap: SM active at most "
                   f"{worst:.3f} % (limit 1 %)")

    fma = kernel("Fma", 5)
    if fma is None:
        result(False, "fma", "no Fma kernel of 5 ms or more")
    else:
        inside = under(int(fma["start_ns"]), int(fma["end_ns"]))
        low = min((x[2] for x in inside), default=float("nan"))
        result(len(inside) >= 3 and low > 90, "fma",
               f"{len(inside)} samples under Fma ({int(fma['duration_ns']) / 1e6:.2f} ms): SM "
               f"active at least {low:.1f} % (limit 90 %)")

    # Alignment: the shift (samples moved by dt) that best matches busy samples to kernels.
    busy = sorted((int(k["start_ns"]), int(k["end_ns"])) for k in kernels
                  if int(k["duration_ns"]) >= 1_000_000)
    window = [x for x in s if busy and busy[0][0] - 20e6 <= x[0] <= busy[-1][1] + 20e6]

    def score(dt):
        hits = 0
        for b, e, sm, _ in window:
            mid = (b + e) / 2 + dt
            runs = any(kb <= mid <= ke for kb, ke in busy)
            hits += (sm > 50) == runs
        return hits

    # Coarse (+-50 ms in 0.5 ms steps), then fine (quarter intervals around the coarse best).
    coarse = max(range(-50_000_000, 50_000_001, 500_000), key=lambda dt: (score(dt), -abs(dt)))
    step = max(int(interval // 4), 1000)
    shifts = range(coarse - 4 * 500_000, coarse + 4 * 500_000 + 1, step)
    best = max(shifts, key=lambda dt: (score(dt), -abs(dt)))
    print(f"INFO [alignment] first sample [{s[0][0]}, {s[0][1]}], trace start {lo}, "
          f"coarse best shift {coarse / 1e6:+.1f} ms")
    zero = score(0)
    result(abs(best) <= 2 * interval, "alignment",
           f"best shift {best / 1e3:+.1f} us ({score(best)}/{len(window)} samples agree; at 0: "
           f"{zero}); limit two intervals ({2 * interval / 1e3:.0f} us)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
