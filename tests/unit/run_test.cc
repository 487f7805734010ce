// `kptrace run` launcher tests: real fork/exec of /bin/sh, exit status passthrough, the
// environment the child sees, signals, and usage errors.
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tools/kptrace/commands.h"
#include "tools/kptrace/run_command.h"

namespace {

// A stand-in injection library: the launcher only needs the path to exist (the child is sh).
std::string FakeLibrary() {
  std::string path = "run_test_libkpinject.so";
  std::ofstream(path) << "not a library\n";
  char resolved[PATH_MAX];
  EXPECT_NE(realpath(path.c_str(), resolved), nullptr);
  return resolved;
}

int Launch(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return kp::cli::RunLauncher(static_cast<int>(args.size()), argv.data());
}

std::map<std::string, std::string> ReadEnvFile(const std::string& path) {
  std::map<std::string, std::string> env;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

TEST(Launcher, PassesTheExitCodeThrough) {
  std::string lib = FakeLibrary();
  EXPECT_EQ(Launch({"--lib", lib, "--", "sh", "-c", "exit 7"}), 7);
  EXPECT_EQ(Launch({"--lib", lib, "--", "true"}), 0);
}

TEST(Launcher, SetsTheVariablesInTheChild) {
  std::string lib = FakeLibrary();
  unlink("run_test_env.txt");
  EXPECT_EQ(Launch({"--lib", lib, "-o", "out-%p.kptrace", "--api=all", "--metrics", "sol",
                    "--flush-ms", "250", "--compression", "none", "--preload", "--", "sh", "-c",
                    "env > run_test_env.txt"}),
            0);
  auto env = ReadEnvFile("run_test_env.txt");
  EXPECT_EQ(env["CUDA_INJECTION64_PATH"], lib);
  EXPECT_EQ(env["NVTX_INJECTION64_PATH"], lib);
  EXPECT_EQ(env["LD_PRELOAD"].rfind(lib, 0), 0u);
  EXPECT_EQ(env["KP_OUTPUT"], "out-%p.kptrace");
  EXPECT_EQ(env["KP_API"], "all");
  EXPECT_EQ(env["KP_METRICS"], "sol");
  EXPECT_EQ(env["KP_FLUSH_MS"], "250");
  EXPECT_EQ(env["KP_COMPRESSION"], "none");
  EXPECT_EQ(env.count("KP_LOG"), 0u);
}

TEST(Launcher, KernelTargetingFlagsSetTheirVariables) {
  std::string lib = FakeLibrary();
  unlink("run_test_target_env.txt");
  EXPECT_EQ(Launch({"--lib", lib, "--metrics", "sol", "--metrics-kernels", "regex:gemm|conv",
                    "--metrics-launch-skip", "3", "--metrics-launch-count=2",
                    "--metrics-launch-skip-before-match", "10", "--metrics-launch-scope",
                    "per-name", "--metrics-nvtx-include", "step 7", "--", "sh", "-c",
                    "env > run_test_target_env.txt"}),
            0);
  auto env = ReadEnvFile("run_test_target_env.txt");
  EXPECT_EQ(env["KP_METRICS_KERNELS"], "regex:gemm|conv");
  EXPECT_EQ(env["KP_METRICS_LAUNCH_SKIP"], "3");
  EXPECT_EQ(env["KP_METRICS_LAUNCH_COUNT"], "2");
  EXPECT_EQ(env["KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH"], "10");
  EXPECT_EQ(env["KP_METRICS_LAUNCH_SCOPE"], "per-name");
  EXPECT_EQ(env["KP_METRICS_NVTX_INCLUDE"], "step 7");
}

TEST(Launcher, KilledChildGives128PlusSignal) {
  std::string lib = FakeLibrary();
  EXPECT_EQ(Launch({"--lib", lib, "--", "sh", "-c", "kill -TERM $$"}), 128 + 15);
}

TEST(Launcher, UsageErrors) {
  std::string lib = FakeLibrary();
  EXPECT_EQ(Launch({"--bogus", "--", "true"}), 2);
  EXPECT_EQ(Launch({"--lib", lib}), 2);
  EXPECT_EQ(Launch({"--lib", lib, "--"}), 2);
  EXPECT_EQ(Launch({"--api"}), 2);  // flag without its value
  EXPECT_EQ(Launch({"--lib", lib, "--", "/nonexistent/kp-no-such-command"}), 127);
  EXPECT_EQ(Launch({"--lib", "/nonexistent/libkpinject.so", "--", "true"}), 1);
}

TEST(Launcher, ParseNamesTheUnknownFlag) {
  std::vector<std::string> args = {"--delay", "5", "--frobnicate", "x", "--", "a"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  const kp::StatusOr<kp::LaunchPlan> plan =
      kp::ParseLaunchArgs(static_cast<int>(argv.size()), argv.data());
  ASSERT_FALSE(plan.ok());
  const std::string err = plan.status().message();
  EXPECT_NE(err.find("'--frobnicate'"), std::string::npos) << err;
}

TEST(Launcher, CommandWithoutDoubleDash) {
  std::vector<std::string> args = {"--log", "debug", "python3", "-c", "pass"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  const kp::StatusOr<kp::LaunchPlan> parsed =
      kp::ParseLaunchArgs(static_cast<int>(argv.size()), argv.data());
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const kp::LaunchPlan& plan = parsed.value();
  ASSERT_EQ(plan.command.size(), 3u);
  EXPECT_EQ(plan.command[1], "-c");
  ASSERT_EQ(plan.env.size(), 1u);
  EXPECT_EQ(plan.env[0].first, "KP_LOG");
}

}  // namespace
