// activity_decoder.h: turns CUPTI activity buffers into the neutral records of records.h and
// hands them to the TraceEncoder. Runs on the encoder thread only (no locks, one owner).
//
// It needs no GPU: cuptiActivityGetNextRecord walks a buffer on a machine without a driver, so
// tests feed it synthetic or captured buffers. What it keeps between buffers is small state that
// CUPTI splits across records: NVTX ranges (START and END markers share an id; start/end ranges
// may close on another thread, so pairing is by id, not per thread), MarkerData merged into its
// marker, and the API-name cache. Anomalies are counted in EncoderStats, never fatal.
//
// Capture window (KP_DELAY, KP_DURATION, KP_CAPTURE_RANGE) filters output here by record time:
// CUPTI's cost remains during the excluded time, only the file gets smaller.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inject/trace/records.h"

namespace kp {

class TraceEncoder;
class MetricsCollector;

class ActivityDecoder {
 public:
  struct Options {
    // Records starting outside [window_start, window_end] (trace clock, ns) are filtered.
    uint64_t window_start = 0;
    uint64_t window_end = std::numeric_limits<uint64_t>::max();
    // KP_CAPTURE_RANGE: the window opens at the first START of an NVTX range with this name
    // (and lasts duration_ns, 0 = to the end). Until then everything is filtered.
    // KP_CAPTURE_RANGE: the window opens at the first START of an NVTX range with this
    // message; "domain::message" also requires that domain ("::message": the default domain).
    std::string start_range;
    uint64_t duration_ns = 0;
  };

  // `collector` may be null (no metrics); it marks kernels the profiler launched itself.
  ActivityDecoder(TraceEncoder* encoder, const MetricsCollector* collector, Options options);
  ~ActivityDecoder();
  ActivityDecoder(const ActivityDecoder&) = delete;
  ActivityDecoder& operator=(const ActivityDecoder&) = delete;

  // Decodes every record of one completed buffer. Returns the number of records seen.
  size_t DecodeBuffer(uint8_t* buffer, size_t valid_size);
  void DecodeRecord(const CUpti_Activity* record);

  // A kernel record, CUPTI's (DecodeKernel) or one kp made (kernel-mode metrics measured the
  // launch with CUPTI's kernel records off for it): counted, kept or dropped by the capture
  // windows and discard intervals, then encoded. On the encoder thread, as DecodeBuffer.
  void AddKernelRecord(const KernelRecord& k);

  // Publishes the number of open NVTX ranges into the encoder stats (call before a Flush).
  void UpdateOpenRangeStat();
  // End of trace: writes still-open ranges with RECORD_FLAG_OPEN, end = last timestamp seen.
  void Finish();

  uint64_t last_timestamp() const { return last_timestamp_; }

  // What has been decoded so far, for the CUPTI detach after the last capture window
  // (cupti_detach.h), which waits until every kernel launch call has its kernel record. Read
  // from any thread.
  struct WorkCounts {
    uint64_t launch_calls = 0;  // successful kernel-launch API calls (not graph launches)
    uint64_t kernels = 0;       // kernel records not launched by a graph
    uint64_t gpu_records = 0;   // kernel, copy and memset records
  };
  WorkCounts work_counts() const {
    return {launch_calls_.load(std::memory_order_acquire), kernels_.load(std::memory_order_acquire),
            gpu_records_.load(std::memory_order_acquire)};
  }

  // A closed capture window (inject/capture): at Finish, a range still open that started inside
  // it ends at the window's end, flagged RECORD_FLAG_CLIPPED (its pop came after tracing stopped).
  void AddCaptureWindow(uint64_t start, uint64_t end) { windows_.push_back({start, end}); }

  // A capture schedule's warm-up (inject/capture): records from `begin` until the matching
  // EndDiscard are filtered like records outside the window.
  void BeginDiscard(uint64_t begin) { discards_.push_back({begin, UINT64_MAX}); }
  void EndDiscard(uint64_t end) {
    if (!discards_.empty()) discards_.back().second = end;
  }

