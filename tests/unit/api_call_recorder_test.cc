// api_call_recorder_test.cc: API calls recorded from CUPTI callbacks (KP_API=launch and
// launch-runtime), without a GPU. The callbacks are driven with CUpti_CallbackData as CUPTI fills
// it (the correlationData slot carried from ENTER to EXIT, the return value at EXIT), drained
// through the real ActivityDecoder and TraceEncoder, and the trace parsed with libprotobuf.
#include "inject/cupti/api_call_recorder.h"

#include <cupti.h>
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "inject/cupti/activity_decoder.h"
#include "inject/cupti/api_selection.h"
#include "inject/trace/chunk_writer.h"
#include "inject/trace/trace_encoder.h"
#include "kptrace.pb.h"
#include "tools/reader/chunk_columns.h"

namespace kp {
namespace {

int g_copy_kinds_enabled = 0;
void CountCopyKindEnable() { ++g_copy_kinds_enabled; }

// One API call as CUPTI reports it: ENTER, then EXIT with the same correlationData slot.
struct Call {
  CUpti_CallbackDomain domain;
  CUpti_CallbackId cbid;
  uint32_t correlation;
  int result = 0;
  uint64_t slot = 0;
  CUpti_CallbackData data{};

  Call(CUpti_CallbackDomain d, CUpti_CallbackId c, uint32_t corr)
      : domain(d), cbid(c), correlation(corr) {
    data.correlationId = corr;
    data.correlationData = &slot;
    data.functionReturnValue = &result;
  }
  void Enter(ApiCallRecorder& r) {
    data.callbackSite = CUPTI_API_ENTER;
    r.OnCallback(domain, cbid, &data);
  }
  void Exit(ApiCallRecorder& r) {
    data.callbackSite = CUPTI_API_EXIT;
    r.OnCallback(domain, cbid, &data);
  }
};

struct Decoded {
  std::vector<ApiCall> calls;
  std::vector<std::string> names;
  std::vector<uint32_t> correlations;
};

// The injector's decoding half: drained calls go through the real decoder and encoder.
struct Decoding {
  MemoryChunkSink sink;
  TraceEncoder encoder{&sink, TraceEncoder::Options()};
  ActivityDecoder decoder{&encoder, nullptr, ActivityDecoder::Options()};
  Decoding() {
    HeaderInfo header;
    header.kp_version = "test";
    encoder.SetHeader(header);
  }
  // Ends the trace and parses every API call in it (correlation deltas undone).
  Decoded Finish() {
    decoder.Finish();
    FooterInfo footer;
    footer.end_reason = "test";
    encoder.Finish(footer);
    Decoded d;
    std::map<uint32_t, std::string> strings;
    for (const auto& raw : sink.raw_chunks()) {
      Chunk c;
      EXPECT_TRUE(c.ParseFromArray(raw.data(), static_cast<int>(raw.size())));
      EXPECT_EQ(ExpandColumns(&c, UINT64_MAX), ColumnsResult::kOk);
      for (const auto& s : c.strings()) strings[s.id()] = s.value();
      int64_t correlation = 0;
      for (const auto& a : c.api_calls()) {
        correlation += a.correlation();
        d.calls.push_back(a);
        d.correlations.push_back(static_cast<uint32_t>(correlation));
      }
    }
    for (const auto& a : d.calls) d.names.push_back(strings[a.name()]);
    return d;
  }
};

Decoded DrainAll(ApiCallRecorder& recorder) {
  Decoding decoding;
  recorder.Drain(&decoding.decoder);
  return decoding.Finish();
}

TEST(ApiCallRecorderTest, RecordsOneLaunchPerRuntimeCallWithItsCorrelationAndResult) {
  ApiCallRecorder recorder(nullptr, ApiLevel::kRuntimeAndDriver);
  EXPECT_TRUE(
      recorder.Wants(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_TRUE(recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_FALSE(
      recorder.Wants(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020));

  Call launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 41);
  Call nested(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 41);
  launch.Enter(recorder);
  nested.Enter(recorder);  // same correlation inside the runtime call: covered by it
  nested.Exit(recorder);
  launch.result = 700;  // the call's return value reaches the record
  launch.Exit(recorder);
  Call direct(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 42);
  direct.Enter(recorder);  // a driver launch on its own (Triton): recorded
  direct.Exit(recorder);
  Call ignored(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 43);
  ignored.Enter(recorder);
  ignored.Exit(recorder);

  Decoded d = DrainAll(recorder);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.names[0], "cudaLaunchKernel_v7000");
  EXPECT_EQ(d.correlations[0], 41u);
  EXPECT_EQ(d.calls[0].return_value(), 700);
  EXPECT_GE(d.calls[0].duration(), 0);
  EXPECT_EQ(d.names[1], "cuLaunchKernel");
  EXPECT_EQ(d.correlations[1], 42u);
  EXPECT_EQ(d.calls[0].thread_id(), d.calls[1].thread_id());
  EXPECT_NE(d.calls[0].thread_id(), 0u);
  EXPECT_EQ(recorder.dropped(), 0u);
  EXPECT_TRUE(DrainAll(recorder).calls.empty());  // drained once
}

TEST(ApiCallRecorderTest, DriverLevelRecordsEachCallOnceAsTheDriverCallItReaches) {
  // KP_API=launch: no runtime callback is taken; a runtime launch is recorded as the driver call
  // it makes, with the runtime call's correlation id (the one its kernel carries).
  ApiCallRecorder recorder(nullptr, ApiLevel::kDriver);
  EXPECT_FALSE(
      recorder.Wants(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_FALSE(
      recorder.Wants(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020));
  EXPECT_TRUE(recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_TRUE(recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx));
  EXPECT_TRUE(recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize));
  EXPECT_TRUE(recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc));
  EXPECT_TRUE(recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuArrayCreate_v2));
  EXPECT_TRUE(recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuArrayDestroy));
  EXPECT_TRUE(
      recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMipmappedArrayCreate));
  EXPECT_FALSE(recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent));
  EXPECT_FALSE(
      recorder.Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuArrayGetDescriptor_v2));

  // CUPTI would not call back on the runtime cbids (not enabled); a stray call is ignored.
  Call launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 41);
  Call nested(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 41);
  launch.Enter(recorder);
  nested.Enter(recorder);
  nested.result = 1;  // the driver call's result reaches the record
  nested.Exit(recorder);
  launch.Exit(recorder);
  Call direct(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 42);
  direct.Enter(recorder);  // Triton's launch
  direct.Exit(recorder);
  Call sync(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, 43);
  sync.Enter(recorder);  // cudaDeviceSynchronize reaches cuCtxSynchronize
  sync.Exit(recorder);

  Decoded d = DrainAll(recorder);
  ASSERT_EQ(d.calls.size(), 3u);
  EXPECT_EQ(d.names[0], "cuLaunchKernel");
  EXPECT_EQ(d.correlations[0], 41u);
  EXPECT_EQ(d.calls[0].return_value(), 1);
  EXPECT_EQ(d.names[1], "cuLaunchKernelEx");
  EXPECT_EQ(d.correlations[1], 42u);
  EXPECT_EQ(d.names[2], "cuCtxSynchronize");
  EXPECT_EQ(d.correlations[2], 43u);
  EXPECT_EQ(recorder.dropped(), 0u);
}

