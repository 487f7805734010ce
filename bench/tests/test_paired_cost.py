"""CPU tests of bench/paired_cost.py (within-process cost) and of the floor's NVTX entry point.

Run by ctest (bench_paired_cost_test) with the system python3; standard library only. The
GPU runs themselves are bench/paired_cost.sh on the GPU machine.
"""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH_DIR)

import paired_cost as pc  # noqa: E402


def args_for(dist, **over):
    a = types.SimpleNamespace(dist=dist, cpus="2-5", python="python3", run_timeout=30,
                              probes=False, blocking_sync=False)
    for k, v in over.items():
        setattr(a, k, v)
    return a


def row(workload, tool, before, inside, after=None, **extra):
    r = {"pass": 1, "workload": workload, "tool": tool, "rc": 0, "before": before,
         "inside": inside, "after": before if after is None else after}
    r.update(extra)
    return r


class SegmentsTest(unittest.TestCase):
    def test_medians_of_the_three_parts(self):
        steps = [10.0] * pc.FIRST + [15.0] * pc.COUNT + [11.0] * (pc.STEPS - pc.FIRST - pc.COUNT)
        self.assertEqual(pc.segments(steps), (10.0, 15.0, 11.0))

    def test_one_slow_step_does_not_move_a_segment(self):
        steps = [10.0] * pc.STEPS
        steps[pc.FIRST] = 900.0  # the window's opening step
        self.assertEqual(pc.segments(steps), (10.0, 10.0, 10.0))


