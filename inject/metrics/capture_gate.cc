#include "inject/metrics/capture_gate.h"

#include "inject/metrics/metrics_collector.h"

namespace kp {
namespace {
// Stream-capture calls in progress on this thread (a runtime call nests a driver one).
thread_local int t_capture_call_depth = 0;
}  // namespace

StreamCaptureGate::Event StreamCaptureGate::OnCapture(CUpti_CallbackDomain domain,
                                                      CUpti_CallbackId cbid,
                                                      const CUpti_CallbackData* data) {
  if (!data) return Event::kNone;
  const bool begin = MetricsCollector::IsCaptureBegin(domain, cbid);
  if (data->callbackSite == CUPTI_API_ENTER) {
    if (t_capture_call_depth++ != 0 || !begin) return Event::kNone;  // the outermost call only
    return Event::kBeginning;
  }
  if (t_capture_call_depth > 0) --t_capture_call_depth;
  if (t_capture_call_depth != 0) return Event::kNone;
  int status = data->functionReturnValue ? *static_cast<const int*>(data->functionReturnValue) : 0;
  bool ended = begin ? status != 0 : (status == 0 || status == 901 || status == 904);
  if (!ended) return Event::kNone;
  int n = active_.load();
  while (n > 0 && !active_.compare_exchange_weak(n, n - 1)) {
  }
  return Event::kEnded;
}

}  // namespace kp
