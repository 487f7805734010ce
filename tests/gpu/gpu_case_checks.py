"""PASS/FAIL bookkeeping shared by the Python GPU case scripts (process_tree_cases.py,
capture_cases.py): one line per check, a run of named cases where one broken case does not hide
the others, and the closing "N passed, M failed" line."""

RESULTS = {"passed": 0, "failed": 0, "failed_names": []}


def log(msg=""):
    print(msg, flush=True)


def check(name, ok, detail=""):
    RESULTS["passed" if ok else "failed"] += 1
    if not ok:
        RESULTS["failed_names"].append(name)
    log(f"{'PASS' if ok else 'FAIL'} [{name}] {detail}")
    return ok


def run_cases(cases, only="", always=()):
    """Runs the {name: function} cases named in the comma list `only` (all when empty) plus
    those in `always`; returns the exit status (1 if any check failed)."""
    for name, fn in cases.items():
        if only and name not in always and name not in only.split(","):
            continue
        try:
            fn()
        except Exception as e:  # one broken case must not hide the others
            check(f"{name}/ran", False, f"{type(e).__name__}: {e}")
    log(f"\n{RESULTS['passed']} passed, {RESULTS['failed']} failed"
        + (f": {' '.join(RESULTS['failed_names'])}" if RESULTS["failed"] else ""))
    return 1 if RESULTS["failed"] else 0
