"""CPU tests of bench/thread_cpu.py (CPU time by thread). Run by ctest (bench_thread_cpu_test)
with the system python3; standard library only. The GPU runs are thread_cpu.py on the GPU
machine."""

import json
import os
import shutil
import sys
import tempfile
import types
import unittest

BENCH_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, BENCH_DIR)

import thread_cpu as tc  # noqa: E402


def args_for(**over):
    a = types.SimpleNamespace(dist="/d", python="python3", cpus="2-5", steps=200, run_timeout=30)
    for k, v in over.items():
        setattr(a, k, v)
    return a


class CommandTest(unittest.TestCase):
    def test_each_tool_is_what_it_says(self):
        argv, env = tc.command(args_for(), "/w", "train", "none")
        self.assertEqual(argv[:3], ["taskset", "-c", "2-5"])
        self.assertIn("--thread-cpu", argv)
        self.assertNotIn("CUDA_INJECTION64_PATH", {k: v for k, v in env.items()
                                                    if v.endswith("libkpfloor.so")})
        _, env = tc.command(args_for(), "/w", "train", "floor_kernel")
        self.assertEqual(env["KPFLOOR_KINDS"], "kernel")
        self.assertEqual(env["NVTX_INJECTION64_PATH"], "/d/lib/libkpfloor.so")
        for tool, flag in (("kp_kernel", ["--activities", "kernel"]),
                           ("kp_flush10s", ["--flush-ms", "10000"]),
                           ("kp_raw", ["--compression", "none"])):
            argv, _ = tc.command(args_for(), "/w", "tiny", tool)
            i = argv.index("--")
            self.assertEqual(argv[i - 2:i], flag)
            self.assertEqual(argv[3:5], ["/d/bin/kptrace", "run"])


class GroupTest(unittest.TestCase):
    def test_numbered_threads_share_a_group_the_stepping_thread_keeps_its_name(self):
        self.assertEqual(tc.group("pt_autograd_0/123"), "pt_autograd_#")
        self.assertEqual(tc.group("pt_autograd_1/124"), "pt_autograd_#")
        self.assertEqual(tc.group("python3/100"), "python3")
        self.assertEqual(tc.group("cuda-EvtHandlr/101"), "cuda-EvtHandlr")


class RunOneAndTableTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir)

    def fake(self, payload, rc=0):
        script = os.path.join(self.dir, "fake.py")
        with open(script, "w") as f:
            f.write("import sys\nprint(%r)\nsys.stderr.write('boom\\n')\nsys.exit(%d)\n" % (
                json.dumps(payload), rc))
        return args_for(python=sys.executable, cpus="0", steps=4)

    def run_fake(self, payload, tool="none", rc=0):
        args = self.fake(payload, rc)
        real = tc.command

        def command(a, work, workload, t):
            argv, env = real(a, work, workload, "none")
            return argv[:3] + [a.python, os.path.join(self.dir, "fake.py")], env
        tc.command = command
        self.addCleanup(setattr, tc, "command", real)
        return tc.run_one(args, self.dir, "train", tool, 1)

    def test_cpu_per_step_by_group(self):
        r = self.run_fake({"step_us": [10.0, 11.0, 12.0, 13.0],
                           "step_process_cpu_us": [2500.0] * 4,
                           "thread_cpu_s": {"python3/1": 0.004, "pt_autograd_0/2": 0.002,
                                            "pt_autograd_1/3": 0.002, "kp-writer/4": 0.00001}})
        self.assertEqual(r["step_us"], 11.5)
        self.assertEqual(r["process_cpu_us"], 2500.0)
        self.assertAlmostEqual(r["groups_us"]["python3"], 1000.0)
        self.assertAlmostEqual(r["groups_us"]["pt_autograd_#"], 1000.0)
        text = tc.table([r, dict(r, tool="kp")])
        self.assertIn("| train | runs | wall | process CPU | pt_autograd_# | python3 |", text)
        self.assertIn("| kp | 1 | 12 (12..12) | 2500 (2500..2500) | 1000 (1000..1000) |", text)
        self.assertNotIn("kp-writer", text)  # under 1 % of the process's CPU

    def test_failed_run_listed(self):
        r = self.run_fake({}, rc=3)
        self.assertEqual(r["error"], "boom")
        self.assertIn("- train/none round 1: rc 3, boom", tc.table([r]))


if __name__ == "__main__":
    unittest.main()
