"""kp's process-tree GPU tests (issue 9): torchrun with 2 ranks through `kptrace run` and through
plain CUDA_INJECTION64_PATH with one fixed KP_OUTPUT, torch.compile(mode="reduce-overhead") with
compile workers, two independent processes with one KP_OUTPUT, SIGTERM and SIGINT mid-run, and
DataLoader workers (fork and spawn). Every check is exact where the work is known: kernel counts
per process (the MulFunctor kernels the scripts launch), NVTX range counts, nothing dropped or
damaged, one file per CUDA process and none for processes without a CUDA context.

usage: process_tree_cases.py --kptrace BIN --lib LIBKPINJECT --work DIR
Prints PASS/FAIL lines and ends with "N passed, M failed"; exit status 1 if anything failed."""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "process_tree")
PY = sys.executable
from gpu_case_checks import check, log, run_cases


def sh(cmd, env=None, timeout=300):
    log("$ " + " ".join(cmd))
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    for line in (p.stdout + p.stderr).splitlines():
        log("    " + line)
    return p


def kptrace(args):
    p = subprocess.run([KPTRACE] + args, capture_output=True, text=True, timeout=300)
    return p


def infos(path, file_only=False):
    p = kptrace(["info", "--json"] + (["--file-only"] if file_only else []) + [path])
    if p.returncode != 0:
        log("    kptrace info failed: " + p.stderr.strip())
        return []
    return json.loads(p.stdout)


def summary(path, file_only=True):
    p = kptrace(["summary", "--format", "json"] + (["--file-only"] if file_only else []) + [path])
    if p.returncode != 0:
        log("    kptrace summary failed: " + p.stderr.strip())
        return None
    return json.loads(p.stdout)


def kernels(s, substring):
    return sum(k["count"] for k in s["kernels"] if substring in k["name"])


def ranges(s, name):
    return sum(r["count"] for r in s["nvtx_ranges"] if r["name"] == name)


LOSS_STATS = ("cupti_dropped_records", "buffers_refused", "write_errors", "metric_ranges_dropped",
              "zero_timestamp_records")


def intact(info):
    """Problems that mean records were lost or damaged ([] = none)."""
    problems = []
    if not info.get("readable"):
        problems.append("unreadable")
    problems += info.get("damage", [])
    for k in LOSS_STATS:
        if info.get("stats", {}).get(k, 0):
            problems.append(f"{k}={info['stats'][k]}")
    return problems


def describe(info):
    h = info.get("header", {})
    return (f"{os.path.basename(info['path'])}: rank {h.get('rank')} pid {h.get('pid')} "
            f"kernels {info['records'].get('kernels')} end {info.get('end_reason')}")


def ddp_checks(name, root, steps, k):
    all_infos = infos(root)
    log(f"    run {root}: " + "; ".join(describe(i) for i in all_infos))
    check(f"{name}/one-file-per-rank", len(all_infos) == 2,
          f"{len(all_infos)} trace files in the run (2 ranks; the launcher has no CUDA context)")
    ranks = sorted(i["header"]["rank"] for i in all_infos if "header" in i)
    check(f"{name}/ranks", ranks == [0, 1], f"ranks {ranks}")
    for info in all_infos:
        r = info.get("header", {}).get("rank")
        s = summary(info["path"])
        mul = kernels(s, "MulFunctor") if s else -1
        step = ranges(s, "step") if s else -1
        check(f"{name}/rank{r}/kernels", mul == steps * k, f"{mul} MulFunctor kernels, want {steps * k}")
        check(f"{name}/rank{r}/ranges", step == steps, f"{step} 'step' ranges, want {steps}")
        check(f"{name}/rank{r}/intact", not intact(info) and info.get("clean_end"),
              f"problems {intact(info)}, clean end {info.get('clean_end')} ({info.get('end_reason')})")
    merged = summary(root, file_only=False)
    ok = (merged is not None and len(merged["processes"]) == 2 and merged["step_range"] == "step"
          and all(len(p["step_ns"]) == steps for p in merged["processes"]))
    check(f"{name}/merged-summary", ok,
          "merged summary: " + (json.dumps({"step_range": merged["step_range"], "steps": [
              len(p["step_ns"]) for p in merged["processes"]], "losses": merged["losses"]})
                                if merged else "failed"))
    if merged is not None:
        check(f"{name}/no-false-loss", merged["losses"] == [], f"losses {merged['losses']}")
    text = kptrace(["summary", root])
    log("    --- kptrace summary (cross-process part)")
    keep = False
    for line in text.stdout.splitlines():
        if line.startswith("Processes") or line.startswith("Steps across"):
            keep = True
        elif line and not line.startswith(" "):
            keep = False
        if keep:
            log("    " + line)
    conv = kptrace(["convert", root, "--to", "perfetto", "-o", root + ".pftrace", "--no-progress"])
    check(f"{name}/convert-run", conv.returncode == 0 and "2 files" in conv.stderr,
          conv.stderr.strip().splitlines()[-1] if conv.stderr.strip() else "no output")


