#include "inject/cupti/activity_decoder.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "inject/cupti/api_selection.h"
#include "inject/metrics/metrics_collector.h"
#include "inject/trace/trace_encoder.h"

namespace kp {
namespace {

// kp.RecordFlag and kp.ApiDomain values, generated from proto/kptrace.proto.
using RecordFlag = schema::RecordFlag;
using ApiDomain = schema::ApiDomain;

// Copy kinds, memory kinds and synchronization types go into the trace as CUPTI gives them:
// the schema's values must stay CUPTI's.
constexpr bool SameValue(uint32_t cupti, uint32_t schema_value) { return cupti == schema_value; }
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, schema::CopyKind::kHtod));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, schema::CopyKind::kDtoh));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_HTOA, schema::CopyKind::kHtoa));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_ATOH, schema::CopyKind::kAtoh));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_ATOA, schema::CopyKind::kAtoa));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_ATOD, schema::CopyKind::kAtod));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_DTOA, schema::CopyKind::kDtoa));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, schema::CopyKind::kDtod));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_HTOH, schema::CopyKind::kHtoh));
static_assert(SameValue(CUPTI_ACTIVITY_MEMCPY_KIND_PTOP, schema::CopyKind::kPtop));
static_assert(SameValue(CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE, schema::MemoryKind::kPageable));
static_assert(SameValue(CUPTI_ACTIVITY_MEMORY_KIND_PINNED, schema::MemoryKind::kPinned));
static_assert(SameValue(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, schema::MemoryKind::kDevice));
static_assert(SameValue(CUPTI_ACTIVITY_MEMORY_KIND_ARRAY, schema::MemoryKind::kArray));
static_assert(SameValue(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED, schema::MemoryKind::kManaged));
static_assert(SameValue(CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC,
                        schema::MemoryKind::kDeviceStatic));
static_assert(SameValue(CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC,
                        schema::MemoryKind::kManagedStatic));
static_assert(SameValue(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
                        schema::SyncType::kEventSynchronize));
static_assert(SameValue(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT,
                        schema::SyncType::kStreamWaitEvent));
static_assert(SameValue(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
                        schema::SyncType::kStreamSynchronize));
static_assert(SameValue(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
                        schema::SyncType::kContextSynchronize));

const char* OverheadName(CUpti_ActivityOverheadKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
      return "DRIVER_COMPILER";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
      return "CUPTI_BUFFER_FLUSH";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
      return "CUPTI_INSTRUMENTATION";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
      return "CUPTI_RESOURCE";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
      return "RUNTIME_TRIGGERED_MODULE_LOADING";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
      return "LAZY_FUNCTION_LOADING";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
      return "COMMAND_BUFFER_FULL";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
      return "ACTIVITY_BUFFER_REQUEST";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
      return "UVM_ACTIVITY_INIT";
    default:
      return "UNKNOWN";
  }
}

uint32_t ToU32(int32_t v) { return v < 0 ? 0 : static_cast<uint32_t>(v); }

uint32_t ThreadOf(CUpti_ActivityObjectKind kind, const CUpti_ActivityObjectKindId& id) {
  return kind == CUPTI_ACTIVITY_OBJECT_THREAD || kind == CUPTI_ACTIVITY_OBJECT_PROCESS
             ? id.pt.threadId
             : 0;
}

}  // namespace

ActivityDecoder::ActivityDecoder(TraceEncoder* encoder, const MetricsCollector* collector,
                                 Options options)
    : encoder_(encoder),
      collector_(collector),
      options_(std::move(options)),
      window_open_(options_.start_range.empty()) {
  const size_t sep = options_.start_range.find("::");
  start_domain_named_ = sep != std::string::npos;
  start_message_ =
      start_domain_named_ ? options_.start_range.substr(sep + 2) : options_.start_range;
  if (start_domain_named_) start_domain_ = options_.start_range.substr(0, sep);
}

bool ActivityDecoder::IsCaptureStart(const char* name, const char* domain) const {
  if (name == nullptr || start_message_ != name) return false;
  if (!start_domain_named_) return true;
  return start_domain_.empty() ? domain == nullptr : domain != nullptr && start_domain_ == domain;
}

ActivityDecoder::~ActivityDecoder() = default;

