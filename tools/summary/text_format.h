// text_format.h: how kptrace's reading commands (summary, diff, report) write numbers and names
// for people: printf into a std::string, durations with a unit, shortened C++ kernel names.
#pragma once

#include <cstddef>
#include <string>

namespace kp {

std::string StringPrintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// "950 ns", "12.35 us", "1.234 ms", "2.000 s" (sign kept).
std::string FormatDuration(double ns);
// Demangled C++ names are long: drops "(anonymous namespace)::", the return type and the
// parameter list, then elides the middle so the kernel's own name (head) and the template
// arguments that tell instances apart (tail) both stay visible within `width` characters.
std::string ShortKernelName(const std::string& name, size_t width);

}  // namespace kp