class CommandTest(unittest.TestCase):
    def test_kp_traces_the_window_with_a_capture_schedule(self):
        argv, _ = pc.command(args_for("/d"), "/w", "tiny", "kp")
        self.assertIn("--capture-schedule", argv)
        self.assertEqual(argv[argv.index("--capture-schedule") + 1],
                         "step:%d,0,%d,1" % (pc.FIRST, pc.COUNT))
        self.assertEqual(argv[:3], ["taskset", "-c", "2-5"])

    def test_kp_kernel_records_kernels_only_in_the_same_window(self):
        argv, _ = pc.command(args_for("/d"), "/w", "train", "kp_kernel")
        self.assertEqual(argv[argv.index("--activities") + 1], "kernel")
        self.assertEqual(argv[argv.index("--capture-schedule") + 1],
                         "step:%d,0,%d,1" % (pc.FIRST, pc.COUNT))
        self.assertLess(argv.index("--activities"), argv.index("--"))
        argv, _ = pc.command(args_for("/d"), "/w", "train", "kp")
        self.assertNotIn("--activities", argv)

    def test_segment_length_sets_the_window_and_the_step_count(self):
        self.addCleanup(pc.set_segment, pc.COUNT)
        pc.set_segment(60)
        self.assertEqual((pc.STEPS, pc.FIRST, pc.COUNT), (180, 60, 60))
        argv, env = pc.command(args_for("/d"), "/w", "train", "floor")
        self.assertEqual(argv[argv.index("--steps") + 1], "180")
        self.assertEqual(env["KPFLOOR_WINDOW"], "60,60")
        steps = [10.0] * 60 + [12.0] * 60 + [11.0] * 60
        self.assertEqual(pc.segments(steps), (10.0, 12.0, 11.0))

    def test_floor_window_and_nvtx_through_the_floor_itself(self):
        _, env = pc.command(args_for("/d"), "/w", "train", "floor")
        self.assertEqual(env["CUDA_INJECTION64_PATH"], "/d/lib/libkpfloor.so")
        # NVTX must reach the libcupti the process uses: the floor forwards it.
        self.assertEqual(env["NVTX_INJECTION64_PATH"], "/d/lib/libkpfloor.so")
        self.assertEqual(env["KPFLOOR_WINDOW"], "%d,%d" % (pc.FIRST, pc.COUNT))
        self.assertEqual(env["KPFLOOR_DETACH"], "1")
        self.assertEqual(env["KPFLOOR_KINDS"], pc.FLOOR_KINDS_OF_KP_DEFAULTS)
        _, env = pc.command(args_for("/d"), "/w", "train", "floor_kernel")
        self.assertEqual(env["KPFLOOR_KINDS"], "kernel")

    def test_floor_variant_is_the_floor_with_its_own_kinds(self):
        pc.FLOOR_KINDS["floor_drv"] = "kernel,cb_launch_driver"
        try:
            _, env = pc.command(args_for("/d"), "/w", "tiny", "floor_drv")
        finally:
            del pc.FLOOR_KINDS["floor_drv"]
        self.assertEqual(env["KPFLOOR_KINDS"], "kernel,cb_launch_driver")
        self.assertEqual(env["CUDA_INJECTION64_PATH"], "/d/lib/libkpfloor.so")
        self.assertEqual(env["KPFLOOR_WINDOW"], "%d,%d" % (pc.FIRST, pc.COUNT))
        with contextlib.redirect_stderr(io.StringIO()):
            for bad in ("drv=kernel", "floor_kernel=kernel", "floor_x="):
                with self.assertRaises(SystemExit):
                    pc.main(["/d", "--floor-variant", bad])

    def test_kp_variant_is_kp_with_its_own_settings(self):
        pc.KP_SETTINGS["kp_noflush"] = {"KP_FLUSH_MS": "600000", "KP_COMPRESSION": "none"}
        try:
            argv, env = pc.command(args_for("/d"), "/w", "tiny", "kp_noflush")
            kp_argv, kp_env = pc.command(args_for("/d"), "/w", "tiny", "kp")
        finally:
            del pc.KP_SETTINGS["kp_noflush"]
        self.assertEqual(argv, kp_argv)  # the same kptrace run, window and workload
        self.assertEqual(env["KP_FLUSH_MS"], "600000")
        self.assertEqual(env["KP_COMPRESSION"], "none")
        self.assertNotEqual(kp_env.get("KP_FLUSH_MS"), "600000")
        with contextlib.redirect_stderr(io.StringIO()):
            for bad in ("noflush=KP_FLUSH_MS=1", "kp_kernel=KP_FLUSH_MS=1", "kp_x=",
                        "kp_x=FLUSH_MS=1", "kp_x=KP_FLUSH_MS"):
                with self.assertRaises(SystemExit):
                    pc.main(["/d", "--kp-variant", bad])

    def test_kp_variant_settings_may_hold_lists(self):
        tools = pc.TOOLS
        try:
            with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
                # Parsed, then refused for the unknown workload: the variant was taken.
                pc.main(["/d", "--kp-variant", "kp_kn=KP_ACTIVITIES=kernel,nvtx,KP_FLUSH_MS=5",
                         "--workloads", "nope"])
            self.assertEqual(pc.KP_SETTINGS["kp_kn"],
                             {"KP_ACTIVITIES": "kernel,nvtx", "KP_FLUSH_MS": "5"})
        finally:
            pc.KP_SETTINGS.pop("kp_kn", None)
            pc.TOOLS = tools

    def test_torch_profiler_only_for_pytorch(self):
        self.assertIsNone(pc.command(args_for("/d"), "/w", "launch", "torch_prof"))
        argv, _ = pc.command(args_for("/d"), "/w", "tiny", "torch_prof")
        self.assertEqual(argv[argv.index("--torch-profiler-window") + 1],
                         "%d,%d" % (pc.FIRST, pc.COUNT))

    def test_none_has_no_injection(self):
        _, env = pc.command(args_for("/d"), "/w", "launch", "none")
        self.assertEqual(env.get("CUDA_INJECTION64_PATH"), os.environ.get("CUDA_INJECTION64_PATH"))


