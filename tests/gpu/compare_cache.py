"""kp against ncu --cache-control all, kernel by kernel: the check behind the "cache" section of
tests/gpu/run_metrics_tests.sh (every measured kernel starts from a flushed L2, as under ncu).

    compare_cache.py --label cache_kernel1 --mode kernel --kp DIR --ncu NCU.csv --metrics M1,M2,...

DIR is `kptrace convert X.kptrace --to csv -o DIR` (metrics.csv; in range mode also
nvtx_ranges.csv, kernels.csv and api.csv); NCU.csv is `ncu --csv --page raw --print-units base`
output, read with compare_metrics.py's own parser (imported, not copied).

Kernels are grouped by regex on the name (--kernel KEY=REGEX, tried in order; default: the five
kernels of programs/metrics_cache.cu, cuBLAS's "gemm" first so that no library kernel lands in
one of the program's own groups). In kernel mode kp's rows are kernels (range = mangled name);
the first --skip-first launches of each kernel name (warm-ups) are dropped on both sides, then
each group's value is compare_metrics.per_call: the median over its launches per kernel name,
summed over the names for .sum metrics (cuBLAS may launch more than one kernel per call). In
range mode kp's rows are the NVTX ranges named KEY (kp's KP_METRICS_SKIP already dropped the
first occurrence); a range is compared only when it holds exactly one kernel launch (counted from
kp's own api/kernels/nvtx CSVs), else its lines are INFO; gpu__time_duration.sum and percentages
cover the whole range there (launch and sync gaps) and are INFO.

With --ncu-also NCU2.csv (ncu's other replay mode of the same set: a multi-pass set is compared
with ncu's application replay, which saves no memory, and its kernel replay, which saves the
memory before its first pass as kp must) a value passes against either reference, and the line
gives both deviations.

A value passes when |kp - ncu| <= --tolerance (2 %) of ncu, or, for a metric whose name holds
"bytes", when |kp - ncu| <= --bytes-floor (1e6 bytes: e.g. read_only's ~0 dram writes), or, for
a percentage (.pct_), when |kp - ncu| <= --pct-floor points (default 0: off). One line per
(mode, kernel, metric): `PASS [label/kernel/metric] ...` or `FAIL [...]` with kp, ncu and the
deviation; INFO lines are reported, never counted.
"""

import argparse
import csv
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_metrics as cm  # noqa: E402  (its ncu parser, medians and per-call sums)

DEFAULT_KERNELS = [
    ("gemm_cublas", r"gemm"),
    ("write_heavy", r"write_heavy"),
    ("read_only", r"read_only"),
    ("reduction", r"reduction"),
    ("atomic_hist", r"atomic_hist"),
    ("null_kernel", r"null_kernel"),
]
# Printed in the program's launch order.
PRINT_ORDER = ["write_heavy", "null_kernel", "read_only", "reduction", "atomic_hist",
               "gemm_cublas"]
# The kernel that reads and writes nothing: its DRAM bytes are the tool's own. Checked against
# the bytes floor alone (its time and percentages are reported); ncu's value is printed beside.
NULL_KERNEL = "null_kernel"


def configure(kernels, metrics):
    """Points compare_metrics' module-level tables at this comparison's kernels and metrics:
    its read_ncu, add_row, empty_result, classify and per_call read them at call time."""
    cm.KERNELS = dict(kernels)
    cm.METRICS = list(metrics)
    cm.ADDITIVE = {m for m in metrics if m.endswith(".sum") or m == "sm__cycles_active.avg"}


def read_kp_kernels(path, skip_first):
    """Kernel-mode rows of kp's metrics.csv grouped like cm.read_ncu's result, in launch order
    (correlation), the first skip_first launches of each kernel name dropped."""
    rows = cm.read_table(path)
    rows.sort(key=lambda r: cm.num(r.get("correlation")))
    return cm.group_launches(((row.get("range", ""), {m: cm.num(row[m]) for m in cm.METRICS
                                                     if m in row}) for row in rows), skip_first)


def read_kp_ranges(path):
    """Range-mode rows of kp's metrics.csv: {key: {range name: {metric: [values]}}}."""
    rows = cm.read_table(path)
    result = cm.empty_result()
    n = 0
    for row in rows:
        name = row.get("range", "")
        if name not in cm.KERNELS:
            continue
        n += 1
        cm.add_row(result, name, name, {m: cm.num(row[m]) for m in cm.METRICS if m in row})
    return result, n


