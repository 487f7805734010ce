#include "inject/metrics/profiler_session.h"

#include <cstdio>

#include "inject/log/log.h"

namespace kp {

Status ProfilerSession::Enable(RangeReplay replay, size_t max_ranges) {
  if (Status enabled = DoEnable(replay, max_ranges); !enabled.ok()) return enabled;
  enabled_ = true;
  Status armed = DoSizeImage();
  if (armed.ok()) armed = DoInitImage();
  if (armed.ok()) armed = DoSetConfig();
  if (!armed.ok()) Disable();
  return armed;
}

Status ProfilerSession::Start() {
  Timer timer(this, SessionCall::kStart);
  if (Status s = DoStart(); !s.ok()) return s;
  started_ = true;
  return Status();
}

StatusOr<bool> ProfilerSession::Stop() {
  started_ = false;
  Timer timer(this, SessionCall::kStop);
  return DoStop();
}

Status ProfilerSession::PushRange(const std::string& name) {
  Timer timer(this, SessionCall::kPush);
  return DoPushRange(name);
}

Status ProfilerSession::PopRange() {
  Timer timer(this, SessionCall::kPop);
  return DoPopRange();
}

StatusOr<std::vector<DecodedRange>> ProfilerSession::Decode(
    const std::function<bool(size_t, const std::string&)>& want, uint64_t* dropped) {
  StatusOr<std::vector<DecodedRange>> decoded = [&] {
    Timer timer(this, SessionCall::kDecode);
    return DoDecode(want, dropped);
  }();
  if (!decoded.ok()) return decoded;
  Timer timer(this, SessionCall::kRearm);
  Status rearmed = DoInitImage();
  if (rearmed.ok()) rearmed = DoSetConfig();
  if (!rearmed.ok()) return rearmed;
  return decoded;
}

Status ProfilerSession::SynchronizeContext() {
  Timer timer(this, SessionCall::kSync);
  return DoSynchronizeContext();
}

Status ProfilerSession::SaveMemory() {
  Timer timer(this, SessionCall::kSave);
  return DoSaveMemory();
}

Status ProfilerSession::RestoreMemory() {
  Timer timer(this, SessionCall::kRestore);
  return DoRestoreMemory();
}

void ProfilerSession::FreeMemory() { DoFreeMemory(); }

Status ProfilerSession::Relaunch(const KernelLaunch& launch) {
  Timer timer(this, SessionCall::kRelaunch);
  return DoRelaunch(launch);
}

void ProfilerSession::Disable() {
  FreeMemory();
  if (!enabled_) return;
  // Failures here change nothing (the session is closed either way): KP_LOG=debug shows them.
  if (started_) {
    if (StatusOr<bool> stopped = Stop(); !stopped.ok())
      Log(LogSeverity::kDebug, "metrics: %s (while disabling the range profiler)",
          stopped.status().message().c_str());
  }
  enabled_ = false;
  if (const Status disabled = DoDisable(); !disabled.ok())
    Log(LogSeverity::kDebug, "metrics: %s (the session is closed anyway)",
        disabled.message().c_str());
}

std::string ProfilerSession::FormatCallTimes() const {
  static constexpr const char* kNames[static_cast<int>(SessionCall::kCount)] = {
      "Start",           "Stop",
      "PushRange",       "PopRange",
      "decode+evaluate", "image re-init+SetConfig",
      "L2 flush",        "context synchronize",
      "memory save",     "memory restore",
      "kernel relaunch"};
  std::string out;
  for (int i = 0; i < static_cast<int>(SessionCall::kCount); ++i) {
    const CallTimes& t = times_[i];
    if (!t.count) continue;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s%s %llux %.3f ms (max %.3f)", out.empty() ? "" : ", ",
                  kNames[i], static_cast<unsigned long long>(t.count),
                  t.total_ms / static_cast<double>(t.count), t.max_ms);
    out += buf;
  }
  return out;
}

}  // namespace kp
