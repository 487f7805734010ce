#include "inject/metrics/nvtx_range_events.h"

#include <generated_nvtx_meta.h>

namespace kp {
namespace {

// generated_nvtx_meta.h has no struct for nvtxDomainCreateW; its one argument is the name.
struct DomainCreateWParams {
  const wchar_t* name;
};

std::string Narrow(const wchar_t* w) {
  std::string s;
  if (!w) return s;
  for (; *w; ++w) s.push_back(*w < 128 ? static_cast<char>(*w) : '?');
  return s;
}

}  // namespace

std::string NvtxRangeEvents::DomainName(const void* domain) {
  if (!domain) return "";
  std::lock_guard<std::mutex> lock(mu_);
  auto it = domain_names_.find(domain);
  return it == domain_names_.end() ? std::string() : it->second;
}

NvtxRangeEvent NvtxRangeEvents::Decode(CUpti_CallbackId cbid, const CUpti_NvtxData* data) {
  NvtxRangeEvent ev;
  if (!data) return ev;
  const void* params = data->functionParams;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxDomainCreateA:
    case CUPTI_CBID_NVTX_nvtxDomainCreateW: {
      if (!params || !data->functionReturnValue) return ev;
      auto handle = *static_cast<const nvtxDomainHandle_t*>(data->functionReturnValue);
      std::string name;
      if (cbid == CUPTI_CBID_NVTX_nvtxDomainCreateA) {
        const char* n = static_cast<const nvtxDomainCreateA_params*>(params)->name;
        name = n ? n : "";
      } else {
        name = Narrow(static_cast<const DomainCreateWParams*>(params)->name);
      }
      std::lock_guard<std::mutex> lock(mu_);
      domain_names_[handle] = std::move(name);
      return ev;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRegisterStringA: {
      if (!params || !data->functionReturnValue) return ev;
      auto handle = *static_cast<const nvtxStringHandle_t*>(data->functionReturnValue);
      const char* s = static_cast<const nvtxDomainRegisterStringA_params*>(params)->string;
      std::lock_guard<std::mutex> lock(mu_);
      registered_strings_[handle] = s ? s : "";
      return ev;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushA: {
      const char* m = params ? static_cast<const nvtxRangePushA_params*>(params)->message : nullptr;
      ev.kind = NvtxRangeEvent::kPush;
      ev.message = m ? m : "";
      return ev;
    }
    case CUPTI_CBID_NVTX_nvtxRangePushW:
      ev.kind = NvtxRangeEvent::kPush;
      ev.message =
          Narrow(params ? static_cast<const nvtxRangePushW_params*>(params)->message : nullptr);
      return ev;
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx: {
      if (!params) return ev;
      const nvtxEventAttributes_t* attr = nullptr;
      if (cbid == CUPTI_CBID_NVTX_nvtxRangePushEx) {
        attr = static_cast<const nvtxRangePushEx_params*>(params)->eventAttrib;
      } else {
        auto* dp = static_cast<const nvtxDomainRangePushEx_params*>(params);
        ev.domain = dp->domain;
        attr = dp->core.eventAttrib;
      }
      ev.kind = NvtxRangeEvent::kPush;
      if (!attr) return ev;
      switch (attr->messageType) {
        case NVTX_MESSAGE_TYPE_ASCII:
          ev.message = attr->message.ascii ? attr->message.ascii : "";
          break;
        case NVTX_MESSAGE_TYPE_UNICODE:
          ev.message = Narrow(attr->message.unicode);
          break;
        case NVTX_MESSAGE_TYPE_REGISTERED: {
          std::lock_guard<std::mutex> lock(mu_);
          auto it = registered_strings_.find(attr->message.registered);
          if (it != registered_strings_.end()) ev.message = it->second;
          break;
        }
        default:
          break;
      }
      return ev;
    }
    case CUPTI_CBID_NVTX_nvtxRangePop:
      ev.kind = NvtxRangeEvent::kPop;
      return ev;
    case CUPTI_CBID_NVTX_nvtxDomainRangePop:
      ev.kind = NvtxRangeEvent::kPop;
      ev.domain = params ? static_cast<const nvtxDomainRangePop_params*>(params)->domain : nullptr;
      return ev;
    default:
      return ev;
  }
}

}  // namespace kp