def launches_per_range(csv_dir, names):
    """{range name: (most application kernel launches in one occurrence, occurrences)}, counting
    the kernels whose launch call (api.csv, joined by pid and correlation) started inside the
    occurrence (metrics_cache has one thread; the profiler's own kernels, profiler_internal,
    excluded); None where kp's CSVs cannot tell."""
    try:
        ranges = cm.read_table(os.path.join(csv_dir, "nvtx_ranges.csv"))
        kernels = cm.read_table(os.path.join(csv_dir, "kernels.csv"))
        api = cm.read_table(os.path.join(csv_dir, "api.csv"))
    except (OSError, ValueError) as e:
        cm.out("INFO", "launches", f"cannot count the kernels per range: {e}")
        return {}
    launch = {}
    for a in api:
        launch[(a.get("pid"), a.get("correlation"))] = cm.num(a.get("start_ns"))
    app = [k for k in kernels if k.get("profiler_internal") not in ("1", "true", "True")]
    result = {}
    for name in names:
        occ = [r for r in ranges if r.get("name") == name]
        most = 0
        for r in occ:
            start, end = cm.num(r.get("start_ns")), cm.num(r.get("end_ns"))
            count = 0
            for k in app:
                t = launch.get((k.get("pid"), k.get("correlation")))
                if t is not None and start <= t <= end:
                    count += 1
            most = max(most, count)
        result[name] = (most, len(occ)) if occ else None
    return result


