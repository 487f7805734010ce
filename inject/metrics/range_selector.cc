#include "inject/metrics/range_selector.h"

#include <cctype>

namespace kp {

bool GlobMatch(std::string_view pattern, std::string_view text) {
  // Iterative matcher with one backtrack point: linear in practice, no recursion.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

RangeSelector::RangeSelector(const std::vector<std::string>& patterns) {
  for (const auto& raw : patterns) {
    Pattern pat;
    size_t sep = raw.find("::");
    if (sep == std::string::npos) {
      pat.message = raw;
    } else {
      pat.any_domain = false;
      pat.domain = raw.substr(0, sep);
      pat.message = raw.substr(sep + 2);
    }
    patterns_.push_back(std::move(pat));
  }
}

bool RangeSelector::IsLibraryDomain(std::string_view domain) {
  static constexpr std::string_view kLibraries[] = {
      "NCCL",     "RCCL",    "cuBLAS",  "cuDNN",  "cuFFT", "cuSPARSE", "cuSOLVER", "cuRAND",
      "cuTENSOR", "CUTLASS", "NVSHMEM", "nvJPEG", "NPP",   "TensorRT", "DALI",     "cuDF"};
  for (std::string_view lib : kLibraries) {
    if (domain.size() < lib.size()) continue;
    bool same = true;
    for (size_t i = 0; i < lib.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(domain[i])) ==
             std::tolower(static_cast<unsigned char>(lib[i]));
    if (same) return true;
  }
  return false;
}

bool RangeSelector::Matches(std::string_view domain, std::string_view message) const {
  if (patterns_.empty()) return !IsLibraryDomain(domain);
  for (const auto& pat : patterns_) {
    if (!pat.any_domain && !GlobMatch(pat.domain, domain)) continue;
    if (GlobMatch(pat.message, message)) return true;
  }
  return false;
}

}  // namespace kp