class TableTest(unittest.TestCase):
    def rows(self):
        rows = []
        for b in (4000.0, 5000.0, 6000.0):  # per-process baselines differ; the added cost not
            rows += [row("tiny", "none", b, b),
                     row("tiny", "kp", b, b + 400.0, kp_kernels=7500),
                     row("tiny", "floor", b, b + 500.0),
                     row("tiny", "floor_kernel", b, b + 250.0),
                     row("tiny", "kp_kernel", b, b + 300.0),
                     row("tiny", "torch_prof", b, b + 1000.0)]
        return rows

    def test_ratios_from_each_runs_own_added_cost(self):
        text = pc.table(self.rows())
        line = [l for l in text.splitlines() if l.startswith("| tiny | 0.")][0]
        cells = [c.strip() for c in line.split("|")[1:-1]]
        self.assertEqual(cells[1:6], ["0.800", "0.400", "0.500", "0.250", "1.200"])
        self.assertEqual(cells[6], "+8.00 %")  # 400 over the median baseline's 5000

    def test_per_iteration_units(self):
        text = pc.table(self.rows())
        kp = [l for l in text.splitlines() if l.startswith("| tiny | kp |")][0]
        self.assertIn("+8 [+8..+8]", kp)  # 400 us per step of 50 iterations
        self.assertIn("7500..7500", kp)

    def test_failed_runs_listed_and_ignored(self):
        rows = self.rows() + [{"pass": 2, "workload": "tiny", "tool": "kp", "rc": 1,
                               "error": "kp: bad"}]
        text = pc.table(rows)
        self.assertIn("- tiny/kp pass 2: rc 1, kp: bad", text)
        self.assertIn("| tiny | kp | 3 |", text)

    def test_cpu_time_table_and_ratios(self):
        def cpu(before, inside):
            return {"before": before, "inside": inside, "after": before}

        rows = []
        for b in (5000.0, 5200.0, 4800.0):
            rows += [row("tiny", "kp", b, b + 400.0, thread_cpu=cpu(b, b + 300.0),
                         process_cpu=cpu(b, b + 600.0)),
                     row("tiny", "floor", b, b + 500.0, thread_cpu=cpu(b, b + 250.0),
                         process_cpu=cpu(b, b + 400.0))]
        rows.append(row("tiny", "kp", 5000.0, 5400.0))  # a run without CPU times
        text = pc.cpu_table(rows)
        kp = [l for l in text.splitlines() if l.startswith("| tiny | kp |")][0]
        self.assertEqual(kp, "| tiny | kp | 3 | +6 [+6..+6] | +12 [+12..+12] |")
        ratios = [l for l in text.splitlines() if l.startswith("| tiny | 1.")][0]
        self.assertEqual([c.strip() for c in ratios.split("|")[2:4]], ["1.200", "1.500"])

    def test_no_ratio_against_a_tool_that_cost_nothing(self):
        rows = [row("train", "kp", 10000.0, 10500.0), row("train", "floor", 10000.0, 9990.0)]
        line = [l for l in pc.table(rows).splitlines() if l.startswith("| train | ")][-1]
        self.assertEqual(line.split("|")[2].strip(), "–")


class ProbeTableTest(unittest.TestCase):
    """Step times read against the probes: a drift of the machine's speed that slows the steps
    and the probes alike cancels; a tool's cost, which slows only the steps, stays."""

    def drifting_run(self, tool, cost):
        # The machine runs 20 % slower from step 20 to step 69, in the window and out of it.
        speed = [1.2 if 20 <= i < 70 else 1.0 for i in range(pc.STEPS)]
        traced = [pc.FIRST <= i < pc.FIRST + pc.COUNT for i in range(pc.STEPS)]
        steps = [1000.0 * s * (1.0 + (cost if t else 0.0)) for s, t in zip(speed, traced)]
        probes = [300.0 * s for s in speed]
        r = row("train", tool, *pc.segments(steps), step_us=steps, probe_cpu_us=probes,
                probe_gpu_us=[500.0] * pc.STEPS)
        return r

    def test_drift_common_to_steps_and_probes_cancels(self):
        rows = [self.drifting_run("none", 0.0), self.drifting_run("kp", 0.10),
                self.drifting_run("floor", 0.08)]
        text = pc.probe_table(rows)
        none = [l for l in text.splitlines() if l.startswith("| train | none |")][0]
        cells = [c.strip() for c in none.split("|")[1:-1]]
        self.assertEqual(cells[3], "+20.00 [+20.00..+20.00]")  # raw: the drift looks like cost
        self.assertEqual(cells[4], "+0.00 [+0.00..+0.00]")  # against the CPU probe: gone
        self.assertEqual(cells[5], "+20.00 [+20.00..+20.00]")  # the GPU probe did not drift
        self.assertEqual(cells[6], "1.200")  # CPU probe inside / before
        kp = [l for l in text.splitlines() if l.startswith("| train | kp |")][0]
        self.assertEqual(kp.split("|")[5].strip(), "+10.00 [+10.00..+10.00]")
        ratio = [l for l in text.splitlines() if l.startswith("| train | kp / floor |")][0]
        self.assertEqual(ratio.split("|")[4].strip(), "1.250")  # 10 % over 8 %

    def test_no_table_without_probes(self):
        self.assertEqual(pc.probe_table([row("train", "kp", 1000.0, 1100.0)]), "")

    def test_probes_passed_to_the_pytorch_workloads_only(self):
        argv, _ = pc.command(args_for("/d", probes=True, blocking_sync=True), "/w", "train", "kp")
        self.assertIn("--probes", argv)
        self.assertIn("--blocking-sync", argv)
        argv, _ = pc.command(args_for("/d", probes=True, blocking_sync=False), "/w", "launch",
                             "kp")
        self.assertNotIn("--probes", argv)


