#include "tools/summary/text_format.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace kp {

std::string StringPrintf(const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

std::string FormatDuration(double ns) {
  const double a = std::fabs(ns);
  if (a >= 1e9) return StringPrintf("%.3f s", ns / 1e9);
  if (a >= 1e6) return StringPrintf("%.3f ms", ns / 1e6);
  if (a >= 1e3) return StringPrintf("%.2f us", ns / 1e3);
  return StringPrintf("%.0f ns", ns);
}

std::string ShortKernelName(const std::string& name, size_t width) {
  static const std::string kAnonymous = "(anonymous namespace)::";
  std::string s;
  s.reserve(name.size());
  for (size_t i = 0; i < name.size();) {
    if (name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size();
    } else {
      s += name[i++];
    }
  }
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<') ++depth;
    if (c == '>') --depth;
    if (c == '(' && depth == 0 && i > 0) {
      s.resize(i);
      break;
    }
  }
  if (s.rfind("void ", 0) == 0) s.erase(0, 5);
  if (s.size() > width && width > 10) {
    const size_t tail = width / 3;
    s = s.substr(0, width - 3 - tail) + "..." + s.substr(s.size() - tail);
  }
  return s;
}

}  // namespace kp
