// progress_line.h: the one-line progress display of kptrace's long commands (convert, summary,
// report, diff): "% of bytes read, records/s" redrawn on stderr.
//
// It appears only when stderr is a terminal and only once the work has run longer than
// KP_PROGRESS_DELAY_MS (default 1000 ms), so short runs, pipes and log files never see it; the
// line is erased when the work ends, leaving stderr as it would be without it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kp {

class ProgressLine {
 public:
  // `label` starts the line (e.g. "kptrace summary"); `total_bytes` is what 100 % means.
  // `enabled` false: every call does nothing.
  ProgressLine(std::string label, uint64_t total_bytes, bool enabled = StderrIsTerminal());
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  // Cumulative counts over all inputs. Cheap when nothing is to be drawn.
  void Update(uint64_t bytes_done, uint64_t records_done);
  // Erases the line if it was drawn. Update may be called again afterwards.
  void Finish();

  static bool StderrIsTerminal();
  // Sum of the sizes of the files that exist (others count 0).
  static uint64_t TotalFileBytes(const std::vector<std::string>& paths);

 private:
  std::string label_;
  uint64_t total_bytes_;
  bool enabled_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::chrono::milliseconds delay_;
  bool drawn_ = false;
};

}  // namespace kp
