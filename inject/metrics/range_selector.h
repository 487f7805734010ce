// range_selector.h: which NVTX ranges get hardware metrics (KP_METRICS_RANGES).
//
// Each pattern is a glob over the range message ('*' any run, '?' one character), optionally
// prefixed by "domain::" (a glob over the NVTX domain name; "::glob" means the default domain
// only). A pattern without "::" matches its message in any domain. An empty pattern list
// selects every range. Pure string logic, no CUDA: unit-tested in CI.
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

 private:
  struct Pattern {
    bool any_domain = true;
    std::string domain, message;
  };
  std::vector<Pattern> patterns_;
};

}  // namespace kp
