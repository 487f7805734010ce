#include "inject/metrics/kernel_selector.h"

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

namespace kp {

std::string DemangleKernelName(const char* symbol) {
  if (!symbol || !*symbol) return "";
  int status = 0;
  char* out = abi::__cxa_demangle(symbol, nullptr, nullptr, &status);
  if (status != 0 || !out) {
    std::free(out);
    return symbol;
  }
  std::string s(out);
  std::free(out);
  return s;
}

std::string KernelBaseName(std::string_view demangled) {
  // "(anonymous namespace)" is a scope, not a parameter list.
  std::string text(demangled);
  constexpr std::string_view kAnonymous = "(anonymous namespace)";
  for (size_t at = text.find(kAnonymous); at != std::string::npos; at = text.find(kAnonymous))
    text.replace(at, kAnonymous.size(), "{anonymous}");
  std::string_view d = text;
  // The parameter list is the first '(' outside template arguments and braces ("{lambda(int)#1}").
  int depth = 0;
  size_t end = d.size();
  for (size_t i = 0; i < d.size(); ++i) {
    char ch = d[i];
    if (ch == '<' || ch == '{') {
      ++depth;
    } else if ((ch == '>' || ch == '}') && depth > 0) {
      --depth;
    } else if (ch == '(' && depth == 0 && i > 0) {
      end = i;
      break;
    }
  }
  // Keep the outermost-level text of d[0, end): drop template arguments, then take what
  // follows the last "::" and the last space (the return type).
  std::string flat;
  depth = 0;
  for (size_t i = 0; i < end; ++i) {
    char ch = d[i];
    if (ch == '<') {
      ++depth;
      continue;
    }
    if (ch == '>' && depth > 0) {
      --depth;
      continue;
    }
    if (depth == 0) flat.push_back(ch);
  }
  size_t start = 0;
  for (size_t i = 0; i < flat.size(); ++i) {
    if (flat[i] == ' ') start = i + 1;
    if (flat[i] == ':' && i + 1 < flat.size() && flat[i + 1] == ':') start = i + 2;
  }
  std::string base = flat.substr(start);
  return base.empty() ? std::string(demangled) : base;
}

KernelSelector::KernelSelector(const Config& c)
    : active_(!c.metrics_kernels.empty() || !c.metrics_nvtx_include.empty() ||
              c.metrics_launch_skip_before_match > 0 || c.metrics_launch_skip > 0 ||
              c.metrics_launch_count > 0),
      wants_nvtx_(!c.metrics_nvtx_include.empty()),
      per_name_(c.metrics_launch_per_name),
      skip_before_match_(c.metrics_launch_skip_before_match),
      skip_(c.metrics_launch_skip),
      count_(c.metrics_launch_count),
      filter_(c.metrics_kernels) {
  constexpr std::string_view kRegex = "regex:";
  if (filter_.compare(0, kRegex.size(), kRegex) == 0) {
    is_regex_ = true;
    try {
      regex_ = std::make_unique<std::regex>(filter_.substr(kRegex.size()), std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      // Validated by config.cc; an expression that still fails matches nothing.
      regex_.reset();
    }
  } else {
    exact_ = filter_;
  }
}

bool KernelSelector::NameMatches(const std::string& symbol) const {
  if (filter_.empty()) return true;
  std::string demangled = DemangleKernelName(symbol.c_str());
  if (is_regex_) {
    if (!regex_) return false;
    return std::regex_search(symbol, *regex_) || std::regex_search(demangled, *regex_);
  }
  return exact_ == symbol || exact_ == demangled || exact_ == KernelBaseName(demangled);
}

KernelSelector::NameState* KernelSelector::Lookup(const char* symbol) {
  if (!symbol) symbol = "";
  auto it = by_pointer_.find(symbol);
  // CUPTI passes the same pointer for every launch of a function; a pointer reused for
  // another name (a module unloaded and another loaded) fails the strcmp and is looked up anew.
  if (it != by_pointer_.end() && std::strcmp(it->second.symbol.c_str(), symbol) == 0)
    return it->second.state;
  std::string name(symbol);
  auto found = names_.find(name);
  if (found == names_.end()) {
    NameState state;
    state.matches = NameMatches(name);
    found = names_.emplace(name, state).first;
  }
  PointerEntry& entry = by_pointer_[symbol];
  entry.symbol = name;
  entry.state = &found->second;
  return entry.state;
}

bool KernelSelector::Select(const char* symbol, bool in_nvtx) {
  if (!active_) return true;
  if (done()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  ++seen_;
  if (seen_ <= skip_before_match_) return false;
  NameState* n = Lookup(symbol);
  if (!n->matches) return false;
  if (wants_nvtx_ && !in_nvtx) return false;
  ++matched_;
  uint64_t& matched = per_name_ ? n->matched : matched_;
  uint64_t& measured = per_name_ ? n->measured : measured_;
  if (per_name_) ++n->matched;
  if (matched <= skip_) return false;
  if (count_ > 0 && measured >= count_) return false;
  ++measured;
  if (per_name_) ++measured_;
  if (!per_name_ && count_ > 0 && measured_ >= count_) done_.store(true, std::memory_order_release);
  return true;
}

uint64_t KernelSelector::launches_seen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_;
}
uint64_t KernelSelector::launches_matched() const {
  std::lock_guard<std::mutex> lock(mu_);
  return matched_;
}
uint64_t KernelSelector::launches_selected() const {
  std::lock_guard<std::mutex> lock(mu_);
  return measured_;
}

std::string KernelSelector::Describe() const {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (!filter_.empty()) add("KP_METRICS_KERNELS=" + filter_);
  if (wants_nvtx_) add("KP_METRICS_NVTX_INCLUDE");
  if (skip_before_match_)
    add("KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH=" + std::to_string(skip_before_match_));
  if (skip_) add("KP_METRICS_LAUNCH_SKIP=" + std::to_string(skip_));
  if (count_) add("KP_METRICS_LAUNCH_COUNT=" + std::to_string(count_));
  if (per_name_) add("KP_METRICS_LAUNCH_SCOPE=per-name");
  return s;
}

}  // namespace kp
