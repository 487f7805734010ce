#include "tools/kptrace/progress_line.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kp {
namespace {

constexpr long kDefaultDelayMs = 1000;

// KP_PROGRESS_DELAY_MS: a whole number of milliseconds >= 0. A bad value is named once and the
// default is used (a progress display must never stop the command).
long DelayMs() {
  static const long delay = [] {
    const char* v = std::getenv("KP_PROGRESS_DELAY_MS");
    if (v == nullptr || *v == '\0') return kDefaultDelayMs;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (end == v || *end != '\0' || n < 0) {
      std::fprintf(stderr,
                   "kptrace: KP_PROGRESS_DELAY_MS='%s' is not accepted (a whole number of "
                   "milliseconds >= 0; default %ld); using the default\n",
                   v, kDefaultDelayMs);
      return kDefaultDelayMs;
    }
    return n;
  }();
  return delay;
}

}  // namespace

ProgressLine::ProgressLine(std::string label, uint64_t total_bytes, bool enabled)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      enabled_(enabled && total_bytes > 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_),
      delay_(enabled_ ? DelayMs() : 0) {}

ProgressLine::~ProgressLine() { Finish(); }

bool ProgressLine::StderrIsTerminal() { return isatty(STDERR_FILENO) != 0; }

uint64_t ProgressLine::TotalFileBytes(const std::vector<std::string>& paths) {
  uint64_t total = 0;
  for (const std::string& p : paths) {
    struct stat st;
    if (stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode))
      total += static_cast<uint64_t>(st.st_size);
  }
  return total;
}

void ProgressLine::Update(uint64_t bytes_done, uint64_t records_done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ < delay_) return;
  // A redraw costs a write(2): at most ten a second.
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double pct = 100.0 * static_cast<double>(std::min(bytes_done, total_bytes_)) /
                     static_cast<double>(total_bytes_);
  const double rate = seconds > 0 ? static_cast<double>(records_done) / seconds : 0;
  std::fprintf(stderr, "\r%s: %5.1f%% of %.1f MiB read, %.2f M records/s\033[K", label_.c_str(),
               pct, static_cast<double>(total_bytes_) / (1024.0 * 1024.0), rate / 1e6);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressLine::Finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace kp