TEST(ApiCallRecorderTest, DriverLevelTurnsCopyKindsOnAtTheFirstDriverCopy) {
  g_copy_kinds_enabled = 0;
  ApiCallRecorder recorder(&CountCopyKindEnable, ApiLevel::kDriver);
  Call launch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1);
  launch.Enter(recorder);
  launch.Exit(recorder);
  EXPECT_EQ(g_copy_kinds_enabled, 0);
  Call copy(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, 2);
  copy.Enter(recorder);  // cudaMemcpyAsync's driver call, before the copy is issued
  EXPECT_EQ(g_copy_kinds_enabled, 1);
  copy.Exit(recorder);
  Decoded d = DrainAll(recorder);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.names[1], "cuMemcpyAsync");
  // A graph instantiated before any copy (cudaGraphInstantiate reaches cuGraphInstantiate*)
  // turns them on too, though it is not recorded.
  g_copy_kinds_enabled = 0;
  ApiCallRecorder graphs(&CountCopyKindEnable, ApiLevel::kDriver);
  Call instantiate(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
                   5);
  instantiate.Enter(graphs);
  instantiate.Exit(graphs);
  EXPECT_EQ(g_copy_kinds_enabled, 1);
  EXPECT_TRUE(DrainAll(graphs).calls.empty());
}

