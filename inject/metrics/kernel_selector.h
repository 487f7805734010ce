// kernel_selector.h: which kernel launches kernel mode (KP_METRICS_MODE=kernel) measures, the
// way ncu targets kernels:
//  - KP_METRICS_KERNELS: "regex:RE" (ECMAScript, searched in the mangled and in the demangled
//    name, like `ncu -k regex:RE`) or a plain name, matched exactly against the mangled name,
//    the full demangled name or the demangled function name without return type, namespaces,
//    template arguments and parameters (ncu's default --kernel-name-base function);
//  - KP_METRICS_LAUNCH_SKIP_BEFORE_MATCH: launches of any kernel passed before the filter
//    applies (ncu --launch-skip-before-match);
//  - KP_METRICS_NVTX_INCLUDE: only launches made while a matching NVTX push/pop range is open
//    on the launching thread (ncu --nvtx-include; KP_METRICS_RANGES's glob syntax);
//  - KP_METRICS_LAUNCH_SKIP / KP_METRICS_LAUNCH_COUNT: of the launches that pass, skip N and
//    measure M (0: all), counted over all names (KP_METRICS_LAUNCH_SCOPE=global, ncu's
//    --launch-skip/--launch-count) or for each kernel symbol on its own (per-name).
// Once a global count is reached, done() turns true and stays so.
//
// Cost: the first launch of a symbol demangles and matches its name once; later launches of
// it find the result by the symbol pointer CUPTI passes (checked with one strcmp). Select
// takes one mutex that is never held across a call out of this file.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "inject/config/config.h"

namespace kp {

// The demangled function name without return type, namespaces, template arguments and
// parameters ("void at::native::foo<4>(int)" -> "foo"); `demangled` itself when it has none.
std::string KernelBaseName(std::string_view demangled);
// The demangled form of `symbol`, or `symbol` itself when it is not a mangled C++ name.
std::string DemangleKernelName(const char* symbol);

class KernelSelector {
 public:
  explicit KernelSelector(const Config& config);  // config already validated (config.cc)

  // Whether any targeting variable is set; when false every launch is measured.
  bool active() const { return active_; }
  bool wants_nvtx() const { return wants_nvtx_; }
  // Whether a global launch count has been reached: no launch is selected any more.
  bool done() const { return done_.load(std::memory_order_acquire); }

  // One top-level kernel launch of `symbol` (may be null or empty); `in_nvtx`: a
  // KP_METRICS_NVTX_INCLUDE range is open on the launching thread. True: measure it.
  bool Select(const char* symbol, bool in_nvtx);

  uint64_t launches_seen() const;
  uint64_t launches_matched() const;  // passed the name and NVTX filters
  uint64_t launches_selected() const;
  // The filters, as the user wrote them, for notices.
  std::string Describe() const;

 private:
  struct NameState {
    bool matches = false;
    uint64_t matched = 0, measured = 0;  // per-name scope
  };
  struct PointerEntry {
    std::string symbol;
    NameState* state = nullptr;
  };
  NameState* Lookup(const char* symbol);  // mu_ held
  bool NameMatches(const std::string& symbol) const;

  const bool active_, wants_nvtx_, per_name_;
  const uint64_t skip_before_match_, skip_, count_;
  const std::string filter_;  // "" or the KP_METRICS_KERNELS value
  bool is_regex_ = false;
  std::string exact_;
  std::unique_ptr<std::regex> regex_;
  std::atomic<bool> done_{false};

  mutable std::mutex mu_;
  uint64_t seen_ = 0, matched_ = 0, measured_ = 0;
  std::unordered_map<std::string, NameState> names_;
  std::unordered_map<const char*, PointerEntry> by_pointer_;
};

}  // namespace kp
