#include "inject/cupti/api_call_recorder.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <new>
#include <string_view>

#include "inject/cupti/activity_decoder.h"
#include "inject/cupti/api_selection.h"

namespace kp {

// The producer's and the consumer's words sit on cache lines of their own: the owning thread
// never reads a line the encoder thread writes except when its cached view of `tail` says the
// ring may be full, so a drain does not cost the CUDA-calling thread a cache miss per call.
struct ApiCallRecorder::Ring {
  alignas(64) std::atomic<uint64_t> head{0};  // written by the owning thread only
  uint64_t cached_tail = 0;                   // the owner's last read of `tail`
  alignas(64) std::atomic<uint64_t> tail{0};  // written by the encoder thread only
  alignas(64) std::atomic<bool> in_use{true};
  Ring* next = nullptr;  // set before publication, never changed
  CUpti_ActivityAPI slots[kRingSlots];
};

namespace {

constexpr uint8_t kRecorded = 1;
constexpr uint8_t kCopies = 2;

std::vector<uint8_t> SelectCbids(CUpti_CallbackDomain domain) {
  const size_t end = domain == CUPTI_CB_DOMAIN_RUNTIME_API
                         ? static_cast<size_t>(CUPTI_RUNTIME_TRACE_CBID_SIZE)
                         : static_cast<size_t>(CUPTI_DRIVER_TRACE_CBID_SIZE);
  std::vector<uint8_t> flags(end, 0);
  for (CUpti_CallbackId cbid : SelectLaunchRelatedCbids(domain)) {
    if (cbid < end) flags[cbid] = kRecorded;
  }
  for (size_t cbid = 1; cbid < end; ++cbid) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(domain, static_cast<CUpti_CallbackId>(cbid), &name) == CUPTI_SUCCESS &&
        name != nullptr && MayCopyApiName(name)) {
      flags[cbid] |= kCopies;
    }
  }
  return flags;
}

// Per CUDA-calling thread, read on every callback: trivially destructible and constant-
// initialized, so an access is a plain thread-local lookup with no lazy-init guard (a
// thread_local with a destructor costs a guard check and a second lookup on every access).
struct ThreadState {
  const void* owner;  // the recorder `ring` belongs to
  void* ring;
  uint32_t thread_id;
  uint32_t runtime_depth;        // recorded runtime calls in progress on this thread
  uint32_t runtime_correlation;  // the innermost one's correlation id
};
thread_local ThreadState t_state = {nullptr, nullptr, 0, 0, 0};

// Touched once per thread, when it takes a ring: at thread exit it hands the ring back for a
// later thread to reuse; the encoder thread still drains what is left in it. The thread forgets
// the ring first: CUDA calls made by thread-exit destructors that run after this one (an
// application's thread_local handle, cudart's own clean-up) would otherwise keep writing into a
// ring another thread may already own; they take a ring of their own instead (left in use).
struct RingRelease {
  std::atomic<bool>* in_use = nullptr;
  ~RingRelease();
};
thread_local RingRelease t_ring_release;

RingRelease::~RingRelease() {
  if (in_use == nullptr) return;
  t_state.owner = nullptr;
  t_state.ring = nullptr;
  in_use->store(false, std::memory_order_release);
  in_use = nullptr;
}

// A driver call inside a recorded runtime call that shares its correlation id: the runtime
// record already links the GPU work. One with an id of its own is recorded.
bool Covered(const ThreadState& ts, const CUpti_CallbackData* data) {
  return ts.runtime_depth != 0 && data->correlationId == ts.runtime_correlation;
}

}  // namespace

ApiCallRecorder::ApiCallRecorder(EnableCopyKinds enable_copy_kinds, ApiLevel level)
    : enable_copy_kinds_(enable_copy_kinds),
      runtime_cbids_(level == ApiLevel::kRuntimeAndDriver ? SelectCbids(CUPTI_CB_DOMAIN_RUNTIME_API)
                                                          : std::vector<uint8_t>()),
      driver_cbids_(SelectCbids(CUPTI_CB_DOMAIN_DRIVER_API)) {
  hot_.runtime_flags = runtime_cbids_.data();
  hot_.driver_flags = driver_cbids_.data();
  hot_.runtime_size = static_cast<uint32_t>(runtime_cbids_.size());
  hot_.driver_size = static_cast<uint32_t>(driver_cbids_.size());
  hot_.process_id = static_cast<uint32_t>(getpid());
  hot_.copy_kinds_enabled.store(enable_copy_kinds == nullptr);
  // Rings for the first CUDA-calling threads (PyTorch: the main thread and autograd's), made
  // here so that their first recorded call does not allocate.
  for (int i = 0; i < kPreparedRings; ++i) {
    Ring* ring = new Ring();
    ring->in_use.store(false);
    ring->next = rings_.load();
    rings_.store(ring);
  }
}