def verdict(metric, kp, ncu, a):
    """(passed, why)"""
    if math.isnan(kp) or math.isnan(ncu):
        return False, "a value is missing (NaN)"
    diff = abs(kp - ncu)
    if diff <= a.tolerance * abs(ncu):
        return True, f"within {100 * a.tolerance:g} %"
    if "bytes" in metric and diff <= a.bytes_floor:
        return True, f"within the {a.bytes_floor:g}-byte floor"
    if ".pct_" in metric and a.pct_floor > 0 and diff <= a.pct_floor:
        return True, f"within {a.pct_floor:g} points"
    floor = f" nor the {a.bytes_floor:g}-byte floor" if "bytes" in metric else ""
    return False, f"not within {100 * a.tolerance:g} %{floor}"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--label", required=True, help="first part of each check's name")
    p.add_argument("--mode", choices=("kernel", "range"), required=True)
    p.add_argument("--kp", required=True, help="kptrace convert --to csv output directory")
    p.add_argument("--ncu", required=True, help="ncu --csv --page raw --print-units base output")
    p.add_argument("--ncu-also", help="a second ncu CSV of the same set in ncu's other replay "
                   "mode: a value passes against either")
    p.add_argument("--metrics", required=True, help="comma list: the metrics to compare")
    p.add_argument("--kernel", action="append", default=[],
                   help="KEY=REGEX (repeatable, tried in order; default: metrics_cache's five)")
    p.add_argument("--tolerance", type=float, default=0.02)
    p.add_argument("--bytes-floor", type=float, default=1e6)
    p.add_argument("--pct-floor", type=float, default=0.0)
    p.add_argument("--kp-is-ncu", action="store_true",
                   help="--kp is a second ncu CSV (ncu against itself: the reference's own "
                        "spread between runs); implies --info")
    p.add_argument("--info", action="store_true",
                   help="a reference run: every PASS/FAIL line becomes INFO (reported, not "
                        "counted)")
    p.add_argument("--skip-first", type=int, default=1,
                   help="launches of each kernel name dropped (warm-ups): ncu, and kp in kernel "
                        "mode")
    a = p.parse_args()
    a.info = a.info or a.kp_is_ncu

    if a.info:
        counted = cm.out

        def out_info(kind, name, detail):
            if kind in ("PASS", "FAIL"):
                detail = f"[{kind.lower()} if counted] {detail}"
                kind = "INFO"
            counted(kind, name, detail)

        cm.out = out_info
    kernels = [tuple(k.split("=", 1)) for k in a.kernel] or DEFAULT_KERNELS
    if any(len(k) != 2 for k in kernels):
        p.error("--kernel takes KEY=REGEX")
    metrics = [m for m in a.metrics.split(",") if m]
    configure(kernels, metrics)
    keys = [k for k in PRINT_ORDER if k in cm.KERNELS] + [k for k in cm.KERNELS
                                                           if k not in PRINT_ORDER]

    def read_reference(path):
        """ncu's values from `path`, or None after a FAIL line saying why."""
        try:
            values, rows = cm.read_ncu(path, a.skip_first)
        except (OSError, csv.Error) as e:
            cm.out("FAIL", f"{a.label}/ncu", f"cannot read {path}: {e}")
            return None
        if rows == 0:
            cm.out("FAIL", f"{a.label}/ncu", f"no kernel rows matching {cm.KERNELS} in {path}")
            return None
        return values, rows

    ref = read_reference(a.ncu)
    if ref is None:
        return 0
    ncu, n_ncu = ref
    also = None
    if a.ncu_also:
        ref_also = read_reference(a.ncu_also)
        if ref_also is None:
            return 0
        also = ref_also[0]
    metrics_csv = os.path.join(a.kp, "metrics.csv")
    try:
        if a.kp_is_ncu:
            metrics_csv = a.kp
            kp, n_kp = cm.read_ncu(a.kp, a.skip_first)
        elif a.mode == "kernel":
            kp, n_kp = read_kp_kernels(metrics_csv, a.skip_first)
        else:
            kp, n_kp = read_kp_ranges(metrics_csv)
    except (OSError, ValueError, csv.Error) as e:
        cm.out("FAIL", f"{a.label}/read", f"cannot read {metrics_csv}: {e}")
        return 0
    cm.out("INFO", f"{a.label}/rows", f"{n_kp} kp value sets, {n_ncu} ncu kernels (after "
           f"dropping {a.skip_first} warm-up launch(es) per kernel name"
           f"{' on both sides' if a.mode == 'kernel' else ' from ncu'}); tolerance "
           f"{100 * a.tolerance:g} %, bytes floor {a.bytes_floor:g}")
    launches = launches_per_range(a.kp, keys) if a.mode == "range" else {}

    for key in keys:
        name = f"{a.label}/{key}"
        names = "; ".join(f"kp {n[:70]} x{len(cm.finite(v[metrics[0]]))}"
                          for n, v in kp[key].items())
        names += "; " + "; ".join(f"ncu {n[:70]} x{len(cm.finite(v[metrics[0]]))}"
                                  for n, v in ncu[key].items())
        cm.out("INFO", name, f"matched /{cm.KERNELS[key]}/: {names.strip('; ') or 'nothing'}")
        if not kp[key] or not ncu[key]:
            cm.out("FAIL", name, f"no {'kp' if not kp[key] else 'ncu'} values for '{key}'")
            continue
        report_only = ""
        if a.mode == "range":
            count = launches.get(key)
            if count is None:
                cm.out("INFO", name + "/launches", "kernel launches in the range unknown "
                       "(kp's api/kernels/nvtx CSVs): compared anyway")
            elif count[0] == 0:
                cm.out("FAIL", name + "/launches", f"no kernel launch found inside any of the "
                       f"{count[1]} '{key}' range(s)")
                continue
            elif count[0] > 1:
                report_only = (f" [range holds {count[0]} kernel launches, ncu measures kernels: "
                               "reported only]")
        if key == NULL_KERNEL:
            for m in metrics:
                k, _ = cm.per_call(kp[key], m)
                n, _ = cm.per_call(ncu[key], m)
                detail = f"kp {k:.6g}, ncu {n:.6g} for a kernel that reads and writes nothing"
                if "dram__bytes" in m:
                    ok = math.isfinite(k) and abs(k) <= a.bytes_floor
                    cm.out("PASS" if ok else "FAIL", f"{name}/{m}",
                           f"{detail}; kp within the {a.bytes_floor:g}-byte floor of 0"
                           if ok else f"{detail}; kp beyond the {a.bytes_floor:g}-byte floor")
                    cm.out("INFO", f"{name}/{m}/ncu", f"ncu reads {n:.6g} bytes here")
                else:
                    cm.out("INFO", f"{name}/{m}", detail)
            continue
        for m in metrics:
            k, how_k = cm.per_call(kp[key], m)
            n, how_n = cm.per_call(ncu[key], m)
            dev = cm.deviation(k, n)
            detail = (f"kp {k:.6g} vs ncu {n:.6g}: |diff| {abs(k - n):.4g} "
                      f"({100 * dev:.2f} % of ncu); kp {how_k}; ncu {how_n}")
            if report_only or (a.mode == "range" and (m == "gpu__time_duration.sum" or
                                                      ".pct_" in m)):
                why = report_only or " [range values include launch/sync gaps: reported only]"
                cm.out("INFO", f"{name}/{m}", detail + why)
                continue
            ok, why = verdict(m, k, n, a)
            if also is not None:
                n2, _ = cm.per_call(also[key], m) if also[key] else (math.nan, "")
                ok2, why2 = verdict(m, k, n2, a)
                detail += (f"; against {os.path.basename(a.ncu_also)} {n2:.6g} "
                           f"({100 * cm.deviation(k, n2):.2f} %)")
                why = (f"{why} of {os.path.basename(a.ncu)}; {why2} of "
                       f"{os.path.basename(a.ncu_also)}")
                ok = ok or ok2
            cm.out("PASS" if ok else "FAIL", f"{name}/{m}", f"{detail}; {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