TEST(ApiCallRecorderTest, DriverCallWithItsOwnCorrelationInsideARuntimeCallIsRecorded) {
  ApiCallRecorder recorder(nullptr, ApiLevel::kRuntimeAndDriver);
  Call copy(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 7);
  Call inner(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, 8);
  copy.Enter(recorder);
  inner.Enter(recorder);
  inner.Exit(recorder);
  copy.Exit(recorder);
  Decoded d = DrainAll(recorder);
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_EQ(d.correlations[0], 8u);  // the inner call finishes first
  EXPECT_EQ(d.correlations[1], 7u);
}

TEST(ApiCallRecorderTest, FirstCopyCallEnablesCopyKindsOnceBeforeItRuns) {
  g_copy_kinds_enabled = 0;
  ApiCallRecorder recorder(&CountCopyKindEnable, ApiLevel::kRuntimeAndDriver);
  Call launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1);
  launch.Enter(recorder);
  launch.Exit(recorder);
  EXPECT_EQ(g_copy_kinds_enabled, 0);
  Call copy(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, 2);
  copy.Enter(recorder);
  EXPECT_EQ(g_copy_kinds_enabled, 1);  // at ENTER: before the copy is issued
  copy.Exit(recorder);
  Call memset(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, 3);
  memset.Enter(recorder);
  memset.Exit(recorder);
  EXPECT_EQ(g_copy_kinds_enabled, 1);
  EXPECT_EQ(DrainAll(recorder).calls.size(), 3u);
}

TEST(ApiCallRecorderTest, CallsThatMayCopyIncludeGraphsWithCopyNodes) {
  EXPECT_TRUE(MayCopyApiName("cudaMemcpyAsync_v3020"));
  EXPECT_TRUE(MayCopyApiName("cuMemsetD32Async"));
  EXPECT_TRUE(MayCopyApiName("cudaGraphAddMemcpyNode_v10000"));
  EXPECT_TRUE(MayCopyApiName("cuGraphInstantiateWithFlags"));
  EXPECT_TRUE(MayCopyApiName("cudaGraphLaunch_v10000"));
  EXPECT_FALSE(MayCopyApiName("cudaLaunchKernel_v7000"));
  EXPECT_FALSE(MayCopyApiName("cudaMalloc_v3020"));
  // A graph instantiated before any copy call turns the copy kinds on, though it is not
  // recorded as an API call.
  g_copy_kinds_enabled = 0;
  ApiCallRecorder recorder(&CountCopyKindEnable, ApiLevel::kRuntimeAndDriver);
  Call instantiate(CUPTI_CB_DOMAIN_RUNTIME_API,
                   CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v10000, 5);
  instantiate.Enter(recorder);
  instantiate.Exit(recorder);
  EXPECT_EQ(g_copy_kinds_enabled, 1);
  EXPECT_TRUE(DrainAll(recorder).calls.empty());
}

TEST(ApiCallRecorderTest, FullRingDropsAndCountsInsteadOfBlocking) {
  ApiCallRecorder recorder(nullptr, ApiLevel::kRuntimeAndDriver);
  const uint32_t total = ApiCallRecorder::kRingSlots + 5;
  for (uint32_t i = 0; i < total; ++i) {
    Call launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                i + 1);
    launch.Enter(recorder);
    launch.Exit(recorder);
  }
  EXPECT_EQ(recorder.dropped(), 5u);
  EXPECT_EQ(DrainAll(recorder).calls.size(), ApiCallRecorder::kRingSlots);
  // Drained: room again.
  Call launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 9);
  launch.Enter(recorder);
  launch.Exit(recorder);
  EXPECT_EQ(DrainAll(recorder).calls.size(), 1u);
}

TEST(ApiCallRecorderTest, EachThreadHasItsRingAndAnExitedThreadsRingIsReused) {
  // CUPTI sets up its clock at the first cuptiGetTimestamp; ThreadSanitizer, which does not see
  // libcupti's own synchronisation, reports two threads' first calls initialising one mutex in
  // it. In the injector CUPTI is set up by cuptiSubscribe before any callback; here the test's
  // own thread makes that first call.
  uint64_t warm = 0;
  ASSERT_EQ(cuptiGetTimestamp(&warm), CUPTI_SUCCESS);
  ApiCallRecorder recorder(nullptr, ApiLevel::kRuntimeAndDriver);
  auto launches = [&recorder](uint32_t first, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      Call launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                  first + i);
      launch.Enter(recorder);
      launch.Exit(recorder);
    }
  };
  std::thread a(launches, 100, 3);
  std::thread b(launches, 200, 4);
  a.join();
  b.join();
  std::thread c(launches, 300, 2);  // finds a ring handed back by a or b
  c.join();
  Decoded d = DrainAll(recorder);
  EXPECT_EQ(d.calls.size(), 9u);
  std::set<uint32_t> threads;
  for (const auto& call : d.calls) threads.insert(call.thread_id());
  EXPECT_EQ(threads.size(), 3u);
}