class FastStateTest(unittest.TestCase):
    """The machine's CPU switches between a fast and a ~1.6 x slower state; steps taken in the
    slow state are left out, so a switch between baseline and window is not read as cost."""

    def switching_run(self, tool, cost, slow):
        traced = [pc.FIRST <= i < pc.FIRST + pc.COUNT for i in range(pc.STEPS)]
        speed = [1.6 if slow(i) else 1.0 for i in range(pc.STEPS)]
        steps = [1000.0 * v * (1.0 + (cost if t else 0.0)) for v, t in zip(speed, traced)]
        return row("train", tool, *pc.segments(steps), step_us=steps,
                   probe_cpu_us=[900.0 * v for v in speed])

    def test_slow_state_steps_left_out(self):
        # none: the window falls mostly in the slow state; kp: its baseline does.
        rows = [self.switching_run("none", 0.0, lambda i: pc.FIRST + 5 <= i < pc.STEPS),
                self.switching_run("kp", 0.03, lambda i: i < 10),
                self.switching_run("floor", 0.02, lambda i: False)]
        raw = pc.table(rows)
        self.assertIn("| train | none | 1 |", raw)
        self.assertIn("+60.00 %", raw)  # the raw measure reads the switch as cost
        text = pc.fast_state_table(rows)
        lines = {l.split("|")[2].strip(): [c.strip() for c in l.split("|")[1:-1]]
                 for l in text.splitlines() if l.startswith("| train |")}
        self.assertEqual(lines["none"][2], "0 / 1")  # 4 fast steps inside: too few to count
        self.assertEqual(lines["none"][4], "–")
        self.assertEqual(lines["kp"][2], "1 / 1")
        # The first step after the switch is left out too: the probe before it was slow.
        self.assertEqual(lines["kp"][3], "%d, %d" % (pc.FIRST - 10 - 1, pc.COUNT))
        self.assertEqual(lines["kp"][4], "+3.00 [+3.00..+3.00]")
        self.assertEqual(lines["kp"][5], "1.500")  # 3 % over the floor's 2 %

    def test_no_table_without_probes(self):
        self.assertEqual(pc.fast_state_table([row("train", "kp", 1000.0, 1100.0)]), "")