def torchrun_cmd(script, extra=()):
    return [PY, "-m", "torch.distributed.run", *extra, "--nproc-per-node", "2",
            os.path.join(HERE, script)]


def case_torchrun_kptrace_run(work):
    log("\n=== torchrun, 2 ranks, through kptrace run -o (gloo backend, CUDA tensors)")
    root = os.path.join(work, "ddp.kptrace")
    env = dict(os.environ, PT_STEPS="8")
    p = sh([KPTRACE, "run", "-o", root, "--"] + torchrun_cmd("ddp_steps.py", ["--standalone"]), env)
    check("torchrun-run/exit", p.returncode == 0, f"exit status {p.returncode}")
    ddp_checks("torchrun-run", root, 8, 5)
    leftovers = sorted(os.path.basename(f) for f in glob.glob(os.path.join(work, "ddp*.kptrace")))
    entries = sorted(os.path.basename(f) for f in glob.glob(root + ".procs/*.json"))
    check("torchrun-run/no-clutter", len(leftovers) == 2 and len(entries) == 2,
          f"trace files: {leftovers}, manifest entries: {entries}")
    again = sh([KPTRACE, "run", "-o", root, "--", PY, "-c", "pass"])
    check("torchrun-run/rerun-refused", again.returncode == 1 and "--force" in again.stderr,
          "a second run with the same -o is refused without --force")


def case_torchrun_nccl(work):
    """NCCL: real collective kernels for the cross-rank summary. NCCL refuses two ranks on one
    GPU ("Duplicate GPU detected"): with fewer than 2 GPUs the case reports what NCCL said and
    counts as skipped, not failed."""
    log("\n=== torchrun, 2 ranks, NCCL backend, through kptrace run -o")
    root = os.path.join(work, "nccl.kptrace")
    env = dict(os.environ, PT_STEPS="8", PT_BACKEND="nccl")
    try:
        p = sh([KPTRACE, "run", "-o", root, "--"] + torchrun_cmd("ddp_steps.py", ["--standalone"]),
               env, timeout=120)
    except subprocess.TimeoutExpired:
        log("SKIP [torchrun-nccl] NCCL did not finish within 120 s (two ranks on one GPU hang)")
        return
    gpus = int(subprocess.run([PY, "-c", "import torch; print(torch.cuda.device_count())"],
                              capture_output=True, text=True).stdout.strip() or 0)
    if p.returncode != 0 and gpus < 2:
        said = [l.strip() for l in p.stderr.splitlines() if "Duplicate GPU" in l or "NCCL" in l]
        log(f"SKIP [torchrun-nccl] {gpus} GPU: NCCL did not run two ranks on it: "
            + (said[0][:200] if said else f"exit status {p.returncode}"))
        return
    check("torchrun-nccl/exit", p.returncode == 0, f"exit status {p.returncode}")
    ddp_checks("torchrun-nccl", root, 8, 5)
    merged = summary(root, file_only=False)
    if merged is not None:
        shares = [p["collective_ns"] / p["kernel_ns"] if p["kernel_ns"] else 0
                  for p in merged["processes"]]
        check("torchrun-nccl/collectives", all(x > 0 for x in shares),
              f"collective (NCCL) share of kernel time per rank: {shares}")