TEST(ApiCallRecorderTest, DrainingWhileAThreadRecordsLosesAndRepeatsNothing) {
  ApiCallRecorder recorder(nullptr, ApiLevel::kRuntimeAndDriver);
  Decoding decoding;
  constexpr uint32_t kCalls = 200000;  // six times the ring: only draining keeps up
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (uint32_t i = 1; i <= kCalls; ++i) {
      Call launch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, i);
      launch.Enter(recorder);
      launch.Exit(recorder);
    }
    done.store(true);
  });
  size_t drained = 0;
  while (!done.load()) drained += recorder.Drain(&decoding.decoder);
  producer.join();
  drained += recorder.Drain(&decoding.decoder);
  EXPECT_EQ(drained + recorder.dropped(), kCalls);
  // Every drained call once, in the order it was made.
  Decoded d = decoding.Finish();
  EXPECT_EQ(d.calls.size(), drained);
  bool increasing = true;
  for (size_t i = 1; i < d.correlations.size(); ++i) {
    increasing = increasing && d.correlations[i] > d.correlations[i - 1];
  }
  EXPECT_TRUE(increasing);
}

TEST(ApiCallRecorderTest, DefaultsRecordFromCallbacksAndDelayCopyKinds) {
  Config config;
  EXPECT_TRUE(RecordsApiFromCallbacks(config));
  EXPECT_TRUE(CopyKindsAtFirstCopy(config));
  // The default takes the driver form only; launch-runtime both.
  std::unique_ptr<ApiCallRecorder> driver(MakeApiCallRecorder(config, &CountCopyKindEnable));
  ASSERT_NE(driver, nullptr);
  EXPECT_FALSE(
      driver->Wants(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_TRUE(driver->Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  config.api_mode = ApiMode::kLaunchRuntime;
  EXPECT_TRUE(CopyKindsAtFirstCopy(config));
  std::unique_ptr<ApiCallRecorder> both(MakeApiCallRecorder(config, &CountCopyKindEnable));
  ASSERT_NE(both, nullptr);
  EXPECT_TRUE(
      both->Wants(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000));
  EXPECT_TRUE(both->Wants(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  config.api_mode = ApiMode::kLaunchActivity;
  EXPECT_FALSE(RecordsApiFromCallbacks(config));
  EXPECT_FALSE(CopyKindsAtFirstCopy(config));
  EXPECT_EQ(MakeApiCallRecorder(config, &CountCopyKindEnable), nullptr);
  config.api_mode = ApiMode::kLaunch;
  config.memcpy = config.memset = false;
  EXPECT_FALSE(CopyKindsAtFirstCopy(config));
  config.api = false;
  EXPECT_FALSE(RecordsApiFromCallbacks(config));
}

}  // namespace
TEST(ApiCallRecorderTest, ACallEnteredBeforeTheWindowOpenedIsNotRecorded) {
  ApiCallRecorder recorder(nullptr, ApiLevel::kRuntimeAndDriver);
  recorder.SetRecording(false);
  Call straddling(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 7);
  straddling.Enter(recorder);  // before the window (with callbacks off CUPTI would not call)
  uint64_t open = 0;
  cuptiGetTimestamp(&open);
  recorder.SetRecording(true, open + 1);
  straddling.Exit(recorder);  // its slot holds no entry time from inside the window
  Call inside(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 8);
  inside.Enter(recorder);
  inside.Exit(recorder);
  Call unseen(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 9);
  unseen.slot = ~uint64_t{0};  // ENTER never delivered: whatever the slot holds
  unseen.Exit(recorder);
  Decoded d = DrainAll(recorder);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.correlations[0], 8u);
}

TEST(ApiCallRecorderTest, TheEntrySlotIsClearedAtExitSoAnExitWithoutEnterIsDropped) {
  // The whole run: no window, open time 0.
  ApiCallRecorder recorder(nullptr, ApiLevel::kRuntimeAndDriver);
  Call call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 11);
  call.Enter(recorder);
  EXPECT_NE(call.slot, 0u);
  call.Exit(recorder);
  EXPECT_EQ(call.slot, 0u);
  Call again(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 12);
  again.Exit(recorder);  // its ENTER never came: the slot holds 0
  Decoded d = DrainAll(recorder);
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.correlations[0], 11u);
}

}  // namespace kp
