// The injector's log sink (inject/log/log.h): KP_LOG filtering, one "kp: " prefix, notices
// recorded whatever KP_LOG says, and the KP_OUTPUT error printed once, with its advice once.
#include "inject/log/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "inject/trace/chunk_writer.h"
#include "proto/kptrace_schema.h"

namespace kp {
namespace {

// Captures what the sink prints, and restores the defaults afterwards.
class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = std::tmpfile();
    ASSERT_NE(file_, nullptr);
    SetLogStream(file_);
  }
  void TearDown() override {
    SetLogStream(nullptr);
    SetLogLevel(LogLevel::kInfo);
    SetNoticeSink(nullptr);
    std::fclose(file_);
  }
  std::string Printed() {
    std::fflush(file_);
    std::rewind(file_);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) out.append(buf, n);
    std::rewind(file_);
    return out;
  }
  void LogEachSeverity() {
    Log(LogSeverity::kDebug, "debug %d", 1);
    Log(LogSeverity::kInfo, "info %d", 2);
    Log(LogSeverity::kWarning, "warning %d", 3);
    Log(LogSeverity::kError, "error %d", 4);
  }
  FILE* file_ = nullptr;
};

TEST_F(LogTest, KpLogDecidesWhatIsPrinted) {
  SetLogLevel(LogLevel::kQuiet);
  LogEachSeverity();
  EXPECT_EQ(Printed(), "kp: error 4\n");

  ASSERT_EQ(ftruncate(fileno(file_), 0), 0);
  SetLogLevel(LogLevel::kInfo);
  LogEachSeverity();
  EXPECT_EQ(Printed(), "kp: info 2\nkp: warning 3\nkp: error 4\n");

  ASSERT_EQ(ftruncate(fileno(file_), 0), 0);
  SetLogLevel(LogLevel::kDebug);
  LogEachSeverity();
  EXPECT_EQ(Printed(), "kp: debug 1\nkp: info 2\nkp: warning 3\nkp: error 4\n");
}

TEST_F(LogTest, LongLinesArePrintedWhole) {
  const std::string long_text(5000, 'x');
  Log(LogSeverity::kError, "%s!", long_text.c_str());
  EXPECT_EQ(Printed(), "kp: " + long_text + "!\n");
}

TEST_F(LogTest, UnwritableOutputIsOneLineWithOnePrefixAndTheAdviceOnce) {
  const std::string path = "/nonexistent-kp-dir/trace.kptrace";
  const StatusOr<std::unique_ptr<FileChunkWriter>> opened = FileChunkWriter::Open(path, 0);
  ASSERT_FALSE(opened.ok());
  Log(LogSeverity::kError, "%s", opened.status().message().c_str());  // as the tracer reports it
  const std::string out = Printed();
  auto count = [&out](const std::string& part) {
    size_t n = 0;
    for (size_t at = out.find(part); at != std::string::npos; at = out.find(part, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("kp: "), 1u) << out;
  EXPECT_EQ(count(path), 1u) << out;
  EXPECT_EQ(count("KP_OUTPUT"), 1u) << out;
  EXPECT_EQ(count("\n"), 1u) << out;
  EXPECT_EQ(out.rfind("kp: cannot create trace " + path + ": ", 0), 0u) << out;
}

TEST_F(LogTest, NoticesAreRecordedWhateverKpLogSaysAndPrintedPerKpLog) {
  struct Recorded {
    LogSeverity severity;
    std::string component, text;
  };
  std::vector<Recorded> recorded;
  SetNoticeSink([&recorded](LogSeverity s, std::string_view component, const std::string& text) {
    recorded.push_back({s, std::string(component), text});
  });
  SetLogLevel(LogLevel::kQuiet);
  LogNotice(LogSeverity::kWarning, "nvtx", "2 ranges left open");
  LogNotice(LogSeverity::kError, "metrics", "chip not supported", "metrics are off");
  EXPECT_EQ(Printed(), "kp: metrics: chip not supported; metrics are off\n");
  ASSERT_EQ(recorded.size(), 2u);
  EXPECT_EQ(recorded[0].severity, LogSeverity::kWarning);
  EXPECT_EQ(recorded[0].component, "nvtx");
  EXPECT_EQ(recorded[0].text, "2 ranges left open");
  EXPECT_EQ(recorded[1].text, "chip not supported");  // the consequence is for stderr only

  EXPECT_EQ(NoticeSeverityOf(LogSeverity::kError),
            static_cast<int>(schema::NoticeSeverity::kError));
  EXPECT_EQ(NoticeSeverityOf(LogSeverity::kWarning),
            static_cast<int>(schema::NoticeSeverity::kWarning));
  EXPECT_EQ(NoticeSeverityOf(LogSeverity::kDebug), static_cast<int>(schema::NoticeSeverity::kInfo));
}

}  // namespace
}  // namespace kp
