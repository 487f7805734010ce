// record_args.h: the arguments (details shown for a selected slice) of each record kind, in one
// table per kind that the Chrome JSON and Perfetto exporters both write through: a Sink turns
// (argument, value) pairs into JSON keys or Perfetto debug annotations.
//
// A Sink provides UInt, Int, Double, Str, Dim3, Bool (ArgId first) and Payload.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "common/time_math.h"
#include "kptrace.pb.h"
#include "tools/export/record_naming.h"

namespace kp {

enum ArgId : uint32_t {
  kArgGrid = 1,
  kArgBlock,
  kArgCluster,
  kArgRegisters,
  kArgStaticShared,
  kArgDynamicShared,
  kArgCorrelation,
  kArgStream,
  kArgDevice,
  kArgGraphId,
  kArgGraphNodeId,
  kArgMangledName,
  kArgKind,
  kArgBytes,
  kArgBandwidth,
  kArgSrcKind,
  kArgDstKind,
  kArgValue,
  kArgMemoryKind,
  kArgDomain,
  kArgCategory,
  kArgPayload,
  kArgReturnValue,
  kArgOccurrence,
  kArgOccurrencesUsed,
  kArgSmClock,
  kArgContext,
  kArgSrcDevice,
  kArgDstDevice,
  kArgEndThread,
  kArgEventId,
  kArgThread,
  kArgOpen,
  kArgCount  // first free id (Perfetto interns metric names from here)
};

// The display name of each ArgId (index 0 unused).
extern const char* const kArgNames[kArgCount];

template <typename Sink>
void GraphArgs(uint32_t graph_id, uint64_t node_id, Sink& s) {
  if (graph_id == 0) return;
  s.UInt(kArgGraphId, graph_id);
  s.UInt(kArgGraphNodeId, node_id);
}

// A kernel's arguments in two parts: those of its shape (the same for every launch of it, so
// the Perfetto exporter encodes them once per shape) and those of the launch.
// `mangled` is the shape's mangled name.
template <typename Sink>
void KernelShapeArgs(const KernelShape& shape, std::string_view mangled, Sink& s) {
  s.Dim3(kArgGrid, shape.grid_x(), shape.grid_y(), shape.grid_z());
  s.Dim3(kArgBlock, shape.block_x(), shape.block_y(), shape.block_z());
  s.Dim3(kArgCluster, shape.cluster_x(), shape.cluster_y(), shape.cluster_z());
  s.UInt(kArgRegisters, shape.registers_per_thread());
  s.UInt(kArgStaticShared, shape.static_shared_bytes());
  s.UInt(kArgDynamicShared, shape.dynamic_shared_bytes());
  s.Str(kArgMangledName, mangled);
}
// Where a launch ran: the same for a stream's kernels one after another (the Chrome exporter
// formats these members once per change; KernelLaunchArgs' order).
template <typename Sink>
void KernelPlacementArgs(uint32_t stream, uint32_t device, uint32_t context, Sink& s) {
  s.UInt(kArgStream, stream);
  s.UInt(kArgDevice, device);
  s.UInt(kArgContext, context);
}
template <typename Sink>
void KernelLaunchArgs(const Kernel& k, Sink& s) {
  s.UInt(kArgCorrelation, k.correlation());
  KernelPlacementArgs(k.stream(), k.device(), k.context(), s);
  GraphArgs(k.graph_id(), k.graph_node_id(), s);
}
// Both parts (shape may be null for a damaged trace).
template <typename Sink>
void KernelArgs(const Kernel& k, const KernelShape* shape, std::string_view mangled, Sink& s) {
  if (shape != nullptr) KernelShapeArgs(*shape, mangled, s);
  KernelLaunchArgs(k, s);
}

template <typename Sink>
void MemcpyArgs(const Memcpy& m, Sink& s) {
  s.Str(kArgKind, CopyKindName(m.copy_kind()));
  s.UInt(kArgBytes, m.bytes());
  s.Double(
      kArgBandwidth,
      BandwidthGBs(m.bytes(), static_cast<uint64_t>(m.start()),
                   static_cast<uint64_t>(EndTime(m.start(), std::max<int64_t>(m.duration(), 0)))));
  s.Str(kArgSrcKind, MemoryKindName(m.src_kind()));
  s.Str(kArgDstKind, MemoryKindName(m.dst_kind()));
  s.UInt(kArgCorrelation, m.correlation());
  s.UInt(kArgStream, m.stream());
  s.UInt(kArgDevice, m.device());
  if (m.peer()) {
    s.UInt(kArgSrcDevice, m.src_device());
    s.UInt(kArgDstDevice, m.dst_device());
  }
  GraphArgs(m.graph_id(), m.graph_node_id(), s);
}

template <typename Sink>
void MemsetArgs(const Memset& m, Sink& s) {
  s.UInt(kArgBytes, m.bytes());
  s.UInt(kArgValue, m.value());
  s.Str(kArgMemoryKind, MemoryKindName(m.memory_kind()));
  s.UInt(kArgCorrelation, m.correlation());
  s.UInt(kArgStream, m.stream());
  s.UInt(kArgDevice, m.device());
  GraphArgs(m.graph_id(), m.graph_node_id(), s);
}

template <typename Sink>
void ApiArgs(const ApiCall& a, Sink& s) {
  s.UInt(kArgCorrelation, a.correlation());
  s.Int(kArgReturnValue, a.return_value());
}

// `domain` is the domain's name ("" for the default domain).
template <typename Sink>
void NvtxRangeArgs(const NvtxRange& r, std::string_view domain, Sink& s) {
  if (r.domain() != 0) s.Str(kArgDomain, domain);
  if (r.category() != 0) s.UInt(kArgCategory, r.category());
  if (r.has_payload()) s.Payload(kArgPayload, r.payload());
  if (r.end_thread_id() != 0 && r.end_thread_id() != r.thread_id()) {
    s.UInt(kArgEndThread, r.end_thread_id());
  }
  if ((r.flags() & RECORD_FLAG_OPEN) != 0) s.Bool(kArgOpen, true);
}

template <typename Sink>
void NvtxMarkArgs(const NvtxMark& m, std::string_view domain, Sink& s) {
  if (m.domain() != 0) s.Str(kArgDomain, domain);
  if (m.has_payload()) s.Payload(kArgPayload, m.payload());
}

template <typename Sink>
void SyncArgs(const Synchronization& y, Sink& s) {
  s.UInt(kArgStream, y.stream());
  s.UInt(kArgContext, y.context());
  s.UInt(kArgCorrelation, y.correlation());
  if (y.event_id() != 0) s.UInt(kArgEventId, y.event_id());
  s.Int(kArgReturnValue, y.return_value());
}

template <typename Sink>
void OverheadArgs(const Overhead& o, Sink& s) {
  s.UInt(kArgKind, o.kind());
  if (o.thread_id() != 0) s.UInt(kArgThread, o.thread_id());
  s.UInt(kArgDevice, o.device());
  s.UInt(kArgCorrelation, o.correlation());
}

// The fixed arguments of a metric range; the values follow, named by the metric config.
template <typename Sink>
void MetricRangeArgs(const MetricRange& m, std::string_view domain, Sink& s) {
  if (m.domain() != 0) s.Str(kArgDomain, domain);
  s.UInt(kArgOccurrence, m.occurrence());
  s.UInt(kArgOccurrencesUsed, m.occurrences_used());
  if (m.sm_clock_khz() != 0) s.UInt(kArgSmClock, m.sm_clock_khz());
}

}  // namespace kp
