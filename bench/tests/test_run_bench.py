"""CPU tests of the benchmark driver (bench/run_bench.py) and of run.sh's no-GPU skip.

Run by ctest (bench_driver_test) with the system python3; standard library only.
"""

import argparse
import contextlib
import io
import json
import os
import stat
import subprocess
import sys
import tempfile
import unittest

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH_DIR)

import run_bench  # noqa: E402


class MedianTest(unittest.TestCase):
    def test_odd_count_takes_middle(self):
        self.assertEqual(run_bench.median([5.0, 1.0, 3.0]), 3.0)

    def test_even_count_averages_middle_pair(self):
        self.assertEqual(run_bench.median([4, 1, 3, 2]), 2.5)

    def test_ignores_missing_values(self):
        self.assertEqual(run_bench.median([None, 7, None, 1, 4]), 4)

    def test_empty_is_none(self):
        self.assertIsNone(run_bench.median([]))
        self.assertIsNone(run_bench.median([None, None]))

    def test_outlier_does_not_move_median(self):
        self.assertEqual(run_bench.median([5.1, 5.2, 5.3, 5.2, 90.0]), 5.2)


class ScheduleTest(unittest.TestCase):
    TOOLS = ["none", "floor", "kp", "kp_api_all", "kp_nvtx_metrics", "torch_prof_cuda",
             "torch_prof_cpu_cuda"]

    def test_every_round_runs_every_tool_once(self):
        schedule = run_bench.interleaved_schedule(self.TOOLS, 5, seed=1)
        self.assertEqual(len(schedule), 5)
        for order in schedule:
            self.assertEqual(sorted(order), sorted(self.TOOLS))

    def test_orders_differ_between_rounds(self):
        schedule = run_bench.interleaved_schedule(self.TOOLS, 10, seed=7)
        self.assertGreater(len({tuple(o) for o in schedule}), 1)

    def test_same_seed_same_schedule(self):
        self.assertEqual(run_bench.interleaved_schedule(self.TOOLS, 4, seed=3),
                         run_bench.interleaved_schedule(self.TOOLS, 4, seed=3))

    def test_input_list_not_modified(self):
        tools = list(self.TOOLS)
        run_bench.interleaved_schedule(tools, 3, seed=0)
        self.assertEqual(tools, self.TOOLS)

    def test_pairs_of_rounds_mirror_each_other(self):
        schedule = run_bench.interleaved_schedule(self.TOOLS, 6, seed=5)
        for first, second in zip(schedule[0::2], schedule[1::2]):
            self.assertEqual(second, list(reversed(first)))

    def test_three_rounds_never_keep_a_tool_last(self):
        # The 2026-12-01 run stopped after 3 rounds with the baseline last in all of them.
        for seed in range(50):
            schedule = run_bench.interleaved_schedule(self.TOOLS, 3, seed=seed)
            for tool in self.TOOLS:
                self.assertGreater(len({o.index(tool) for o in schedule}), 1)

    def test_no_tool_keeps_a_fixed_position(self):
        # Interleaving is only worth something if a tool is not always first (or last).
        schedule = run_bench.interleaved_schedule(self.TOOLS, 20, seed=11)
        self.assertGreater(len({o.index("kp") for o in schedule}), 1)


