#include "inject/log/log.h"

#include <atomic>
#include <cstdarg>
#include <cstring>
#include <mutex>

#include "proto/kptrace_schema.h"

namespace kp {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
std::atomic<FILE*> g_stream{nullptr};  // nullptr = stderr
std::mutex g_sink_mutex;               // never held while a CUDA call runs
NoticeSink g_sink;

constexpr char kPrefix[] = "kp: ";
constexpr size_t kPrefixLen = sizeof(kPrefix) - 1;

void Write(const char* text) {
  if (std::strncmp(text, kPrefix, kPrefixLen) == 0) text += kPrefixLen;
  FILE* out = g_stream.load();
  // One fputs per line, so lines from several threads do not interleave mid-line.
  std::string line = std::string(kPrefix) + text + "\n";
  std::fputs(line.c_str(), out != nullptr ? out : stderr);
}

}  // namespace

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogSeverity severity) {
  switch (static_cast<LogLevel>(g_level.load())) {
    case LogLevel::kQuiet:
      return severity == LogSeverity::kError;
    case LogLevel::kInfo:
      return severity != LogSeverity::kDebug;
    case LogLevel::kDebug:
      return true;
  }
  return true;
}

void Log(LogSeverity severity, const char* format, ...) {
  if (!LogEnabled(severity)) return;
  char buf[1024];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n < 0) return;
  if (static_cast<size_t>(n) < sizeof buf) {
    Write(buf);
    return;
  }
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(args, format);
  std::vsnprintf(big.data(), big.size(), format, args);
  va_end(args);
  big.resize(static_cast<size_t>(n));
  Write(big.c_str());
}

void SetNoticeSink(NoticeSink sink) {
  std::lock_guard<std::mutex> lock(g_sink_mutex);
  g_sink = std::move(sink);
}

void LogNotice(LogSeverity severity, std::string_view component, const std::string& text,
               const char* consequence) {
  {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    if (g_sink) g_sink(severity, component, text);
  }
  if (!LogEnabled(severity)) return;
  std::string line(component);
  line += ": " + text;
  if (consequence != nullptr) line += std::string("; ") + consequence;
  Write(line.c_str());
}

int NoticeSeverityOf(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kError:
      return schema::NoticeSeverity::kError;
    case LogSeverity::kWarning:
      return schema::NoticeSeverity::kWarning;
    case LogSeverity::kDebug:
    case LogSeverity::kInfo:
      break;
  }
  return schema::NoticeSeverity::kInfo;
}

void SetLogStream(FILE* stream) { g_stream.store(stream); }

}  // namespace kp
