// log.h: the injector's one log sink. Every line kp prints goes through here: it owns the
// "kp: " prefix, honours KP_LOG, and can also record the line in the trace as a kp.Notice.
//
// KP_LOG decides what reaches stderr: quiet = errors only, info (default) = also warnings and
// info lines, debug = everything. Notices are recorded in the trace whatever KP_LOG says.
// Not for the hot path: each call formats and writes (I/O), like the fprintf it replaces.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include "inject/config/config.h"

namespace kp {

enum class LogSeverity { kDebug, kInfo, kWarning, kError };

// From KP_LOG (config.h); the default before it is read is LogLevel::kInfo.
void SetLogLevel(LogLevel level);
bool LogEnabled(LogSeverity severity);

// Prints "kp: <message>" to stderr when KP_LOG lets `severity` through. A message that already
// starts with "kp: " (one built by a lower layer) gets no second prefix.
void Log(LogSeverity severity, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Receives notices for the trace (set by the tracer once there is an encoder; may be called
// from any thread, so it must post to the encoder's thread).
using NoticeSink =
    std::function<void(LogSeverity severity, std::string_view component, const std::string& text)>;
void SetNoticeSink(NoticeSink sink);

// Records `text` as a Notice of `component` in the trace and prints
// "kp: <component>: <text>[; <consequence>]" per KP_LOG. `consequence` says what kp does next
// ("metrics are off, tracing goes on"); it is for the reader of stderr, the trace has the notice.
void LogNotice(LogSeverity severity, std::string_view component, const std::string& text,
               const char* consequence = nullptr);

// The kp.NoticeSeverity value of a log severity (debug lines are recorded as info).
int NoticeSeverityOf(LogSeverity severity);

// Where lines go (stderr unless a test redirects them).
void SetLogStream(FILE* stream);

}  // namespace kp