def case_torchrun_plain(work):
    log("\n=== torchrun, 2 ranks, plain CUDA_INJECTION64_PATH with one fixed KP_OUTPUT")
    root = os.path.join(work, "plain.kptrace")
    env = dict(os.environ, CUDA_INJECTION64_PATH=LIB, KP_OUTPUT=root, PT_STEPS="8")
    p = sh(torchrun_cmd("ddp_steps.py"), env)
    check("torchrun-plain/exit", p.returncode == 0, f"exit status {p.returncode}")
    notes = [l for l in p.stderr.splitlines() if "is written by another process of this run" in l]
    check("torchrun-plain/one-line-note", len(notes) == 1, f"{len(notes)} 'another process' lines")
    ddp_checks("torchrun-plain", root, 8, 5)


def case_compile(work):
    log("\n=== torch.compile(mode=\"reduce-overhead\") with compile workers")
    root = os.path.join(work, "compile.kptrace")
    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS="4")
    p = sh([KPTRACE, "run", "-o", root, "--", PY, os.path.join(HERE, "compile_infer.py")], env,
           timeout=420)
    check("compile/exit", p.returncode == 0, f"exit status {p.returncode}")
    workers = [int(l.split()[1]) for l in p.stdout.splitlines() if l.startswith("COMPILE_WORKERS")]
    check("compile/workers-started", bool(workers) and workers[0] > 0,
          f"compile worker processes seen: {workers}")
    all_infos = infos(root)
    log("    run: " + "; ".join(describe(i) for i in all_infos))
    main = [i for i in all_infos if any("compile_infer.py" in a for a in
                                        i.get("header", {}).get("command_line", []))]
    check("compile/main-trace", len(main) == 1, f"{len(main)} traces of the main process")
    for info in all_infos:
        check(f"compile/intact/{os.path.basename(info['path'])}",
              not intact(info) and info.get("clean_end"), f"problems {intact(info)}")
    if main:
        s = summary(main[0]["path"])
        n = ranges(s, "infer") if s else -1
        check("compile/main-ranges", n == 20, f"{n} 'infer' ranges, want 20")
        check("compile/main-kernels", s is not None and main[0]["records"]["kernels"] > 0,
              f"{main[0]['records']['kernels']} kernels in the main process")


def case_two_independent(work):
    log("\n=== two independent processes with one KP_OUTPUT")
    root = os.path.join(work, "same.kptrace")
    env = dict(os.environ, CUDA_INJECTION64_PATH=LIB, KP_OUTPUT=root)
    cmd = [PY, os.path.join(HERE, "simple_work.py")]
    log("$ (2x) KP_OUTPUT=" + root + " " + " ".join(cmd))
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for o in outs:
        for line in (o[0] + o[1]).splitlines():
            log("    " + line)
    check("two-processes/exit", all(p.returncode == 0 for p in procs),
          f"exit statuses {[p.returncode for p in procs]}")
    wrote = sum(o[1].count("kp: wrote") for o in outs)
    check("two-processes/both-wrote", wrote == 2, f"{wrote} 'kp: wrote' lines")
    # Overlapping in time, the second joins the first's run; had one ended before the other
    # started, it would be a run of its own (same.2.kptrace). Either way: two whole traces.
    files = sorted(glob.glob(os.path.join(work, "same*.kptrace")))
    all_infos = [i for f in files for i in infos(f, file_only=True)]
    log("    traces: " + "; ".join(describe(i) for i in all_infos))
    check("two-processes/two-files", len(all_infos) == 2, f"{len(all_infos)} trace files")
    check("two-processes/one-run", len(infos(root)) == 2, "kptrace info " + root + " gathers both")
    for info in all_infos:
        s = summary(info["path"])
        mul = kernels(s, "MulFunctor") if s else -1
        pid = info.get("header", {}).get("pid")
        check(f"two-processes/pid{pid}", mul == 50 and ranges(s, "work") == 5 and not intact(info)
              and info.get("clean_end"), f"{mul} MulFunctor kernels (want 50), problems {intact(info)}")