size_t ActivityDecoder::DecodeBuffer(uint8_t* buffer, size_t valid_size) {
  size_t count = 0;
  if (buffer == nullptr || valid_size == 0) return 0;
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) {
    DecodeRecord(record);
    ++count;
  }
  EmitPendingMarks();
  CapPendingNvtx();
  return count;
}

bool ActivityDecoder::Keep(uint64_t time) {
  bool discarded = false;
  for (auto it = discards_.rbegin(); it != discards_.rend() && it->second >= time; ++it) {
    if (time >= it->first) {
      discarded = true;
      break;
    }
  }
  if (!discarded && window_open_ && time >= options_.window_start && time <= options_.window_end) {
    return true;
  }
  ++encoder_->stats().records_filtered;
  return false;
}

const ActivityDecoder::CbidInfo& ActivityDecoder::Cbid(CUpti_CallbackDomain domain,
                                                       CUpti_CallbackId cbid) {
  static const CbidInfo kCorrupt = {"unknown", false};
  auto& cache = cbids_[domain == CUPTI_CB_DOMAIN_DRIVER_API ? 1 : 0];
  if (cbid >= cache.size()) {
    if (cbid > 65535) return kCorrupt;  // corrupt record; don't grow the cache for it
    cache.resize(cbid + 1);
  }
  CbidInfo& info = cache[cbid];
  if (info.name == nullptr) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || name == nullptr) {
      name = "unknown";
    }
    info.name = name;  // CUPTI's names are static strings
    info.launches_one_kernel = LaunchesOneKernelApiName(name);
  }
  return info;
}