ApiCallRecorder::~ApiCallRecorder() {
  // The injector's recorder lives as long as the process; tests make and destroy several.
  if (t_state.owner == this) {
    t_state.owner = nullptr;
    t_state.ring = nullptr;
    t_ring_release.in_use = nullptr;
  }
  Ring* ring = rings_.exchange(nullptr);
  while (ring != nullptr) {
    Ring* next = ring->next;
    delete ring;
    ring = next;
  }
}

void ApiCallRecorder::EnableCallbacks(CUpti_SubscriberHandle subscriber) {
  // Copy-only cbids need their callback only while the copy kinds wait for a first copy.
  const uint8_t wanted = hot_.copy_kinds_enabled.load() ? kRecorded : (kRecorded | kCopies);
  for (size_t cbid = 0; cbid < runtime_cbids_.size(); ++cbid) {
    if (runtime_cbids_[cbid] & wanted) {
      cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                          static_cast<CUpti_CallbackId>(cbid));
    }
  }
  for (size_t cbid = 0; cbid < driver_cbids_.size(); ++cbid) {
    if (driver_cbids_[cbid] & wanted) {
      cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API,
                          static_cast<CUpti_CallbackId>(cbid));
    }
  }
}

void ApiCallRecorder::SetCallbacksEnabled(CUpti_SubscriberHandle subscriber, bool on) {
  const bool copies_pending = !hot_.copy_kinds_enabled.load();
  const auto toggle = [&](const std::vector<uint8_t>& table, CUpti_CallbackDomain domain) {
    for (size_t cbid = 0; cbid < table.size(); ++cbid) {
      if (!(table[cbid] & kRecorded)) continue;
      if (!on && copies_pending && (table[cbid] & kCopies)) continue;  // still detects the copy
      cuptiEnableCallback(on ? 1 : 0, subscriber, domain, static_cast<CUpti_CallbackId>(cbid));
    }
  };
  toggle(runtime_cbids_, CUPTI_CB_DOMAIN_RUNTIME_API);
  toggle(driver_cbids_, CUPTI_CB_DOMAIN_DRIVER_API);
}

bool ApiCallRecorder::Wants(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) const {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return hot_.Flags(true, cbid) & kRecorded;
  if (domain == CUPTI_CB_DOMAIN_DRIVER_API) return hot_.Flags(false, cbid) & kRecorded;
  return false;
}

ApiCallRecorder::Ring* ApiCallRecorder::ThreadRing() {
  ThreadState& ts = t_state;
  if (ts.owner == this) return static_cast<Ring*>(ts.ring);
  // Reuse the ring of a thread that has exited, else make one (once per thread).
  Ring* ring = nullptr;
  for (Ring* r = rings_.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    bool expected = false;
    if (r->in_use.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) {
      ring = r;
      break;
    }
  }
  if (ring == nullptr) {
    ring = new (std::nothrow) Ring();
    if (ring == nullptr) return nullptr;
    Ring* head = rings_.load(std::memory_order_relaxed);
    do {
      ring->next = head;
    } while (!rings_.compare_exchange_weak(head, ring, std::memory_order_release,
                                           std::memory_order_relaxed));
  }
  ring->cached_tail = ring->tail.load(std::memory_order_acquire);
  t_ring_release.in_use = &ring->in_use;
  ts.owner = this;
  ts.ring = ring;
  ts.thread_id = static_cast<uint32_t>(syscall(SYS_gettid));
  return ring;
}

