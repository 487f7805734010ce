// huge_page_heap_test.cc: tools/kptrace/huge_page_heap.h. The THP mode is read from its text;
// BackHeapWithHugePages does what this machine's mode allows, and under "madvise" a block that
// malloc hands out afterwards lies in a mapping the kernel has marked for huge pages ("hg").
#include "tools/kptrace/huge_page_heap.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace {

TEST(HugePageHeap, ModeIsTheBracketedWord) {
  EXPECT_EQ(kp::TransparentHugePageMode("always [madvise] never\n"), "madvise");
  EXPECT_EQ(kp::TransparentHugePageMode("[always] madvise never\n"), "always");
  EXPECT_EQ(kp::TransparentHugePageMode("always madvise [never]\n"), "never");
  EXPECT_EQ(kp::TransparentHugePageMode(""), "");
  EXPECT_EQ(kp::TransparentHugePageMode("always madvise never"), "");
}

// The VmFlags line of the mapping holding `address`, from /proc/self/smaps ("" if none).
std::string VmFlagsOf(uintptr_t address) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= address && address < hi;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

TEST(HugePageHeap, FollowsTheMachinesMode) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "malloc is the sanitizer's here: glibc's heap and mallopt are not in use";
#endif
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream text;
  text << in.rdbuf();
  const std::string mode = kp::TransparentHugePageMode(text.str());
  const kp::HugePageHeap got = kp::BackHeapWithHugePages();
  if (mode == "always") {
    EXPECT_EQ(got, kp::HugePageHeap::kAlways);
  } else if (mode != "madvise") {
    EXPECT_EQ(got, kp::HugePageHeap::kNotOffered) << "mode '" << mode << "'";
  } else {
    ASSERT_EQ(got, kp::HugePageHeap::kAdvised);
    // A block below the 64 MiB limit comes from the reserved heap, marked for huge pages.
    void* block = std::malloc(size_t{16} << 20);
    ASSERT_NE(block, nullptr);
    std::memset(block, 1, size_t{16} << 20);
    const std::string flags = VmFlagsOf(reinterpret_cast<uintptr_t>(block) + (size_t{8} << 20));
    std::free(block);
    EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  }
}

}  // namespace