void ActivityDecoder::DecodeRecord(const CUpti_Activity* record) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      DecodeKernel(*reinterpret_cast<const CUpti_ActivityKernel10*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      DecodeMemcpy(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      DecodePeerMemcpy(*reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      DecodeMemset(*reinterpret_cast<const CUpti_ActivityMemset4*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
      DecodeApi(*reinterpret_cast<const CUpti_ActivityAPI*>(record), CUPTI_CB_DOMAIN_RUNTIME_API,
                ApiDomain::kRuntime);
      break;
    case CUPTI_ACTIVITY_KIND_DRIVER:
      DecodeApi(*reinterpret_cast<const CUpti_ActivityAPI*>(record), CUPTI_CB_DOMAIN_DRIVER_API,
                ApiDomain::kDriver);
      break;
    case CUPTI_ACTIVITY_KIND_MARKER:
      DecodeMarker(*reinterpret_cast<const CUpti_ActivityMarker2*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_MARKER_DATA:
      DecodeMarkerData(*reinterpret_cast<const CUpti_ActivityMarkerData2*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_NAME:
      DecodeName(*reinterpret_cast<const CUpti_ActivityName*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      DecodeSync(*reinterpret_cast<const CUpti_ActivitySynchronization2*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      DecodeOverhead(*reinterpret_cast<const CUpti_ActivityOverhead3*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
      DecodeGraphTrace(*reinterpret_cast<const CUpti_ActivityGraphTrace2*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_DEVICE:
      DecodeDevice(*reinterpret_cast<const CUpti_ActivityDevice5*>(record));
      break;
    case CUPTI_ACTIVITY_KIND_CONTEXT:
      DecodeContext(*reinterpret_cast<const CUpti_ActivityContext3*>(record));
      break;
    default:
      ++encoder_->stats().unknown_records;
      break;
  }
}

void ActivityDecoder::DecodeKernel(const CUpti_ActivityKernel10& r) {
  KernelRecord k;
  k.name = r.name != nullptr ? r.name : "<unknown>";
  // Asked of every record, kept or not: kp's own replay tells its relaunches from the
  // application's launch by the order of the records of one correlation id.
  if (collector_ != nullptr && (collector_->IsProfilerInternalKernel(k.name) ||
                                collector_->IsProfilerInternalLaunch(r.correlationId)))
    k.flags |= RecordFlag::kProfilerInternal;
  if (r.isDeviceLaunched) k.flags |= RecordFlag::kDeviceLaunched;
  k.start = r.start;
  k.end = r.end;
  k.grid[0] = ToU32(r.gridX);
  k.grid[1] = ToU32(r.gridY);
  k.grid[2] = ToU32(r.gridZ);
  k.block[0] = ToU32(r.blockX);
  k.block[1] = ToU32(r.blockY);
  k.block[2] = ToU32(r.blockZ);
  k.cluster[0] = r.clusterX;
  k.cluster[1] = r.clusterY;
  k.cluster[2] = r.clusterZ;
  k.registers_per_thread = r.registersPerThread;
  k.static_shared = ToU32(r.staticSharedMemory);
  k.dynamic_shared = ToU32(r.dynamicSharedMemory);
  k.local_per_thread = r.localMemoryPerThread;
  k.shared_executed = r.sharedMemoryExecuted;
  k.device = r.deviceId;
  k.context = r.contextId;
  k.stream = r.streamId;
  k.correlation = r.correlationId;
  k.graph_id = r.graphId;
  k.graph_node_id = r.graphNodeId;
  k.launch_type = r.launchType;
  k.channel = r.channelID;
  AddKernelRecord(k);
}

void ActivityDecoder::AddKernelRecord(const KernelRecord& k) {
  SeeTime(k.end);
  gpu_records_.fetch_add(1, std::memory_order_release);
  if (k.graph_id == 0) kernels_.fetch_add(1, std::memory_order_release);
  // Untimed records (start = end = 0) are kept whatever the window; the encoder flags and
  // counts them (RECORD_FLAG_NO_TIMING, zero_timestamp_records).
  if ((k.start != 0 || k.end != 0) && !Keep(k.start)) return;
  if (k.flags & RecordFlag::kProfilerInternal) ++encoder_->stats().profiler_internal_kernels;
  encoder_->AddKernel(k);
}

namespace {

// The fields CUpti_ActivityMemcpy6 and CUpti_ActivityMemcpyPtoP4 share.
template <typename CuptiCopy>
MemcpyRecord CommonCopyFields(const CuptiCopy& r) {
  MemcpyRecord m;
  if (r.flags & CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC) m.flags |= RecordFlag::kAsync;
  m.start = r.start;
  m.end = r.end;
  m.bytes = r.bytes;
  m.copy_kind = r.copyKind;
  m.src_kind = r.srcKind;
  m.dst_kind = r.dstKind;
  m.device = r.deviceId;
  m.context = r.contextId;
  m.stream = r.streamId;
  m.correlation = r.correlationId;
  m.graph_id = r.graphId;
  m.graph_node_id = r.graphNodeId;
  m.channel = r.channelID;
  return m;
}

}  // namespace

// Untimed copies (start = end = 0) are kept whatever the window; the encoder flags and counts
// them (RECORD_FLAG_NO_TIMING, zero_timestamp_records).
void ActivityDecoder::DecodeMemcpy(const CUpti_ActivityMemcpy6& r) {
  SeeTime(r.end);
  gpu_records_.fetch_add(1, std::memory_order_release);
  if ((r.start != 0 || r.end != 0) && !Keep(r.start)) return;
  MemcpyRecord m = CommonCopyFields(r);
  if (r.isDeviceLaunched) m.flags |= RecordFlag::kDeviceLaunched;
  m.copy_count = static_cast<uint32_t>(r.copyCount);
  encoder_->AddMemcpy(m);
}

void ActivityDecoder::DecodePeerMemcpy(const CUpti_ActivityMemcpyPtoP4& r) {
  SeeTime(r.end);
  gpu_records_.fetch_add(1, std::memory_order_release);
  if ((r.start != 0 || r.end != 0) && !Keep(r.start)) return;
  MemcpyRecord m = CommonCopyFields(r);
  m.peer = true;
  m.src_device = r.srcDeviceId;
  m.dst_device = r.dstDeviceId;
  m.src_context = r.srcContextId;
  m.dst_context = r.dstContextId;
  encoder_->AddMemcpy(m);
}

void ActivityDecoder::DecodeMemset(const CUpti_ActivityMemset4& r) {
  SeeTime(r.end);
  gpu_records_.fetch_add(1, std::memory_order_release);
  MemsetRecord m;
  // Untimed records (start = end = 0) are kept whatever the window; the encoder flags and
  // counts them (RECORD_FLAG_NO_TIMING, zero_timestamp_records).
  if ((r.start != 0 || r.end != 0) && !Keep(r.start)) return;
  if (r.flags & CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC) m.flags |= RecordFlag::kAsync;
  if (r.isDeviceLaunched) m.flags |= RecordFlag::kDeviceLaunched;
  m.start = r.start;
  m.end = r.end;
  m.bytes = r.bytes;
  m.value = r.value;
  m.memory_kind = r.memoryKind;
  m.device = r.deviceId;
  m.context = r.contextId;
  m.stream = r.streamId;
  m.correlation = r.correlationId;
  m.graph_id = r.graphId;
  m.graph_node_id = r.graphNodeId;
  m.channel = r.channelID;
  encoder_->AddMemset(m);
}

void ActivityDecoder::DecodeApi(const CUpti_ActivityAPI& r, CUpti_CallbackDomain domain,
                                uint32_t kp_domain) {
  SeeTime(r.end);
  const CbidInfo& call = Cbid(domain, static_cast<CUpti_CallbackId>(r.cbid));
  if (r.returnValue == 0 && call.launches_one_kernel) {
    launch_calls_.fetch_add(1, std::memory_order_release);
  }
  if (!Keep(r.start)) return;
  ApiRecord a;
  a.name = call.name;
  a.start = r.start;
  a.end = r.end;
  a.domain = kp_domain;
  a.cbid = r.cbid;
  a.thread_id = r.threadId;
  a.correlation = r.correlationId;
  a.return_value = static_cast<int32_t>(r.returnValue);
  encoder_->AddApi(a);
}

void ActivityDecoder::DecodeMarker(const CUpti_ActivityMarker2& r) {
  SeeTime(r.timestamp);
  const uint32_t thread = ThreadOf(r.objectKind, r.objectId);
  if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
    PendingMark mark;
    mark.id = r.id;
    mark.name = r.name != nullptr ? r.name : "";
    mark.has_domain = r.domain != nullptr;
    if (mark.has_domain) mark.domain = r.domain;
    mark.time = r.timestamp;
    mark.thread_id = thread;
    pending_marks_.push_back(std::move(mark));
    return;
  }
  if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
    if (!window_open_ && IsCaptureStart(r.name, r.domain)) {
      window_open_ = true;
      options_.window_start = r.timestamp;
      if (options_.duration_ns != 0) options_.window_end = r.timestamp + options_.duration_ns;
    }
    OpenRange& range = open_ranges_[r.id];  // a reused id replaces a range never closed
    range.name = r.name != nullptr ? r.name : "";
    range.has_domain = r.domain != nullptr;
    range.domain = range.has_domain ? r.domain : "";
    range.start = r.timestamp;
    range.thread_id = thread;
    range.extras = MarkerExtras();
    auto early = early_ends_.find(r.id);
    if (early != early_ends_.end()) {
      // Complete, but its MarkerData follows this START: emit at the end of the buffer.
      pending_closed_.push_back(ClosedRange{r.id, std::move(range), early->second});
      early_ends_.erase(early);
      open_ranges_.erase(r.id);
    }
    return;
  }
  if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
    auto it = open_ranges_.find(r.id);
    if (it == open_ranges_.end()) {
      early_ends_[r.id] = EarlyEnd{r.timestamp, thread};
      return;
    }
    EmitRange(r.id, it->second, r.timestamp, thread);
    open_ranges_.erase(it);
    return;
  }
  // SYNC_* markers (nvtxDomainSync*) carry no range: not recorded.
  ++encoder_->stats().unknown_records;
}

void ActivityDecoder::EmitRange(uint64_t id, const OpenRange& range, uint64_t end,
                                uint32_t end_thread) {
  if (!Keep(range.start)) return;
  NvtxRangeRecord out;
  out.name = range.name.c_str();
  out.domain = range.has_domain ? range.domain.c_str() : nullptr;
  out.start = range.start;
  out.end = end;
  out.thread_id = range.thread_id;
  out.end_thread_id = end_thread != range.thread_id ? end_thread : 0;
  out.category = range.extras.category;
  out.color = range.extras.color;
  out.has_color = range.extras.has_color;
  out.payload = range.extras.payload;
  out.id = id;
  encoder_->AddNvtxRange(out);
}

void ActivityDecoder::DecodeMarkerData(const CUpti_ActivityMarkerData2& r) {
  MarkerExtras extras;
  extras.category = r.category;
  if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB) {
    extras.has_color = true;
    extras.color = r.color;
  }
  switch (r.payloadKind) {
    case CUPTI_METRIC_VALUE_KIND_DOUBLE:
    case CUPTI_METRIC_VALUE_KIND_PERCENT:
      extras.payload.kind = NvtxPayloadValue::kF64;
      extras.payload.f64 = r.payload.metricValueDouble;
      break;
    case CUPTI_METRIC_VALUE_KIND_UINT64:
    case CUPTI_METRIC_VALUE_KIND_THROUGHPUT:
      extras.payload.kind = NvtxPayloadValue::kU64;
      extras.payload.u64 = r.payload.metricValueUint64;
      break;
    case CUPTI_METRIC_VALUE_KIND_INT64:
      extras.payload.kind = NvtxPayloadValue::kI64;
      extras.payload.i64 = r.payload.metricValueInt64;
      break;
    default:
      break;  // no payload, or an extended payload kp does not decode
  }
  // A MarkerData record follows its marker: search from the back (linear in the buffer).
  for (auto it = pending_marks_.rbegin(); it != pending_marks_.rend(); ++it) {
    if (it->id == r.id) {
      it->extras = extras;
      return;
    }
  }
  auto it = open_ranges_.find(r.id);
  if (it != open_ranges_.end()) {
    it->second.extras = extras;
    return;
  }
  for (auto it = pending_closed_.rbegin(); it != pending_closed_.rend(); ++it) {
    ClosedRange& closed = *it;
    if (closed.id == r.id) {
      closed.range.extras = extras;
      return;
    }
  }
}

void ActivityDecoder::EmitPendingMarks() {
  for (const ClosedRange& closed : pending_closed_) {
    EmitRange(closed.id, closed.range, closed.end.time, closed.end.thread_id);
  }
  pending_closed_.clear();
  for (const PendingMark& mark : pending_marks_) {
    if (!Keep(mark.time)) continue;
    NvtxMarkRecord out;
    out.name = mark.name.c_str();
    out.domain = mark.has_domain ? mark.domain.c_str() : nullptr;
    out.time = mark.time;
    out.thread_id = mark.thread_id;
    out.category = mark.extras.category;
    out.color = mark.extras.color;
    out.has_color = mark.extras.has_color;
    out.payload = mark.extras.payload;
    encoder_->AddNvtxMark(out);
  }
  pending_marks_.clear();
}

void ActivityDecoder::DecodeName(const CUpti_ActivityName& r) {
  if (r.objectKind != CUPTI_ACTIVITY_OBJECT_THREAD || r.name == nullptr) {
    ++encoder_->stats().unknown_records;  // device/context/stream names are not kept yet
    return;
  }
  encoder_->AddThreadName(r.objectId.pt.threadId, r.name);
}

void ActivityDecoder::DecodeSync(const CUpti_ActivitySynchronization2& r) {
  SeeTime(r.end);
  if (!Keep(r.start)) return;
  SyncRecord s;
  s.start = r.start;
  s.end = r.end;
  s.type = static_cast<uint32_t>(r.type);
  s.stream = r.streamId;
  s.context = r.contextId;
  s.correlation = r.correlationId;
  s.event_id = r.cudaEventId;
  s.return_value = static_cast<int32_t>(r.returnValue);
  encoder_->AddSync(s);
}

void ActivityDecoder::DecodeOverhead(const CUpti_ActivityOverhead3& r) {
  // CUPTI hands ownership of this allocation to the client (cupti_activity.h).
  if (r.overheadKind == CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL && r.overheadData != nullptr) {
    std::free(r.overheadData);
  }
  SeeTime(r.end);
  if (!Keep(r.start)) return;
  OverheadRecord o;
  o.name = OverheadName(r.overheadKind);
  o.start = r.start;
  o.end = r.end;
  o.kind = static_cast<uint32_t>(r.overheadKind);
  o.thread_id = ThreadOf(r.objectKind, r.objectId);
  if (r.objectKind == CUPTI_ACTIVITY_OBJECT_DEVICE ||
      r.objectKind == CUPTI_ACTIVITY_OBJECT_CONTEXT ||
      r.objectKind == CUPTI_ACTIVITY_OBJECT_STREAM) {
    o.device = r.objectId.dcs.deviceId;
  }
  o.correlation = r.correlationId;
  encoder_->AddOverhead(o);
}

void ActivityDecoder::DecodeGraphTrace(const CUpti_ActivityGraphTrace2& r) {
  SeeTime(r.end);
  if (!Keep(r.start)) return;
  GraphLaunchRecord g;
  g.start = r.start;
  g.end = r.end;
  g.graph_id = r.graphId;
  g.device = r.deviceId;
  g.context = r.contextId;
  g.stream = r.streamId;
  g.correlation = r.correlationId;
  encoder_->AddGraphLaunch(g);
}

void ActivityDecoder::DecodeDevice(const CUpti_ActivityDevice5& r) {
  DeviceInfo d;
  d.id = r.id;
  d.name = r.name != nullptr ? r.name : "";
  static_assert(sizeof(d.uuid) == sizeof(r.uuid.bytes), "CUuuid is 16 bytes");
  std::memcpy(d.uuid, r.uuid.bytes, sizeof(d.uuid));
  d.cc_major = r.computeCapabilityMajor;
  d.cc_minor = r.computeCapabilityMinor;
  d.sm_count = r.numMultiprocessors;
  d.global_memory_bytes = r.globalMemorySize;
  d.global_memory_bandwidth_kbps = r.globalMemoryBandwidth;
  d.core_clock_khz = r.coreClockRate;
  d.max_threads_per_block = r.maxThreadsPerBlock;
  d.max_shared_memory_per_block = r.maxSharedMemoryPerBlock;
  d.max_registers_per_block = r.maxRegistersPerBlock;
  d.l2_cache_bytes = r.l2CacheSize;
  d.max_warps_per_sm = r.maxWarpsPerMultiprocessor;
  d.num_threads_per_warp = r.numThreadsPerWarp;
  d.is_mig = r.isMigEnabled != 0;
  encoder_->AddDevice(d);
}

void ActivityDecoder::DecodeContext(const CUpti_ActivityContext3& r) {
  ContextInfo c;
  c.id = r.contextId;
  c.device = r.deviceId;
  c.null_stream = r.nullStreamId;
  c.is_green = r.isGreenContext != 0;
  encoder_->AddContext(c);
}

void ActivityDecoder::CapPendingNvtx() {
  if (early_ends_.size() > kMaxPendingNvtx) {
    abandoned_ends_ += early_ends_.size();
    early_ends_.clear();
  }
  if (open_ranges_.size() > kMaxPendingNvtx) {
    // Give up the older half: long-lived outer ranges are few, the flood is of lost ENDs.
    std::vector<std::pair<uint64_t, uint64_t>> by_start;  // (start, id)
    by_start.reserve(open_ranges_.size());
    for (const auto& [id, range] : open_ranges_) by_start.emplace_back(range.start, id);
    const size_t drop = by_start.size() / 2;
    std::nth_element(by_start.begin(), by_start.begin() + drop, by_start.end());
    for (size_t i = 0; i < drop; ++i) open_ranges_.erase(by_start[i].second);
    abandoned_open_ += drop;
  }
}

void ActivityDecoder::UpdateOpenRangeStat() {
  encoder_->stats().nvtx_open_ranges = open_ranges_.size() + abandoned_open_;
  // Provisional: an early END may still meet its START in a later buffer.
  encoder_->stats().nvtx_unmatched_ends = early_ends_.size() + abandoned_ends_;
}

void ActivityDecoder::Finish() {
  EmitPendingMarks();
  encoder_->stats().nvtx_unmatched_ends = early_ends_.size() + abandoned_ends_;
  early_ends_.clear();
  uint64_t clipped = 0;
  for (const auto& [id, range] : open_ranges_) {
    if (!Keep(range.start)) continue;
    uint64_t window_end = 0;
    for (const auto& [start, end] : windows_) {
      if (range.start >= start && range.start <= end) window_end = end;
    }
    NvtxRangeRecord out;
    out.name = range.name.c_str();
    out.domain = range.has_domain ? range.domain.c_str() : nullptr;
    out.start = range.start;
    out.end = last_timestamp_ > range.start ? last_timestamp_ : range.start;
    out.thread_id = range.thread_id;
    out.category = range.extras.category;
    out.color = range.extras.color;
    out.has_color = range.extras.has_color;
    out.payload = range.extras.payload;
    out.flags = RecordFlag::kOpen;
    if (window_end != 0) {
      out.end = window_end > range.start ? window_end : range.start;
      out.flags = RecordFlag::kClipped;
      ++clipped;
    }
    out.id = id;
    encoder_->AddNvtxRange(out);
  }
  encoder_->stats().nvtx_open_ranges = open_ranges_.size() + abandoned_open_ - clipped;
  encoder_->stats().nvtx_ranges_clipped = clipped;
  open_ranges_.clear();
}

}  // namespace kp
