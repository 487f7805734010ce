// range_selector.h: which NVTX ranges get hardware metrics (KP_METRICS_RANGES).
//
// Each pattern is a glob over the range message ('*' any run, '?' one character), optionally
// prefixed by "domain::" (a glob over the NVTX domain name; "::glob" means the default domain
// only). A pattern without "::" matches its message in any domain. An empty pattern list (the
// default) selects every range except those of library domains (IsLibraryDomain: NCCL, cuBLAS,
// ...), which a pattern must name to be measured. Pure string logic, no CUDA: unit-tested in CI.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kp {

bool GlobMatch(std::string_view pattern, std::string_view text);

class RangeSelector {
 public:
  explicit RangeSelector(const std::vector<std::string>& patterns);
  // `domain` is "" for the default domain.
  bool Matches(std::string_view domain, std::string_view message) const;
  bool selects_every_range() const { return patterns_.empty(); }

  // The NVTX domains of CUDA libraries and frameworks' communication layers (NCCL, cuBLAS,
  // cuDNN, ...), compared case-insensitively by prefix: their ranges are the library's inner
  // steps, not the program's units of work.
  static bool IsLibraryDomain(std::string_view domain);

 private:
  struct Pattern {
    bool any_domain = true;
    std::string domain, message;
  };
  std::vector<Pattern> patterns_;
};

}  // namespace kp
