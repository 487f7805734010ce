// kp_trace_expect: checks a kp trace against a GPU test program's `expect` lines.
//
//   kp_trace_expect TRACE EXPECT_FILE
//
// Prints one PASS/FAIL line per check and a total; exits 0 if all pass, 1 if any fails, 2 if
// the arguments or files are unusable.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tests/gpu/trace_expect.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: kp_trace_expect TRACE EXPECT_FILE\n");
    return 2;
  }
  std::ifstream in(argv[2]);
  if (!in) {
    std::fprintf(stderr, "kp_trace_expect: cannot read %s\n", argv[2]);
    return 2;
  }
  std::vector<std::string> parse_errors;
  auto expectations = kp::gputest::ParseExpectations(in, &parse_errors);
  kp::gputest::TraceFacts facts;
  if (const kp::Status loaded = kp::gputest::LoadTraceFacts(argv[1], &facts); !loaded.ok()) {
    std::printf("FAIL open: %s\n", loaded.message().c_str());
    std::printf("trace_expect %s: 0 passed, 1 failed\n", argv[1]);
    return 1;
  }
  int passed = 0, failed = 0;
  for (const auto& e : parse_errors) {
    std::printf("FAIL expect_syntax: %s\n", e.c_str());
    ++failed;
  }
  for (const auto& r : kp::gputest::CheckTrace(facts, expectations)) {
    std::printf("%s %s: %s\n", r.pass ? "PASS" : "FAIL", r.name.c_str(), r.detail.c_str());
    (r.pass ? passed : failed)++;
  }
  std::printf("trace_expect %s: %d passed, %d failed\n", argv[1], passed, failed);
  return failed == 0 ? 0 : 1;
}
