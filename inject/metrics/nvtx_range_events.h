// nvtx_range_events.h: turns CUPTI's NVTX callbacks (CUPTI_CB_DOMAIN_NVTX) into the range
// events metric collection needs: a range pushed (domain handle, message) or popped (domain
// handle). Domain names (nvtxDomainCreateA/W) and registered strings
// (nvtxDomainRegisterStringA) are remembered here, so a push in a named domain or with a
// registered message resolves to text. Wide strings are narrowed to ASCII ('?' for the rest).
//
// Thread safety: Decode and DomainName may run on any thread concurrently (one mutex guards the
// two tables; it is never held across a call out of this file).
#pragma once

#include <cupti.h>

#include <mutex>
#include <string>
#include <unordered_map>

namespace kp {

struct NvtxRangeEvent {
  enum Kind { kNone, kPush, kPop } kind = kNone;
  const void* domain = nullptr;  // nullptr: the default domain
  std::string message;           // pushes only
};

class NvtxRangeEvents {
 public:
  // Domain creation and string registration are recorded and give kNone.
  NvtxRangeEvent Decode(CUpti_CallbackId cbid, const CUpti_NvtxData* data);
  // "" for the default domain and for domains created before kp subscribed.
  std::string DomainName(const void* domain);

 private:
  std::mutex mu_;
  std::unordered_map<const void*, std::string> domain_names_;
  std::unordered_map<const void*, std::string> registered_strings_;
};

}  // namespace kp