class AlternateTest(unittest.TestCase):
    """--alternate: untraced lead blocks, then traced and untraced blocks in turn; each traced
    block is read against the untraced blocks either side, so a drift slower than a cycle
    cancels; the untraced blocks after the first window against the lead give what a tool
    leaves on while off."""

    def setUp(self):
        self.addCleanup(pc.set_segment, 30)
        pc.set_alternate(10, 3)  # 3 lead blocks (the default), 3 cycles

    def test_steps_and_blocks(self):
        self.assertEqual(pc.STEPS, 90)
        self.assertEqual(pc.blocks()[:5], [(1, 9, False), (11, 19, False), (21, 29, False),
                                           (31, 39, True), (41, 49, False)])
        self.assertEqual([traced for _, _, traced in pc.blocks()],
                         [False, False, False, True, False, True, False, True, False])
        self.assertTrue(pc.is_traced(31) and not pc.is_traced(30) and not pc.is_traced(39))
        self.assertTrue(pc.is_baseline(41) and not pc.is_baseline(40) and not pc.is_baseline(31))

    def test_every_tool_switches_with_the_same_blocks(self):
        # kp: skip 20 steps, then cycles of 10 off and 10 on: on for steps 30-39, 50-59, ...
        argv, _ = pc.command(args_for("/d"), "/w", "train", "kp")
        self.assertEqual(argv[argv.index("--capture-schedule") + 1], "step:10,0,10,0,20")
        self.assertEqual(argv[argv.index("--steps") + 1], "90")
        _, env = pc.command(args_for("/d"), "/w", "train", "floor_kernel")
        self.assertEqual(env["KPFLOOR_WINDOW"], "30,10,20")
        self.assertNotIn("KPFLOOR_DETACH", env)  # the floor stays attached, as kp does
        argv, _ = pc.command(args_for("/d"), "/w", "tiny", "torch_prof")
        self.assertEqual(argv[argv.index("--torch-profiler-window") + 1], "30,10,20")

    def test_a_steady_drift_cancels_in_each_cycle(self):
        # The machine slows 1 % per block; traced blocks cost 4 % more; block edges are noisy.
        steps = []
        for i in range(pc.STEPS):
            block = i // 10
            t = 1000.0 * (1 + 0.01 * block) * (1.04 if pc.blocks()[block][2] else 1.0)
            steps.append(t * (3.0 if i % 10 in (0, 9) else 1.0))
        cycles = pc.cycle_costs(steps)
        self.assertEqual(len(cycles), 3)
        for c in cycles:
            self.assertAlmostEqual(c, 4.0, places=6)
        before, inside, _ = pc.segments(steps)
        self.assertGreater(inside / before - 1, 0.04)  # the pooled medians keep part of the drift

    def test_what_is_left_on_while_off(self):
        # Untraced steps cost 5 % more once the tool has switched on once; traced ones 10 %.
        steps = [1000.0] * 30 + [1100.0 if pc.blocks()[i // 10][2] else 1050.0
                                 for i in range(30, pc.STEPS)]
        self.assertAlmostEqual(pc.residual_cost(steps), 5.0)
        # The first cycle's left neighbour is the last lead block, untouched by the tool.
        first, *later = pc.cycle_costs(steps)
        self.assertAlmostEqual(first, (1100 / 1025 - 1) * 100)
        for c in later:
            self.assertAlmostEqual(c, (1100 / 1050 - 1) * 100)
        rows = [row("train", "kp", 1000.0, 1100.0, cycle_pct=pc.cycle_costs(steps),
                    residual_pct=pc.residual_cost(steps)),
                row("train", "floor", 1000.0, 1100.0, cycle_pct=[2.0] * 3, residual_pct=5.0)]
        text = pc.cycle_table(rows)
        kp = [l for l in text.splitlines() if l.startswith("| train | kp |")][0]
        cells = [c.strip() for c in kp.split("|")[1:-1]]
        self.assertEqual(cells[4], "+4.76 [+4.76..+4.76]")
        self.assertEqual(cells[6], "+5.00 [+5.00..+5.00]")
        self.assertEqual(cells[7], "+9.76 [+9.76..+9.76]")
        ratios = [l for l in text.splitlines() if l.startswith("| train | ")
                  and l.count("|") == 8]
        self.assertEqual(ratios[0].split("|")[2].strip(), "%.3f" % ((1100 / 1050 - 1) * 50))
        self.assertEqual(ratios[1].split("|")[2].strip(), "%.3f" % (9.7619 / 7.0))

    def test_cycle_table_ratios(self):
        rows = [row("train", t, 1000.0, 1000.0 * (1 + c / 100), cycle_pct=[c - 1, c, c + 1],
                    residual_pct=0.0)
                for t, c in (("none", 0.0), ("kp", 2.0), ("floor", 2.0), ("torch_prof", 8.0))]
        text = pc.cycle_table(rows)
        kp = [l for l in text.splitlines() if l.startswith("| train | kp |")][0]
        self.assertEqual([c.strip() for c in kp.split("|")[3:7]],
                         ["1", "3", "+2.00 [+2.00..+2.00]", "+2.00 [+1.50..+2.50]"])
        ratios = [l for l in text.splitlines() if l.startswith("| train | 1.000 |")][0]
        self.assertEqual([c.strip() for c in ratios.split("|")[2:8]],
                         ["1.000", "0.250", "0.250", "–", "–", "+2.00 %"])
        self.assertEqual(pc.cycle_table([row("train", "kp", 1.0, 1.0)]), "")
        # The pooled table has no ratios of its own with blocks: they would keep the drift.
        self.assertNotIn("kp / floor", pc.table(rows))

    def test_against_no_tool_subtracts_no_tools_own_reading(self):
        # Every process runs 2 % faster after its lead blocks; no tool reads that as -2 %.
        rows = [row("train", t, 1000.0, 1000.0, cycle_pct=[c] * 3, residual_pct=r)
                for t, c, r in (("none", 0.0, -2.0), ("kp", 2.0, -1.0), ("floor", 3.0, 1.0),
                                ("torch_prof", 4.0, 8.0))]
        summary = pc.cycle_summary(rows)
        self.assertEqual(list(summary), [("train", t) for t in ("none", "kp", "floor",
                                                                 "torch_prof")])
        self.assertAlmostEqual(summary[("train", "none")]["net"], 0.0)
        self.assertAlmostEqual(summary[("train", "kp")]["total"], 1.0)
        self.assertAlmostEqual(summary[("train", "kp")]["net"], 3.0)
        self.assertAlmostEqual(summary[("train", "floor")]["net"], 6.0)
        self.assertAlmostEqual(summary[("train", "torch_prof")]["net"], 14.0)
        ratios = [l for l in pc.cycle_table(rows).splitlines() if l.startswith("| train | ")
                  and l.count("|") == 8]
        self.assertEqual([c.strip() for c in ratios[1].split("|")[2:4]] + [
            ratios[1].split("|")[7].strip()], ["0.500", "0.214", "+3.00 %"])

    def test_what_is_left_on_is_read_in_the_fast_state(self):
        # The machine runs its lead in the slow state (steps and CPU probes 1.6 x), then fast;
        # the tool leaves +5 % on while off. Raw, the switch reads as -34 %; the fast-state
        # steps alone give the 5 %, and a run whose lead has no fast step is not counted.
        pc.set_alternate(10, 3, lead=3)
        slow = [i < 30 for i in range(pc.STEPS)]
        steps = [1000.0 * (1.6 if slow[i] else 1.05) for i in range(pc.STEPS)]
        probes = [1500.0 if slow[i] else 900.0 for i in range(pc.STEPS)]
        for i in (3, 4, 5, 13, 14, 15, 23, 24, 25):  # some fast steps in the lead
            steps[i], probes[i], probes[i - 1] = 1000.0, 900.0, 900.0
        self.assertAlmostEqual(pc.residual_cost(steps), (1050 / 1600 - 1) * 100)
        fast = set(pc.fast_steps({"step_us": steps, "probe_cpu_us": probes}, 1000.0))
        self.assertIsNone(pc.residual_cost(steps, fast))  # 9 fast lead steps < FAST_MIN_STEPS
        for i in (6, 7, 16, 17, 26, 27):
            steps[i], probes[i] = 1000.0, 900.0
        fast = set(pc.fast_steps({"step_us": steps, "probe_cpu_us": probes}, 1000.0))
        self.assertAlmostEqual(pc.residual_cost(steps, fast), 5.0)
        rows = [row("train", t, 1.0, 1.0, cycle_pct=[c] * 3, step_us=steps,
                    probe_cpu_us=probes, residual_pct=pc.residual_cost(steps))
                for t, c in (("none", 0.0), ("kp", 2.0))]
        rows[0]["step_us"] = [1000.0 if t < 1000 else 1600.0 for t in probes]  # no tool: 0 %
        rows.append(row("train", "kp", 1.0, 1.0, cycle_pct=[2.0] * 3, step_us=[1600.0] * 30 +
                        [1000.0] * (pc.STEPS - 30), probe_cpu_us=[1500.0] * 30 +
                        [900.0] * (pc.STEPS - 30), residual_pct=-37.5))  # lead all slow
        summary = pc.cycle_summary(rows)
        kp = summary[("train", "kp")]
        self.assertTrue(kp["fast"])
        self.assertEqual((kp["runs"], kp["residual_runs"]), (2, 1))
        self.assertAlmostEqual(kp["left_on"], 5.0)
        self.assertAlmostEqual(kp["net"], 7.0)
        self.assertIn("+5.00 [+5.00..+5.00] (fast state, 1 of 2 runs)", pc.cycle_table(rows))
        # No run of a tool counted: no reading against no tool, and a dash in the table.
        summary = pc.cycle_summary(rows[2:])
        self.assertIsNone(summary[("train", "kp")]["net"])
        self.assertIn("| – | – |", pc.cycle_table(rows[2:]))

    def test_recorded_rows_are_read_with_their_own_blocks(self):
        # A row written by another run's set-up (blocks of 10, 3 lead blocks) read after this
        # module was set up differently: its own block and lead count, not the module's.
        steps = [1000.0] * 30 + [1100.0 if pc.blocks()[i // 10][2] else 1050.0
                                 for i in range(30, pc.STEPS)]
        probes = [900.0] * pc.STEPS
        rows = [row("train", "kp", 1.0, 1.0, cycle_pct=[2.0], step_us=steps, block=10, lead=3,
                    probe_cpu_us=probes, residual_pct=pc.residual_cost(steps))]
        pc.set_segment(30)  # one window: no blocks at all
        try:
            with self.assertRaises(ValueError):
                pc.blocks()
            summary = pc.cycle_summary(rows)
        finally:
            pc.set_alternate(10, 3)
        self.assertEqual(summary[("train", "kp")]["residual_runs"], 1)
        self.assertAlmostEqual(summary[("train", "kp")]["left_on"], 5.0)
        # A row without a residual reading counts for none (not as 0).
        rows = [row("train", "kp", 1.0, 1.0, cycle_pct=[2.0])]
        self.assertIsNone(pc.cycle_summary(rows)[("train", "kp")]["left_on"])

    def test_cycles_without_alternate_is_an_error(self):
        with self.assertRaises(SystemExit):
            pc.main(["/d", "--cycles", "5"])


class TorchProfilerWindowTest(unittest.TestCase):
    def test_window_edges(self):
        sys.path.insert(0, os.path.join(BENCH_DIR, "workloads"))
        import step_loop  # torch is imported only in its main()

        one = step_loop.parse_window("30,30")
        edges = [i for i in range(90) if any(step_loop.window_edges(one, i))]
        self.assertEqual(edges, [30, 59])
        repeating = step_loop.parse_window("10,10,20")
        opens = [i for i in range(70) if step_loop.window_edges(repeating, i)[0]]
        closes = [i for i in range(70) if step_loop.window_edges(repeating, i)[1]]
        self.assertEqual((opens, closes), ([10, 30, 50], [19, 39, 59]))
        for bad in ("10", "10,10,10", "x,1", "-1,5"):
            with self.assertRaises(Exception):
                step_loop.parse_window(bad)


class RunOneTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        os.makedirs(os.path.join(self.dir, "bin"))
        self.addCleanup(shutil.rmtree, self.dir)

    def fake_loop(self, body):
        path = os.path.join(self.dir, "launch_loop")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(path, 0o755)

    def args(self):
        return args_for(self.dir, cpus=",".join(str(c) for c in sorted(os.sched_getaffinity(0))))

    def test_parses_step_times(self):
        steps = [100.0] * pc.FIRST + [130.0] * pc.COUNT + [101.0] * (pc.STEPS - 60)
        self.fake_loop("echo launch_loop: done; echo '%s'" % json.dumps({"step_us": steps}))
        r = pc.run_one(self.args(), self.dir, "launch", "none", 1)
        self.assertEqual((r["before"], r["inside"], r["after"]), (100.0, 130.0, 101.0))
        self.assertNotIn("error", r)

    def test_parses_cpu_times_beside_the_step_times(self):
        steps = [100.0] * pc.STEPS
        thread = [50.0] * pc.FIRST + [70.0] * pc.COUNT + [51.0] * (pc.STEPS - 60)
        self.fake_loop("echo '%s'" % json.dumps({"step_us": steps, "step_cpu_us": thread,
                                                   "step_process_cpu_us": [1.0] * 5}))
        r = pc.run_one(self.args(), self.dir, "launch", "none", 1)
        self.assertEqual(r["thread_cpu"], {"before": 50.0, "inside": 70.0, "after": 51.0})
        self.assertNotIn("process_cpu", r)  # the wrong length: left out, not an error
        self.assertNotIn("error", r)

    def test_wrong_step_count_is_an_error(self):
        self.fake_loop("echo '%s'" % json.dumps({"step_us": [1.0] * 10}))
        r = pc.run_one(self.args(), self.dir, "launch", "none", 1)
        self.assertIn("10 step times", r["error"])

    def test_failed_program_keeps_its_last_error_line(self):
        self.fake_loop("echo 'CUDA error: no device' >&2; exit 3")
        r = pc.run_one(self.args(), self.dir, "launch", "none", 1)
        self.assertEqual(r["rc"], 3)
        self.assertEqual(r["error"], "CUDA error: no device")

    def test_probe_series_kept_beside_the_step_times(self):
        steps = [100.0] * pc.STEPS
        self.fake_loop("echo '%s'" % json.dumps({"step_us": steps,
                                                   "probe_cpu_us": [300.0] * pc.STEPS,
                                                   "probe_gpu_us": [2.0] * 3}))
        r = pc.run_one(self.args(), self.dir, "launch", "none", 1)
        self.assertEqual(r["probe_cpu_us"], [300.0] * pc.STEPS)
        self.assertNotIn("probe_gpu_us", r)  # the wrong length: left out

    def test_floor_line_read_from_stderr(self):
        steps = [1.0] * pc.STEPS
        self.fake_loop("echo '%s'; echo 'kpfloor: {\"kernels\": 90000}' >&2" %
                       json.dumps({"step_us": steps}))
        r = pc.run_one(self.args(), self.dir, "launch", "none", 1)
        self.assertEqual(r["floor"]["kernels"], 90000)


class KpApartTest(unittest.TestCase):
    def test_cpu_lists(self):
        self.assertEqual(set(pc.parse_cpu_list("2,3,10-12")), {2, 3, 10, 11, 12})
        self.assertEqual(set(pc.parse_cpu_list("7")), {7})

    def test_apart_cpus_must_lie_outside_the_workloads(self):
        with contextlib.redirect_stderr(io.StringIO()):
            for bad in ("3-6", "x", "9-", ""):
                with self.assertRaises(SystemExit):
                    pc.main(["/d", "--cpus", "2-5", "--kp-apart", bad])

    def test_only_kp_threads_move_and_each_once(self):
        import threading
        cpu = min(os.sched_getaffinity(0))
        tids, ready, stop = {}, threading.Barrier(3), threading.Event()

        def named(name):
            tid = threading.get_native_id()
            with open("/proc/self/task/%d/comm" % tid, "w") as f:
                f.write(name)
            tids[name] = tid
            ready.wait()
            stop.wait()

        threads = [threading.Thread(target=named, args=(n,)) for n in ("kp-probe", "worker")]
        for t in threads:
            t.start()
        ready.wait()
        try:
            before = os.sched_getaffinity(tids["worker"])
            moved = set()
            self.assertEqual(pc.move_kp_threads(os.getpid(), {cpu}, moved), 1)
            self.assertEqual(moved, {tids["kp-probe"]})
            self.assertEqual(os.sched_getaffinity(tids["kp-probe"]), {cpu})
            self.assertEqual(os.sched_getaffinity(tids["worker"]), before)
            self.assertEqual(pc.move_kp_threads(os.getpid(), {cpu}, moved), 0)
        finally:
            stop.set()
            for t in threads:
                t.join()

    def test_a_child_process_threads_are_found(self):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            self.assertIn(child.pid, {p for p, _ in pc.tree_threads(os.getpid())})
        finally:
            child.kill()
            child.wait()


@unittest.skipUnless(os.environ.get("KPFLOOR_LIB"), "KPFLOOR_LIB (libkpfloor.so) not given")
class FloorExportsTest(unittest.TestCase):
    def test_floor_exports_both_injection_entry_points(self):
        nm = shutil.which("nm")
        if nm is None:
            self.skipTest("nm not found")
        out = subprocess.run([nm, "-D", "--defined-only", os.environ["KPFLOOR_LIB"]],
                             capture_output=True, text=True, check=True).stdout
        names = {line.split()[-1] for line in out.splitlines() if line.strip()}
        self.assertIn("InitializeInjection", names)
        self.assertIn("InitializeInjectionNvtx2", names)

    def test_window_setting_is_checked_whole(self):
        # The floor's set-up, called as CUDA would: a bad KPFLOOR_WINDOW is refused with one
        # message before any CUPTI call; a good one passes the check (CUPTI may then fail here,
        # without a GPU, which is not this test's business).
        if "KPFLOOR_LIB" not in os.environ:
            self.skipTest("KPFLOOR_LIB not set (ctest sets it)")
        code = ("import ctypes, sys; ctypes.CDLL(sys.argv[1]).InitializeInjection()")
        for value, good in (("10,10", True), ("10,10,20", True), ("10,10x", False),
                            ("10,10,", False), ("10,10,abc", False), ("10,10,10", False),
                            ("10,10,20x", False), ("-1,5", False)):
            env = dict(os.environ, KPFLOOR_WINDOW=value)
            err = subprocess.run([sys.executable, "-c", code, os.environ["KPFLOOR_LIB"]],
                                 env=env, capture_output=True, text=True, timeout=60).stderr
            self.assertEqual("is not FIRST,COUNT" not in err, good, (value, err))

    def test_kinds_words_checked_whole(self):
        # Words are checked before any CUPTI call: a known one passes the check, an unknown one
        # is named with the accepted words.
        code = ("import ctypes, sys; ctypes.CDLL(sys.argv[1]).InitializeInjection()")
        for kinds, good in (("kernel,nvtx,cb_api,lazy_copy,driver_only,cb_resource,cb_trigger,"
                             "dev_ctx", True), ("kernel,cb_resources", False)):
            env = dict(os.environ, KPFLOOR_KINDS=kinds, KPFLOOR_WINDOW="10,10,20")
            err = subprocess.run([sys.executable, "-c", code, os.environ["KPFLOOR_LIB"]],
                                 env=env, capture_output=True, text=True, timeout=60).stderr
            self.assertEqual("KPFLOOR_KINDS: unknown" not in err, good, (kinds, err))
            if not good:
                self.assertIn("cb_resource, cb_trigger", err)


if __name__ == "__main__":
    unittest.main()