 private:
  struct MarkerExtras {
    uint32_t category = 0, color = 0;
    bool has_color = false;
    NvtxPayloadValue payload;
  };
  struct OpenRange {
    std::string name, domain;
    bool has_domain = false;
    uint64_t start = 0;
    uint32_t thread_id = 0;
    MarkerExtras extras;
  };
  struct PendingMark {
    uint32_t id = 0;
    std::string name, domain;
    bool has_domain = false;
    uint64_t time = 0;
    uint32_t thread_id = 0;
    MarkerExtras extras;
  };

  bool Keep(uint64_t time);
  void SeeTime(uint64_t time) {
    if (time > last_timestamp_) last_timestamp_ = time;
  }
  // What kp knows of an API call, looked up once per cbid: CUPTI's name ("unknown" for a cbid
  // CUPTI does not name) and whether it launches one kernel (LaunchesOneKernelApiName).
  struct CbidInfo {
    const char* name = nullptr;  // nullptr: not looked up yet
    bool launches_one_kernel = false;
  };
  const CbidInfo& Cbid(CUpti_CallbackDomain domain, CUpti_CallbackId cbid);

  void DecodeKernel(const CUpti_ActivityKernel10& r);
  void DecodeMemcpy(const CUpti_ActivityMemcpy6& r);
  void DecodePeerMemcpy(const CUpti_ActivityMemcpyPtoP4& r);
  void DecodeMemset(const CUpti_ActivityMemset4& r);
  void DecodeApi(const CUpti_ActivityAPI& r, CUpti_CallbackDomain domain, uint32_t kp_domain);
  void DecodeMarker(const CUpti_ActivityMarker2& r);
  void DecodeMarkerData(const CUpti_ActivityMarkerData2& r);
  void DecodeName(const CUpti_ActivityName& r);
  void DecodeSync(const CUpti_ActivitySynchronization2& r);
  void DecodeOverhead(const CUpti_ActivityOverhead3& r);
  void DecodeGraphTrace(const CUpti_ActivityGraphTrace2& r);
  void DecodeDevice(const CUpti_ActivityDevice5& r);
  void DecodeContext(const CUpti_ActivityContext3& r);
  void EmitPendingMarks();
  void EmitRange(uint64_t id, const OpenRange& range, uint64_t end, uint32_t end_thread);

  TraceEncoder* encoder_;
  const MetricsCollector* collector_;
  Options options_;
  bool window_open_;  // false until KP_CAPTURE_RANGE's range starts
  // options_.start_range split at "::": the message, and the domain when one was named.
  std::string start_message_, start_domain_;
  bool start_domain_named_ = false;
  bool IsCaptureStart(const char* name, const char* domain) const;
  uint64_t last_timestamp_ = 0;
  std::atomic<uint64_t> launch_calls_{0}, kernels_{0}, gpu_records_{0};  // work_counts()
  std::unordered_map<uint64_t, OpenRange> open_ranges_;
  // END markers seen before their START: with per-thread buffers, a range ended on another
  // thread can arrive first. Paired when the START comes; unmatched at Finish.
  struct EarlyEnd {
    uint64_t time = 0;
    uint32_t thread_id = 0;
  };
  std::unordered_map<uint64_t, EarlyEnd> early_ends_;
  // NVTX markers lost to CUPTI drops leave ENDs that never meet their START and STARTs that
  // never end. Both maps are capped so host memory stays bounded; what is given up is counted
  // (into nvtx_unmatched_ends and nvtx_open_ranges), never silently lost.
  static constexpr size_t kMaxPendingNvtx = 1u << 16;
  uint64_t abandoned_ends_ = 0, abandoned_open_ = 0;
  void CapPendingNvtx();
  // Instantaneous marks wait for their MarkerData record (written right after them) until the
  // end of the buffer.
  std::vector<PendingMark> pending_marks_;
  // Ranges whose END arrived before their START: complete once the START comes, but, like marks,
  // they wait for the START's MarkerData (color, category, payload) until the end of the buffer.
  struct ClosedRange {
    uint64_t id = 0;
    OpenRange range;
    EarlyEnd end;
  };
  std::vector<ClosedRange> pending_closed_;
  std::vector<std::pair<uint64_t, uint64_t>> discards_;  // [begin, end], in time order
  std::vector<std::pair<uint64_t, uint64_t>> windows_;   // closed capture windows
  std::vector<CbidInfo> cbids_[2];                       // [runtime, driver] by cbid
};

}  // namespace kp