def signal_case(work, name, mode, signo, want_rc, app_marker):
    log(f"\n=== {name}: signal mid-run")
    root = os.path.join(work, f"{name}.kptrace")
    cmd = [KPTRACE, "run", "-o", root, "--", PY, os.path.join(HERE, "signal_steps.py"), mode]
    log("$ " + " ".join(cmd))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid, steps, out_lines = None, 0, []  # steps: completed before the signal was sent
    for line in p.stdout:
        out_lines.append(line.rstrip())
        if line.startswith("PID "):
            pid = int(line.split()[1])
        if line.startswith("STEP "):
            steps = int(line.split()[1])
            if steps == 10:
                break
    sent = time.monotonic()
    os.kill(pid, signo)
    rest, err = p.communicate(timeout=60)
    elapsed = time.monotonic() - sent
    out_lines += rest.splitlines()
    # Another thread may take the signal while the main thread finishes a step or two more.
    final = max([steps] + [int(l.split()[1]) for l in out_lines if l.startswith("STEP ")])
    for line in out_lines[-5:] + err.splitlines()[-8:]:
        log("    " + line)
    check(f"{name}/exit-status", p.returncode == want_rc,
          f"exit status {p.returncode}, want {want_rc} ({elapsed:.2f} s from the signal to the end)")
    check(f"{name}/app-handler-ran", app_marker in rest + err, f"looked for '{app_marker}'")
    all_infos = infos(root)
    info = all_infos[0] if all_infos else {}
    check(f"{name}/footer", info.get("clean_end") is True and
          info.get("end_reason") == f"signal {signal.Signals(signo).name}",
          f"clean end {info.get('clean_end')}, end reason {info.get('end_reason')!r}")
    s = summary(root)
    n = ranges(s, "step") if s else -1
    mul = kernels(s, "MulFunctor") if s else -1
    # Steps completed before the signal are all recorded; a step in flight may be open.
    check(f"{name}/nothing-lost", steps <= n <= final + 1 and 10 * steps <= mul <= 10 * (final + 1)
          and not intact(info), f"{steps} steps done before the signal ({final} printed), {n} "
          f"'step' ranges, {mul} MulFunctor kernels, problems {intact(info)}")


def case_dataloader(work, context):
    name = f"dataloader-{context}"
    log(f"\n=== DataLoader with 2 workers ({context})")
    root = os.path.join(work, f"{name}.kptrace")
    p = sh([KPTRACE, "run", "-o", root, "--", PY, os.path.join(HERE, "dataloader_workers.py"),
            context])
    check(f"{name}/exit", p.returncode == 0, f"exit status {p.returncode}")
    workers = [int(l.split()[1]) for l in p.stdout.splitlines() if l.startswith("WORKERS")]
    check(f"{name}/workers-ran", workers == [2], f"distinct worker pids: {workers}")
    all_infos = infos(root)
    log("    run: " + "; ".join(describe(i) for i in all_infos))
    check(f"{name}/one-file", len(all_infos) == 1 and not os.path.exists(root + ".procs"),
          f"{len(all_infos)} trace files, manifest {'present' if os.path.exists(root + '.procs') else 'absent'} "
          "(workers create no CUDA context; a run of one process needs no manifest)")
    s = summary(root)
    mul = kernels(s, "MulFunctor") if s else -1
    n = ranges(s, "batch") if s else -1
    check(f"{name}/exact", mul == 48 and n == 12 and all_infos and not intact(all_infos[0]) and
          all_infos[0].get("clean_end"), f"{mul} MulFunctor kernels (want 48), {n} batches (want 12)")


def main():
    global KPTRACE, LIB
    ap = argparse.ArgumentParser()
    ap.add_argument("--kptrace", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    KPTRACE, LIB = a.kptrace, a.lib
    os.makedirs(a.work, exist_ok=True)
    cases = {
        "torchrun-run": lambda: case_torchrun_kptrace_run(a.work),
        "torchrun-plain": lambda: case_torchrun_plain(a.work),
        "torchrun-nccl": lambda: case_torchrun_nccl(a.work),
        "two-processes": lambda: case_two_independent(a.work),
        "sigterm": lambda: signal_case(a.work, "sigterm", "term", signal.SIGTERM, 143,
                                       "APP_HANDLER SIGTERM"),
        "sigint": lambda: signal_case(a.work, "sigint", "int", signal.SIGINT, 130,
                                      "KeyboardInterrupt"),
        "dataloader-fork": lambda: case_dataloader(a.work, "fork"),
        "dataloader-spawn": lambda: case_dataloader(a.work, "spawn"),
        "compile": lambda: case_compile(a.work),
    }
    return run_cases(cases, a.only)


if __name__ == "__main__":
    sys.exit(main())