void ApiCallRecorder::OnCallback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const CUpti_CallbackData* data) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  const uint8_t flags = hot_.Flags(runtime, cbid);
  if (flags == 0) return;
  if (!(flags & kRecorded)) {  // only here to turn the copy kinds on
    if (data->callbackSite == CUPTI_API_ENTER &&
        !hot_.copy_kinds_enabled.load(std::memory_order_relaxed) &&
        !hot_.copy_kinds_enabled.exchange(true)) {
      enable_copy_kinds_();
    }
    return;
  }
  ThreadState& ts = t_state;  // no lazy-init guard on this lookup (see ThreadState)
  if (data->callbackSite == CUPTI_API_ENTER) {
    if (runtime) {
      ++ts.runtime_depth;
      ts.runtime_correlation = data->correlationId;
    } else if (Covered(ts, data)) {
      return;
    }
    if ((flags & kCopies) && !hot_.copy_kinds_enabled.load(std::memory_order_relaxed) &&
        !hot_.copy_kinds_enabled.exchange(true)) {
      enable_copy_kinds_();
    }
    uint64_t now = 0;
    cuptiGetTimestamp(&now);
    if (data->correlationData != nullptr) *data->correlationData = now;
    return;
  }
  if (runtime) {
    if (ts.runtime_depth != 0) --ts.runtime_depth;
  } else if (Covered(ts, data)) {
    return;
  }
  if (!hot_.recording.load(std::memory_order_acquire)) return;  // outside a capture window
  // Read before the timestamp call, so the thread-local is not looked up again after it.
  Ring* ring = ts.owner == this ? static_cast<Ring*>(ts.ring) : nullptr;
  uint32_t thread_id = ts.thread_id;
  uint64_t end = 0;
  cuptiGetTimestamp(&end);
  if (ring == nullptr) {
    ring = ThreadRing();
    if (ring == nullptr) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    thread_id = t_state.thread_id;
  }
  uint64_t start = end;
  if (data->correlationData != nullptr) {
    start = *data->correlationData;
    *data->correlationData = 0;  // a later call whose ENTER kp does not see reads 0: dropped
  }
  // ENTER unseen: a cleared slot, an entry before the window opened, or no time at all.
  if (start == 0 || start < hot_.open_ns.load(std::memory_order_relaxed) || start > end) return;
  const uint64_t head = ring->head.load(std::memory_order_relaxed);
  if (head - ring->cached_tail >= kRingSlots) {
    ring->cached_tail = ring->tail.load(std::memory_order_acquire);
    if (head - ring->cached_tail >= kRingSlots) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  CUpti_ActivityAPI& slot = ring->slots[head & (kRingSlots - 1)];
  slot.kind = runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER;
  slot.cbid = cbid;
  slot.start = start;
  slot.end = end;
  slot.processId = hot_.process_id;
  slot.threadId = thread_id;
  slot.correlationId = data->correlationId;
  slot.returnValue = data->functionReturnValue != nullptr
                         ? *static_cast<const int*>(data->functionReturnValue)
                         : 0;
  ring->head.store(head + 1, std::memory_order_release);
}

bool RecordsApiFromCallbacks(const Config& config) {
  return config.api &&
         (config.api_mode == ApiMode::kLaunch || config.api_mode == ApiMode::kLaunchRuntime);
}

bool CopyKindsAtFirstCopy(const Config& config) {
  return RecordsApiFromCallbacks(config) && (config.memcpy || config.memset);
}

ApiCallRecorder* MakeApiCallRecorder(const Config& config,
                                     ApiCallRecorder::EnableCopyKinds enable_copy_kinds) {
  if (!RecordsApiFromCallbacks(config)) return nullptr;
  return new ApiCallRecorder(
      CopyKindsAtFirstCopy(config) ? enable_copy_kinds : nullptr,
      config.api_mode == ApiMode::kLaunchRuntime ? ApiLevel::kRuntimeAndDriver : ApiLevel::kDriver);
}

size_t ApiCallRecorder::Drain(ActivityDecoder* decoder) {
  size_t drained = 0;
  for (Ring* ring = rings_.load(std::memory_order_acquire); ring != nullptr; ring = ring->next) {
    const uint64_t head = ring->head.load(std::memory_order_acquire);
    uint64_t tail = ring->tail.load(std::memory_order_relaxed);
    for (; tail != head; ++tail) {
      decoder->DecodeRecord(
          reinterpret_cast<const CUpti_Activity*>(&ring->slots[tail & (kRingSlots - 1)]));
      ++drained;
    }
    ring->tail.store(tail, std::memory_order_release);
  }
  return drained;
}

}  // namespace kp
