// nvtx_payload_text.h: one text form of an NVTX payload for every exporter (CSV cell, Perfetto
// and Chrome string args), so the formats agree: integers in decimal, floating point in the
// shortest form that reads back exactly (std::to_chars), "" when there is no payload.
#pragma once

#include <charconv>
#include <string>

#include "kptrace.pb.h"

namespace kp {

inline std::string NvtxPayloadText(const NvtxPayload& p) {
  char tmp[32];
  switch (p.value_case()) {
    case NvtxPayload::kU64:
      return std::to_string(p.u64());
    case NvtxPayload::kI64:
      return std::to_string(p.i64());
    case NvtxPayload::kU32:
      return std::to_string(p.u32());
    case NvtxPayload::kI32:
      return std::to_string(p.i32());
    case NvtxPayload::kF64:
      return std::string(tmp, std::to_chars(tmp, tmp + sizeof tmp, p.f64()).ptr);
    case NvtxPayload::kF32:
      return std::string(tmp, std::to_chars(tmp, tmp + sizeof tmp, p.f32()).ptr);
    default:
      return "";
  }
}

}  // namespace kp