class CostTest(unittest.TestCase):
    def test_added_cost_and_ratio(self):
        self.assertAlmostEqual(run_bench.added_cost(5.3, 4.2), 1.1)
        self.assertIsNone(run_bench.added_cost(None, 4.2))
        self.assertAlmostEqual(run_bench.safe_ratio(1.2, 1.0), 1.2)
        self.assertIsNone(run_bench.safe_ratio(1.0, 0))

    def test_targets_floor_ratio_verdicts(self):
        def table(kp):
            t = {}
            for tool, value in (("none", 4.0), ("floor", 5.0), ("kp", kp)):
                t[("launch_loop", "us_per_launch", tool)] = {"median": value}
            return t

        passing = run_bench.targets(table(5.04), None)[0]
        self.assertTrue(passing["ok"])  # +1.04 vs +1.0: 1.04 <= 1.05
        missing = run_bench.targets(table(5.1), None)[0]
        self.assertFalse(missing["ok"])  # +1.1 vs +1.0: 1.10 > 1.05
        self.assertIn("1.100", missing["detail"])

    def test_targets_training_step(self):
        t = {("transformer", "step_ms", "none"): {"median": 100.0},
             ("transformer", "step_ms", "floor"): {"median": 102.0},
             ("transformer", "step_ms", "kp"): {"median": 102.0},
             ("transformer", "step_ms", "torch_prof_cuda"): {"median": 110.0}}
        by_name = {v["target"]: v for v in run_bench.targets(t, None)}
        half = by_name["training step: kp added cost <= half of torch.profiler (CUDA only)'s"]
        slow = by_name["training step: kp <= 1.03 x no tool"]
        floor = by_name["training step: kp added cost <= 1.05 x the floor's (same kinds)"]
        self.assertTrue(half["ok"])   # +2 <= half of +10
        self.assertTrue(slow["ok"])   # 1.02 <= 1.03
        self.assertTrue(floor["ok"])  # +2 vs +2
        self.assertIn("floor/torch.profiler 0.2000", half["detail"])
        t[("transformer", "step_ms", "kp")] = {"median": 106.0}
        by_name = {v["target"]: v for v in run_bench.targets(t, None)}
        self.assertFalse(by_name["training step: kp added cost <= half of torch.profiler "
                                 "(CUDA only)'s"]["ok"])
        self.assertFalse(by_name["training step: kp <= 1.03 x no tool"]["ok"])
        self.assertFalse(by_name["training step: kp added cost <= 1.05 x the floor's "
                                 "(same kinds)"]["ok"])

    def test_targets_from_within_one_process(self):
        # Between processes kp reads far too costly; within one process the cycles judge.
        t = {("transformer", "step_ms", "none"): {"median": 100.0},
             ("transformer", "step_ms", "floor"): {"median": 101.0},
             ("transformer", "step_ms", "kp"): {"median": 110.0},
             ("transformer", "step_ms", "torch_prof_cuda"): {"median": 104.0}}

        def cost(cycles, net, kernels=(), counted=5):
            return {"cycles": cycles, "net": net, "runs": 5, "residual_runs": counted,
                    "kernels": list(kernels)}

        paired = {("train", "none"): cost(0.0, 0.0), ("train", "kp"): cost(2.0, 2.5, [9, 9]),
                  ("train", "floor"): cost(3.0, 6.0), ("train", "torch_prof"): cost(4.0, 10.0)}
        by_name = {v["target"]: v for v in run_bench.targets(t, None, paired)}
        half = by_name["training step: kp added cost <= half of torch.profiler (CUDA only)'s"]
        slow = by_name["training step: kp <= 1.03 x no tool"]
        floor = by_name["training step: kp added cost <= 1.05 x the floor's (same kinds)"]
        self.assertTrue(half["ok"])  # 2.0 <= half of 4.0 from the cycles
        self.assertIn("from the cycles: kp +2.00 %, torch.profiler +4.00 %, ratio 0.5000; "
                      "against no tool (with what each leaves on while off, 5 and 5 runs): "
                      "kp +2.50 %, torch.profiler +10.00 %, ratio 0.2500 (PASS)", half["detail"])
        self.assertIn("between processes (rounds): kp +10.000 ms", half["detail"])
        self.assertTrue(slow["ok"])
        self.assertIn("from the cycles (kp on against kp attached but off): kp 1.0200 x; "
                      "against no tool (with what kp leaves on while off): kp 1.0250 x (PASS)",
                      slow["detail"])
        self.assertTrue(floor["ok"])
        # The launch loop and tiny ops have no within-process reading: the rounds judge them.
        launch = run_bench.targets({}, None, paired)[0]
        self.assertIsNone(launch["ok"])
        self.assertTrue(launch["detail"].startswith("between processes"))
        # The cycles over the limit are a MISS even where the cost against no tool meets it;
        # a reading against no tool missing for too few runs is said so.
        paired[("train", "kp")] = cost(3.5, 2.0, [9], counted=1)
        paired[("train", "none")] = cost(0.0, None, counted=0)
        by_name = {v["target"]: v for v in run_bench.targets(t, None, paired)}
        slow = by_name["training step: kp <= 1.03 x no tool"]
        self.assertFalse(slow["ok"])
        self.assertIn("kp 1.0350 x; against no tool (with what kp leaves on while off): kp "
                      "1.0200 x (PASS)", slow["detail"])
        floor = by_name["training step: kp added cost <= 1.05 x the floor's (same kinds)"]
        self.assertFalse(floor["ok"])  # 3.5 > 1.05 x 3.0
        self.assertIn("1 and 5 runs): kp +2.00 %, floor +6.00 %", floor["detail"])
        paired[("train", "floor")] = cost(3.0, None, counted=0)
        by_name = {v["target"]: v for v in run_bench.targets(t, None, paired)}
        self.assertIn("1 and 0 runs): n/a (too few runs read what a tool leaves on while off)",
                      by_name["training step: kp added cost <= 1.05 x the floor's "
                              "(same kinds)"]["detail"])
        # A kp run that traced no kernel measured nothing of kp: no within-process verdict.
        paired[("train", "kp")] = cost(2.0, 2.0, [9, 0])
        by_name = {v["target"]: v for v in run_bench.targets(t, None, paired)}
        self.assertFalse(by_name["training step: kp <= 1.03 x no tool"]["ok"])  # rounds: 1.10
        self.assertNotIn("within one process",
                         by_name["training step: kp <= 1.03 x no tool"]["detail"])

    def test_unknown_numbers_give_no_verdict(self):
        verdicts = run_bench.targets({}, None)
        self.assertTrue(all(v["ok"] is None for v in verdicts))
        self.assertEqual(run_bench.verdict(None), "UNKNOWN")


