"""Checks on `kptrace convert --to csv` output of a KP_PC_SAMPLING run, for
tests/gpu/run_pc_sampling_tests.sh. Prints PASS/FAIL/INFO lines; standard library only.

  check_pc_stalls.py CSV_DIR [--top KERNEL=REASON] [--not-top KERNEL=REASON]
                     [--lines KERNEL=FILE] [--min-kernels N] [--overlap KERNEL=N] [--label L]

KERNEL is a substring of the demangled kernel name; REASON a display name ("Long Scoreboard").
--top: the kernel's most sampled reason is REASON; --not-top: it is not. --lines: one of the
kernel's hottest PCs maps to a source line in FILE. --min-kernels: at least N kernels have
samples. --overlap: at least N launches of KERNEL ran at the same time (kernels.csv).
"""

import argparse
import csv
import os
import sys


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv_dir")
    ap.add_argument("--top", action="append", default=[])
    ap.add_argument("--not-top", action="append", default=[])
    ap.add_argument("--lines", action="append", default=[])
    ap.add_argument("--min-kernels", type=int, default=0)
    ap.add_argument("--overlap", action="append", default=[])
    ap.add_argument("--label", default="pc")
    a = ap.parse_args()
    failed = 0

    def report(ok, name, text):
        nonlocal failed
        print(("PASS" if ok else "FAIL") + " [" + a.label + "/" + name + "] " + text)
        failed += 0 if ok else 1

    if not os.path.exists(os.path.join(a.csv_dir, "pc_stalls.csv")):
        report(False, "csv", "no pc_stalls.csv in " + a.csv_dir)
        return 1
    stalls = read(os.path.join(a.csv_dir, "pc_stalls.csv"))
    pcs = read(os.path.join(a.csv_dir, "pc_stall_pcs.csv"))
    kernels = {}
    for r in stalls:
        if r["percent"] == "":
            continue  # *_not_issued subsets
        kernels.setdefault(r["kernel"], []).append((float(r["percent"]), r["reason"], int(r["samples"])))
    for k, rs in sorted(kernels.items(), key=lambda kv: -sum(x[2] for x in kv[1])):
        rs.sort(reverse=True)
        top3 = ", ".join("%s %.1f %%" % (n, p) for p, n, _ in rs[:3])
        print("INFO [%s] %s: %d samples: %s" % (a.label, k[:100], sum(x[2] for x in rs), top3))

    def find(sub):
        return [k for k in kernels if sub in k]

    for spec in a.top + a.not_top:
        sub, reason = spec.split("=", 1)
        want = spec in a.top
        ks = find(sub)
        if not ks:
            report(False, ("top/" if want else "not-top/") + sub, "no samples for a kernel matching '%s'" % sub)
            continue
        rs = sorted(kernels[ks[0]], reverse=True)
        top = rs[0][1]
        if want:
            report(top == reason, "top/" + sub, "top reason %s (%.1f %%), expected %s" % (top, rs[0][0], reason))
        else:
            report(top != reason, "not-top/" + sub, "top reason %s (%.1f %%), must not be %s" % (top, rs[0][0], reason))
    for spec in a.lines:
        sub, fname = spec.split("=", 1)
        rows = [r for r in pcs if sub in r["kernel"]]
        hits = [r for r in rows if r["source_file"].endswith(fname) and r["line"] not in ("", "0")]
        where = ", ".join("%s:%s" % (os.path.basename(r["source_file"]), r["line"]) for r in hits[:3])
        report(bool(hits), "lines/" + sub, "%d of %d hottest PCs map to %s (%s)" % (len(hits), len(rows), fname, where or "none"))
    if a.min_kernels:
        report(len(kernels) >= a.min_kernels, "kernels", "%d kernels with samples (want >= %d)" % (len(kernels), a.min_kernels))
    for spec in a.overlap:
        sub, n = spec.split("=", 1)
        ivs = [(int(r["start_ns"]), int(r["end_ns"])) for r in read(os.path.join(a.csv_dir, "kernels.csv"))
               if sub in r["name"] and int(r["duration_ns"] or 0) > 1000000]
        events = sorted([(s, 1) for s, e in ivs] + [(e, -1) for s, e in ivs])
        cur = best = 0
        for _, d in events:
            cur += d
            best = max(best, cur)
        report(best >= int(n), "overlap/" + sub, "at most %d of %d long launches ran at once (want >= %s)" % (best, len(ivs), n))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
