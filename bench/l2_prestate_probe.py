"""Table of bench/l2_prestate_probe.sh: per kernel and metric, the median over launches (the
first dropped) of each configuration's CSV, and each one's deviation from the reference.

    l2_prestate_probe.py REF_LABEL METRIC[,METRIC...] LABEL=FILE[:kp] ...

FILE is ncu's raw-page CSV (--csv --page raw --print-units base), or with ":kp" the metrics.csv
of `kptrace convert --to csv` of a kernel-mode trace.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "gpu"))
import compare_cache as cc  # noqa: E402
import compare_metrics as cm  # noqa: E402

KERNELS = [("write_heavy", r"write_heavy"), ("read_only", r"read_only"),
           ("reduction", r"reduction")]
if os.environ.get("PROBE_KERNELS"):  # KEY=REGEX[;KEY=REGEX...]: the caller's kernels
    KERNELS = [tuple(k.split("=", 1)) for k in os.environ["PROBE_KERNELS"].split(";")]


def main(argv):
    ref, metrics, configs = argv[1], argv[2].split(","), []
    for spec in argv[3:]:
        label, path = spec.split("=", 1)
        configs.append((label, path))
    cc.configure(KERNELS, metrics)
    results = {}
    for label, path in configs:
        try:
            if path.endswith(":kp"):
                results[label], _ = cc.read_kp_kernels(path[:-3], 1)
            else:
                results[label], _ = cm.read_ncu(path, 1)
        except (OSError, ValueError) as e:
            print("%s: unreadable (%s)" % (label, e))
            results[label] = {}
    labels = [l for l, _ in configs]
    print("| kernel | metric | " + " | ".join(labels) + " |")
    print("|---|---|" + "---|" * len(labels))
    for key, _ in KERNELS:
        for m in metrics:
            vals = {}
            for l in labels:
                v, _ = cm.per_call(results[l].get(key, {}), m) if results[l].get(key) else (
                    float("nan"), "")
                vals[l] = v
            base = vals.get(ref, float("nan"))
            cells = []
            for l in labels:
                v = vals[l]
                if l == ref or not base or base != base:
                    cells.append("%.5g" % v)
                else:
                    cells.append("%.5g (%+.2f %%)" % (v, (v - base) / base * 100))
            print("| %s | %s | %s |" % (key, m, " | ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