class CpuPinningTest(unittest.TestCase):
    def test_cpu_list(self):
        self.assertEqual(run_bench.parse_cpu_list("2-5,8"), [2, 3, 4, 5, 8])
        self.assertEqual(run_bench.parse_cpu_list("3,1,3"), [1, 3])
        with self.assertRaises(ValueError):
            run_bench.parse_cpu_list("5-2")
        with self.assertRaises(ValueError):
            run_bench.parse_cpu_list("x")

    def test_choose(self):
        sixteen = set(range(16))
        self.assertEqual(run_bench.choose_cpus("auto", sixteen), [2, 3, 4, 5])
        self.assertIsNone(run_bench.choose_cpus("auto", {0, 1}))
        self.assertIsNone(run_bench.choose_cpus("all", sixteen))
        self.assertEqual(run_bench.choose_cpus("1,40", sixteen), [1])

    def test_auto_skips_smt_siblings(self):
        sixteen = set(range(16))
        siblings = {c: ("p0", c % 8) for c in sixteen}  # cpu c and c + 8 share a core
        self.assertEqual(run_bench.choose_cpus("auto", sixteen, siblings), [2, 3, 4, 5])
        pairs = {c: ("p0", c // 2) for c in sixteen}  # cpus 2k and 2k + 1 share a core
        self.assertEqual(run_bench.choose_cpus("auto", sixteen, pairs), [2, 4, 6, 8])

    def test_pinned_child_sees_only_its_cpus(self):
        cpu = sorted(os.sched_getaffinity(0))[0]
        with tempfile.TemporaryDirectory() as tmp:
            result = run_bench.run_measured(
                [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                dict(os.environ), 60, os.path.join(tmp, "pin"), cpus=[cpu])
        self.assertEqual(result["stdout"].strip(), str([cpu]))


class RssFlatTest(unittest.TestCase):
    def test_flat_series(self):
        self.assertTrue(run_bench.rss_is_flat([300000, 400000, 405000, 410000, 411000, 412000,
                                               410500]))

    def test_growth_before_15_s_is_start_up(self):
        # 0, 5, 10 s still fill buffer pools; from the 15 s sample on it must stay flat.
        self.assertTrue(run_bench.rss_is_flat([130000, 163000, 163000, 171000, 171000, 171000]))

    def test_growing_series(self):
        self.assertFalse(run_bench.rss_is_flat([300000, 400000, 410000, 420000, 450000, 500000]))

    def test_too_short(self):
        self.assertIsNone(run_bench.rss_is_flat([300000, 400000, 410000]))


class ParseTest(unittest.TestCase):
    def test_info_json_kptrace_layout(self):
        # The layout of tools/info/trace_info.cc's FormatTraceInfoJson: one object per file.
        doc = [{"path": "kp-1.kptrace", "readable": True,
                "header": {"pid": 1, "config": {"KP_API": "launch"}},
                "devices": [{"id": 0, "sm_count": 132}],
                "records": {"kernels": 200100, "memcpys": 20100, "api_calls": 220200},
                "records_total": 440400,
                "stats": {"cupti_dropped_records": 7, "metric_ranges_dropped": 2,
                          "buffers_completed": 9},
                "dropped_records": 7, "clean_end": True, "chunks": 4}]
        parsed = run_bench.parse_info_json(doc)
        self.assertEqual(parsed["kernels"], 200100)
        self.assertEqual(parsed["records"], 440400)
        self.assertEqual(parsed["dropped"], 7)  # CUPTI's count, not summed with metric drops
        self.assertTrue(parsed["clean_end"])
        self.assertEqual(parsed["stats"]["buffers_completed"], 9)

    def test_info_json_flat_counts(self):
        doc = {"file": "x.kptrace", "counts": {"kernels": 200100, "memcpy": 20100, "api": 220200},
               "dropped": {"cupti_records": 0, "buffers": 0}, "clean_end": True}
        parsed = run_bench.parse_info_json(doc)
        self.assertEqual(parsed["kernels"], 200100)
        self.assertEqual(parsed["records"], 440400)
        self.assertEqual(parsed["dropped"], 0)

    def test_info_json_nested_and_list(self):
        doc = [{"path": "a", "records": {"kernel": {"count": 12}}, "total_records": 30,
                "footer": {"dropped_records": 3}}]
        parsed = run_bench.parse_info_json(doc)
        self.assertEqual(parsed["kernels"], 12)
        self.assertEqual(parsed["records"], 30)
        self.assertEqual(parsed["dropped"], 3)

    def test_info_json_without_fields(self):
        parsed = run_bench.parse_info_json({"version": "0.1.0", "clean_end": True})
        self.assertEqual({k: parsed[k] for k in ("kernels", "records", "dropped")},
                         {"kernels": None, "records": None, "dropped": None})
        self.assertTrue(parsed["clean_end"])

    def test_info_text_fallback(self):
        text = "header: kp 0.1.0\nkernels: 1,234\nrecords: 2000\ndropped records: 5\n"
        parsed = run_bench.parse_info_text(text)
        self.assertEqual(parsed["kernels"], 1234)
        self.assertEqual(parsed["records"], 2000)
        self.assertEqual(parsed["dropped"], 5)

    def test_json_lines_keyed_by_workload(self):
        out = 'noise\n{"workload":"tiny_ops","us_per_iter":12.5}\n{bad json\n' \
              '{"workload":"transformer","step_ms":98.0}\n'
        parsed = run_bench.parse_json_lines(out)
        self.assertEqual(parsed["tiny_ops"]["us_per_iter"], 12.5)
        self.assertEqual(parsed["transformer"]["step_ms"], 98.0)
        self.assertEqual(len(parsed), 2)

    def test_floor_line(self):
        err = 'warning\nkpfloor: {"records":5,"kernels":3,"memcpy":2,"dropped":0}\n'
        self.assertEqual(run_bench.parse_floor_line(err)["kernels"], 3)
        self.assertIsNone(run_bench.parse_floor_line("nothing"))


class MeasuredRunTest(unittest.TestCase):
    def test_peak_rss_is_the_childs_own(self):
        with tempfile.TemporaryDirectory() as tmp:
            code = "b = bytearray(200 * 1024 * 1024); print('{\"workload\": \"alloc\"}')"
            big = run_bench.run_measured([sys.executable, "-c", code], dict(os.environ), 60,
                                         os.path.join(tmp, "big"))
            small = run_bench.run_measured([sys.executable, "-c", "pass"], dict(os.environ), 60,
                                           os.path.join(tmp, "small"))
        self.assertEqual(big["rc"], 0)
        self.assertGreater(big["maxrss_kb"], 200 * 1024)
        # Measured after the big one: a per-child figure, not the max over all children.
        self.assertLess(small["maxrss_kb"], 100 * 1024)
        self.assertIn("alloc", run_bench.parse_json_lines(big["stdout"]))

    def test_thread_cpu_of_a_busy_child(self):
        # The thread spins until it has used 0.8 s of its own CPU time (not wall time), so a
        # loaded machine that gives it only part of a core still yields a busy thread.
        code = ("import threading, time\n"
                "def spin():\n"
                "    while time.thread_time() < 0.8: pass\n"
                "t = threading.Thread(target=spin); t.start(); t.join()\n")
        with tempfile.TemporaryDirectory() as tmp:
            result = run_bench.run_measured([sys.executable, "-c", code], dict(os.environ), 60,
                                            os.path.join(tmp, "busy"))
        self.assertEqual(result["rc"], 0)
        workers = [t for t in result["threads"] if not t["main"]]
        self.assertTrue(workers, result["threads"])
        self.assertGreater(workers[0]["cpu_s"], 0.3)

    def test_timeout_kills_and_reports(self):
        with tempfile.TemporaryDirectory() as tmp:
            result = run_bench.run_measured([sys.executable, "-c", "import time; time.sleep(30)"],
                                            dict(os.environ), 0.5, os.path.join(tmp, "t"))
        self.assertEqual(result["rc"], 124)
        self.assertTrue(result["timed_out"])


class NoGpuSkipTest(unittest.TestCase):
    RUN_SH = os.path.join(BENCH_DIR, "run.sh")

    def run_sh(self, env):
        return subprocess.run(["bash", self.RUN_SH, "/nonexistent-dist"], env=env,
                              capture_output=True, text=True, timeout=60)

    def test_forced_no_gpu_skips_with_reason(self):
        env = dict(os.environ, KP_BENCH_ASSUME_NO_GPU="1")
        done = self.run_sh(env)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("SKIP: kp overhead benchmark needs an NVIDIA GPU", done.stdout)

    def test_failing_nvidia_smi_skips_with_reason(self):
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "nvidia-smi")
            with open(fake, "w") as f:
                f.write("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
            os.chmod(fake, stat.S_IRWXU)
            env = dict(os.environ, PATH=tmp + os.pathsep + os.environ.get("PATH", ""))
            env.pop("KP_BENCH_ASSUME_NO_GPU", None)
            done = self.run_sh(env)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("SKIP", done.stdout)
        self.assertIn("lists no GPU", done.stdout)

    def test_driver_skips_without_gpu_too(self):
        env = dict(os.environ, KP_BENCH_ASSUME_NO_GPU="1")
        done = subprocess.run([sys.executable, os.path.join(BENCH_DIR, "run_bench.py"),
                               "/nonexistent-dist"], env=env, capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(done.stdout.startswith("SKIP:"))


class AttributionTest(unittest.TestCase):
    def test_launch_attribution_pairs(self):
        def entry(median):
            return {"median": median}
        table = {("launch_loop", "us_per_launch", t): entry(v) for t, v in (
            ("kp", 5.9), ("kp_api_none", 4.9), ("floor", 5.3), ("floor_no_cb_api", 4.4),
            ("kp_direct", 5.8))}
        rows = run_bench.launch_attribution(table)
        self.assertEqual(len(rows), 2)  # no kp_flush_off run: that row is left out
        self.assertAlmostEqual(rows[0][1], 1.0)
        self.assertAlmostEqual(rows[0][2], 0.9)
        self.assertAlmostEqual(rows[1][1], 0.1)
        self.assertIsNone(rows[1][2])


class ReportTest(unittest.TestCase):
    def test_report_from_synthetic_runs(self):
        runs = []
        for rnd in (1, 2, 3):
            for tool, launch, step in (("none", 4.0, 100.0), ("floor", 5.0, 101.0),
                                       ("kp", 5.1, 101.5), ("torch_prof_cuda", None, 110.0)):
                if launch is not None:
                    runs.append({"round": rnd, "tool": tool, "workload": "launch_loop", "rc": 0,
                                 "maxrss_kb": 300000,
                                 "outputs": {"launch_loop": {"us_per_launch": launch + rnd * 0.01,
                                                             "us_per_copy": 3.0}},
                                 "trace": {"bytes_per_kernel": 12.0, "dropped": 0}
                                 if tool == "kp" else {},
                                 "traces": ["kp.kptrace"] if tool == "kp" else None})
                runs.append({"round": rnd, "tool": tool, "workload": "torch", "rc": 0,
                             "maxrss_kb": 4000000,
                             "outputs": {"transformer": {"step_ms": step},
                                         "tiny_ops": {"us_per_iter": 40.0}}})
        setup = {"gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "pytorch": "2.11",
                 "rounds": 3}
        markdown, raw = run_bench.build_report(setup, runs, None, [], [], [], "kptrace run", 1.0)
        self.assertIn("NVIDIA H200", markdown)
        self.assertIn("| launch loop: kp added cost <= 1.05 x the floor's (same kinds) | MISS",
                      markdown)  # +1.1 vs +1.0
        # The torch runs of kp left no trace here: their verdicts stay open.
        self.assertIn("| tiny ops: kp added cost <= 1.05 x the floor's (same kinds) | UNKNOWN",
                      markdown)
        self.assertIn("| trace size: <= 6 bytes per kernel (kp defaults, launch loop) "
                      "| MISS", markdown)
        json.dumps(raw, default=str)
        kp_launch = [m for m in raw["medians"] if m["tool"] == "kp"
                     and m["metric"] == "us_per_launch"][0]
        self.assertAlmostEqual(kp_launch["median"], 5.12)
        self.assertIn("5.110..5.130", markdown)  # min..max over the rounds
        table = run_bench.summarize(runs)
        self.assertAlmostEqual(
            run_bench.paired_ratio(table, "transformer", "step_ms", "kp", "none"), 1.015)

        # A kp run that left no trace did not profile anything: no verdict from it.
        for run in runs:
            if run["tool"] == "kp":
                run["traces"] = []
        markdown, _ = run_bench.build_report(setup, runs, None, [], [], [], "kptrace run", 1.0)
        self.assertIn("kp wrote no trace", markdown)
        self.assertIn("| launch loop: kp added cost <= 1.05 x the floor's (same kinds) | UNKNOWN",
                      markdown)



class PairedPhaseTest(unittest.TestCase):
    """--paired-passes: bench/paired_cost.py runs in what is left of the budget."""

    def bench(self, out):
        args = argparse.Namespace(
            dist=out, out=out, paired_passes=2, paired_tiny_passes=0, budget_s=100000,
            python="python3", arch="sm_90", cpus="all")
        b = run_bench.Bench.__new__(run_bench.Bench)  # no GPU set-up: only what paired() reads
        b.args, b.dist, b.cpus, b.notes = args, out, [0], []
        b.t0 = run_bench.time.perf_counter()
        return b

    def test_tables_returned_and_arguments_passed(self):
        import paired_cost
        with tempfile.TemporaryDirectory() as out:
            seen = {}

            def fake_main(argv):
                seen["argv"] = argv
                d = argv[argv.index("--out") + 1]
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, "paired_cost.md"), "w") as f:
                    f.write("# Paired cost\n\nheader\n\nAdded cost from cycles\n\nEach run: "
                            "the table\n")
                with open(os.path.join(d, "paired_cost_raw.jsonl"), "w") as f:
                    for tool, cycles, residual in (("none", [0.0, 0.2], -1.0),
                                                   ("kp", [2.0, 2.2], 0.5)):
                        f.write(json.dumps({"workload": "train", "tool": tool,
                                            "cycle_pct": cycles, "residual_pct": residual}))
                        f.write("\n")
                return 0

            real, paired_cost.main = paired_cost.main, fake_main
            try:
                text, summary = self.bench(out).paired()
            finally:
                paired_cost.main = real
            self.assertEqual(text, "Added cost from cycles\n\nEach run: the table\n")
            self.assertAlmostEqual(summary[("train", "kp")]["cycles"], 2.1)
            self.assertAlmostEqual(summary[("train", "kp")]["net"], 2.6 - (0.1 - 1.0))
            argv = seen["argv"]
            self.assertEqual(argv[argv.index("--alternate") + 1], "10")
            self.assertEqual(argv[argv.index("--cycles") + 1], "20")
            self.assertEqual(argv[argv.index("--lead") + 1], "10")
            self.assertEqual(argv[argv.index("--passes") + 1], "2")
            self.assertEqual(argv[argv.index("--cpus") + 1], "0")
            self.assertGreater(int(argv[argv.index("--budget-s") + 1]), 99000)

    def fake_parts(self, calls, parts, fail_at=None):
        """A paired_cost.main that writes PARTS[i] (tool, workload, pass, cycles) rows for its
        i-th call, raising after writing them when i == fail_at."""
        def fake_main(argv):
            calls.append(argv)
            d = argv[argv.index("--out") + 1]
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "paired_cost_raw.jsonl"), "w") as f:
                for tool, workload, p, cycles in parts[len(calls) - 1]:
                    f.write(json.dumps({"workload": workload, "tool": tool, "pass": p,
                                        "cycle_pct": cycles, "residual_pct": 0.0}) + "\n")
            if len(calls) - 1 == fail_at:
                raise RuntimeError("taken back")
            with open(os.path.join(d, "paired_cost.md"), "w") as f:
                f.write("# Paired cost\n\nheader\n\nfirst part's tables\n")
            return 0
        return fake_main

    def run_paired(self, out, parts, tiny_passes, fail_at=None, budget_s=100000):
        import paired_cost
        calls = []
        real, paired_cost.main = paired_cost.main, self.fake_parts(calls, parts, fail_at)
        try:
            b = self.bench(out)
            b.args.paired_tiny_passes = tiny_passes
            b.args.budget_s = budget_s
            text, summary = b.paired()
        finally:
            paired_cost.main = real
        return b, calls, text, summary

    FIRST = [("none", "tiny", 1, [0.0, 0.2]), ("kp", "tiny", 1, [2.0, 2.2]),
             ("floor", "tiny", 1, [1.0, 1.2]), ("torch_prof", "tiny", 1, [9.0, 9.0]),
             ("kp", "train", 1, [5.0, 5.0])]

    def test_tiny_passes_pooled_for_the_floor_verdict_only(self):
        more = [("kp", "tiny", 1, [4.0, 4.2]), ("floor", "tiny", 1, [1.0, 1.0]),
                ("kp", "tiny", 2, [6.0, 6.0]), ("floor", "tiny", 2, [0.8, 1.0])]
        with tempfile.TemporaryDirectory() as out:
            b, calls, text, summary = self.run_paired(out, (self.FIRST, more), 7)
        self.assertEqual(len(calls), 2)
        second = calls[1]
        self.assertEqual(second[second.index("--workloads") + 1], "tiny")
        self.assertEqual(second[second.index("--tools") + 1], "kp,floor")
        self.assertEqual(second[second.index("--passes") + 1], "7")
        self.assertEqual(second[second.index("--alternate") + 1], "10")
        self.assertNotEqual(second[second.index("--out") + 1],
                            calls[0][calls[0].index("--out") + 1])
        # The first part's entries stay its own; the pooled ones are kp's runs 2.1, 4.1, 6.0
        # and the floor's 1.1, 1.0, 0.9.
        self.assertEqual(summary[("tiny", "kp")]["runs"], 1)
        self.assertAlmostEqual(summary[("tiny", "kp")]["cycles"], 2.1)
        pooled_kp = summary[("tiny", "kp" + run_bench.POOLED)]
        self.assertEqual(pooled_kp["runs"], 3)
        self.assertAlmostEqual(pooled_kp["cycles"], 4.1)
        self.assertAlmostEqual(summary[("tiny", "floor" + run_bench.POOLED)]["cycles"], 1.0)
        self.assertNotIn(("train", "kp" + run_bench.POOLED), summary)
        self.assertTrue(text.startswith("first part's tables\n"))
        self.assertIn("pooled with 2 more passes of them alone", text)
        self.assertIn("| tiny | kp | 3 | 6 |", text)
        self.assertNotIn("| tiny | torch_prof |", text.split("pooled with", 1)[1])
        self.assertEqual(b.notes, [])
        # The floor verdict reads the pooled pair; torch.profiler's the first part's kp.
        verdicts = {v["target"]: v for v in run_bench.targets({}, None, summary)}
        floor = verdicts["tiny ops: kp added cost <= 1.05 x the floor's (same kinds)"]
        self.assertIn("3 runs each, with the tiny-op passes", floor["detail"])
        self.assertIn("kp +4.10 %, floor +1.00 %", floor["detail"])
        share = verdicts["tiny ops: kp added cost <= half of torch.profiler (CUDA only)'s"]
        self.assertIn("1 runs each)", share["detail"])
        self.assertIn("kp +2.10 %, torch.profiler +9.00 %", share["detail"])

    def test_a_failed_tiny_part_keeps_its_finished_runs(self):
        more = [("kp", "tiny", 1, [4.0, 4.2]), ("floor", "tiny", 1, [1.0, 1.0])]
        with tempfile.TemporaryDirectory() as out:
            b, calls, text, summary = self.run_paired(out, (self.FIRST, more), 3, fail_at=1)
        self.assertEqual(len(calls), 2)
        self.assertIn("more tiny-op passes stopped: taken back (2 runs kept)", b.notes)
        self.assertEqual(summary[("tiny", "kp" + run_bench.POOLED)]["runs"], 2)
        self.assertIn("pooled with 1 more passes", text)

    def test_no_tiny_part_without_the_time_for_a_pass(self):
        with tempfile.TemporaryDirectory() as out:
            b, calls, text, summary = self.run_paired(out, (self.FIRST, []), 3, budget_s=5)
        self.assertEqual(len(calls), 1)
        self.assertEqual(text, "first part's tables\n")
        self.assertNotIn(("tiny", "kp" + run_bench.POOLED), summary)
        self.assertTrue(any(n.startswith("more tiny-op passes not run:") for n in b.notes),
                        b.notes)

    def test_tiny_passes_need_paired_passes_and_no_count_is_negative(self):
        for argv, message in ((["dist", "--paired-tiny-passes", "3"], "needs --paired-passes"),
                              (["dist", "--paired-passes", "1", "--paired-tiny-passes", "-1"],
                               "cannot be negative")):
            err = io.StringIO()
            with self.assertRaises(SystemExit):
                with contextlib.redirect_stderr(err):
                    run_bench.main(argv)
            self.assertIn(message, err.getvalue())

    def test_a_failure_becomes_a_note(self):
        import paired_cost

        def failing(argv):
            raise RuntimeError("no GPU today")

        with tempfile.TemporaryDirectory() as out:
            real, paired_cost.main = paired_cost.main, failing
            try:
                b = self.bench(out)
                self.assertEqual(b.paired(), (None, None))
            finally:
                paired_cost.main = real
            self.assertIn("paired cost not measured: no GPU today", b.notes)

if __name__ == "__main__":
    unittest.main()
