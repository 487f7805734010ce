#!/usr/bin/env python3
"""check_targeting.py: checks a kernel-mode run of programs/metrics_targeting.cu with kernel
targeting against the launches it should have measured.

  check_targeting.py --csv DIR --label NAME --expect KERNEL:GRID_X[,KERNEL:GRID_X...]

DIR is `kptrace convert --to csv` output. Passes when metrics.csv holds exactly the expected
launches (kernel name by substring, grid_x from the kernel record of the same correlation id),
every one with values, and every kernel record not measured has real timing (start < end: it
was not serialized into a replay, which CUPTI reports as start = end = 0).
Prints PASS/FAIL lines like compare_metrics.py; standard library only.
"""
import argparse
import csv
import math
import os
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--expect", required=True)
    a = ap.parse_args()
    want = []
    for item in a.expect.split(","):
        name, grid = item.rsplit(":", 1)
        want.append((name, int(grid)))
    with open(os.path.join(a.csv, "kernels.csv"), newline="") as f:
        kernels = list(csv.DictReader(f))
    with open(os.path.join(a.csv, "metrics.csv"), newline="") as f:
        reader = csv.DictReader(f)
        fixed = set("file,pid,range,domain,occurrence,occurrences_used,start_ns,end_ns,"
                    "duration_ns,t_ms,device,thread_id,correlation,nesting_level,sm_clock_khz,"
                    "consistent,occurrence_min_ns,occurrence_max_ns,config".split(","))
        metric_cols = [c for c in reader.fieldnames if c not in fixed]
        rows = list(reader)
    by_corr = {k["correlation"]: k for k in kernels if k.get("profiler_internal") in ("0", "")}
    got = []
    ok = True
    for r in rows:
        k = by_corr.get(r["correlation"])
        grid = int(k["grid_x"]) if k else -1
        got.append((r["range"], grid))
        values = [r[c] for c in metric_cols if r[c] not in ("", "nan", "NaN")]
        if not values or any(math.isnan(float(v)) for v in values):
            print(f"FAIL [{a.label}/values] {r['range']} grid {grid}: no values")
            ok = False
    print(f"INFO [{a.label}] measured: {got}")
    matched = len(got) == len(want) and all(
        w[0] in g[0] and w[1] == g[1] for g, w in zip(got, want))
    if matched:
        print(f"PASS [{a.label}/selected] exactly {len(want)} launch(es): {a.expect}")
    else:
        print(f"FAIL [{a.label}/selected] expected {want}, measured {got}")
        ok = False
    measured = {r["correlation"] for r in rows}
    untimed = [(k["name"], k["grid_x"]) for k in kernels
               if k["correlation"] not in measured and k.get("profiler_internal") in ("0", "")
               and int(k["end_ns"] or 0) <= int(k["start_ns"] or 0)]
    program = [k for k in kernels if "target_scale" in k["name"] or "other_add" in k["name"]]
    # kp's own relaunches (further passes of a multi-pass set) are profiler-internal records of
    # the measured launches' correlation ids; the application's records are the others.
    own = [k for k in program if k.get("profiler_internal") in ("0", "")]
    relaunched = [k for k in program if k not in own]
    stray = [(k["name"], k["correlation"]) for k in relaunched if k["correlation"] not in measured]
    if stray:
        print(f"FAIL [{a.label}/relaunches] profiler-internal records of launches not measured: "
              f"{stray}")
        ok = False
    else:
        print(f"PASS [{a.label}/relaunches] {len(relaunched)} relaunch record(s), all of "
              f"measured launches")
    if untimed:
        print(f"FAIL [{a.label}/others_timed] launches not selected but untimed (replayed?): "
              f"{untimed}")
        ok = False
    else:
        print(f"PASS [{a.label}/others_timed] all {len(own) - len(measured)} launches not "
              f"selected have real timing (no replay)")
    if len(own) != 20:
        print(f"FAIL [{a.label}/records] {len(own)} kernel records of the program, expected 20")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
