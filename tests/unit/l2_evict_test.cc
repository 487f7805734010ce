// The driver's L2 flush (inject/metrics/l2_evict.h) where there is no driver to ask: each failure
// is one message naming the step, nothing stays open, and Evict refuses until Open succeeded.
// The flush itself runs on the GPU (tests/gpu/run_metrics_tests.sh, the cache section).
#include "inject/metrics/l2_evict.h"

#include <dirent.h>
#include <gtest/gtest.h>

namespace kp {
namespace {

// The process's open file descriptors.
int OpenFds() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

TEST(DriverL2Evict, AMissingControlNodeIsNamed) {
  DriverL2Evict e;
  const Status s = e.Open(0, 0x1b, 0, "/nonexistent/nvidiactl");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "driver L2 flush: opening /nonexistent/nvidiactl: No such file or directory");
  EXPECT_FALSE(e.ready());
  EXPECT_EQ(e.Evict().message(), "driver L2 flush: not open");
}

TEST(DriverL2Evict, AFileThatIsNotTheDriverRefusesTheClient) {
  DriverL2Evict e;
  const int fds = OpenFds();
  const Status s = e.Open(0, 0x1b, 0, "/dev/null");
  EXPECT_EQ(OpenFds(), fds);  // the file it opened is closed again
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "driver L2 flush: allocating a client: Inappropriate ioctl for device");
  EXPECT_FALSE(e.ready());
  e.Close();  // idempotent after a failed open
  EXPECT_EQ(e.Evict().message(), "driver L2 flush: not open");
}

}  // namespace
}  // namespace kp
