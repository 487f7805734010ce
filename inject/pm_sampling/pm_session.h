// pm_session.h: one GPU's PM sampling session as the sampler's thread logic sees it
// (inject/pm_sampling/pm_sampling.cc). The CUPTI implementation is in pm_sampler.cc; unit
// tests drive the thread and exit logic with a fake one (tests/unit/pm_sampling_lifecycle_test).
//
// Order of calls, all from one thread at a time: Start; then Decode any number of times; then,
// to end it, Stop, one last Decode (the samples completed since the previous one), Close.
// Close is also called after a failed or busy Start (it frees what the attempt set up) and is
// idempotent; nothing is called after Close except Close.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace kp {

// Decoded samples on their way to the encoder thread.
struct PmSampleBatch {
  std::vector<uint64_t> start, end;
  std::vector<double> values;  // counters().size() per sample
  uint64_t dropped = 0, overflows = 0;
  bool empty() const { return start.empty() && dropped == 0 && overflows == 0; }
};

// What a decode that did not fail says (a failed one returns its reason instead; its samples
// are lost, later decodes may work).
enum class PmDecode {
  kOk,
  kOverflow,  // the hardware buffer overflowed: nothing more can be decoded in this session
};

class PmSession {
 public:
  virtual ~PmSession() = default;
  // Counter availability, config image, Enable, SetConfig, Start. OK: sampling runs. An error
  // says why not, and busy() which of the two cases it is.
  virtual Status Start() = 0;
  // After a failed Start: true when another session (process, ncu, DCGM) holds the GPU's
  // counters (try again later), false when this GPU cannot be sampled in this process
  // (unsupported, bad counters, permission).
  virtual bool busy() const = 0;
  // After a successful Start: the chip and the counters actually sampled (the `gpu` set drops
  // what the chip lacks).
  virtual const std::string& chip() const = 0;
  virtual const std::vector<std::string>& counters() const = 0;
  // Drains the hardware buffer into `batch`: kOk or kOverflow, or why this decode failed.
  virtual StatusOr<PmDecode> Decode(PmSampleBatch* batch) = 0;
  // cuptiPmSamplingStop: the GPU stops writing samples; a Decode afterwards drains the rest.
  virtual void Stop() = 0;
  // Disable and free everything the session holds. Idempotent.
  virtual void Close() = 0;
};

// The sampler's thread decodes every 512 intervals, at least every 10 ms and at most every
// 200 ms.
inline uint64_t PmDecodePeriodMs(uint64_t interval_ns) {
  const uint64_t ms = interval_ns * 512 / 1000000;
  return ms < 10 ? 10 : ms > 200 ? 200 : ms;
}

// Samples the counter-data image holds: four decode periods' worth (a decode that comes late
// still fits), from 64 to 2048. Initializing the image before each decode costs in proportion to
// its size (about 20 ms for 2048 samples of the `gpu` set on the H200 host), so it is not sized
// for the worst case.
inline uint32_t PmImageSamples(uint64_t interval_ns) {
  const uint64_t per_period = PmDecodePeriodMs(interval_ns) * 1000000 / interval_ns;
  const uint64_t n = 4 * per_period;
  return static_cast<uint32_t>(n < 64 ? 64 : n > 2048 ? 2048 : n);
}

// One session per GPU (device index), made on the sampler's own thread.
using PmSessionFactory = std::function<std::unique_ptr<PmSession>(uint32_t device)>;

// The CUPTI session (pm_sampler.cc): `counters` as configured, `gpu_set` when they are the
// named set (then counters the chip lacks are dropped rather than refused).
std::unique_ptr<PmSession> MakeCuptiPmSession(uint32_t device, std::vector<std::string> counters,
                                              bool gpu_set, uint64_t interval_ns);

}  // namespace kp
