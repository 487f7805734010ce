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

namespace kp {

// Decoded samples on their way to the encoder thread.
struct PmSampleBatch {
  std::vector<uint64_t> start, end;
  std::vector<double> values;  // counters().size() per sample
  uint64_t dropped = 0, overflows = 0;
  bool empty() const { return start.empty() && dropped == 0 && overflows == 0; }
};

enum class PmStart {
  kStarted,  // sampling runs
  kBusy,     // another session (process, ncu, DCGM) holds the GPU's counters: try again later
  kFailed,   // cannot sample this GPU in this process (unsupported, bad counters, permission)
};

enum class PmDecode {
  kOk,
  kOverflow,  // the hardware buffer overflowed: nothing more can be decoded in this session
  kFailed,    // this decode's samples are lost; later decodes may work
};

class PmSession {
 public:
  virtual ~PmSession() = default;
  // Counter availability, config image, Enable, SetConfig, Start. *error says why it is not
  // kStarted.
  virtual PmStart Start(std::string* error) = 0;
  // After kStarted: the chip and the counters actually sampled (the `gpu` set drops what the
  // chip lacks).
  virtual const std::string& chip() const = 0;
  virtual const std::vector<std::string>& counters() const = 0;
  // Drains the hardware buffer into `batch`. *error says why on kFailed.
  virtual PmDecode Decode(PmSampleBatch* batch, std::string* error) = 0;
  // cuptiPmSamplingStop: the GPU stops writing samples; a Decode afterwards drains the rest.
  virtual void Stop() = 0;
  // Disable and free everything the session holds. Idempotent.
  virtual void Close() = 0;
};

// One session per GPU (device index), made on the sampler's own thread.
using PmSessionFactory = std::function<std::unique_ptr<PmSession>(uint32_t device)>;

// The CUPTI session (pm_sampler.cc): `counters` as configured, `gpu_set` when they are the
// named set (then counters the chip lacks are dropped rather than refused).
std::unique_ptr<PmSession> MakeCuptiPmSession(uint32_t device, std::vector<std::string> counters,
                                              bool gpu_set, uint64_t interval_ns);

}  // namespace kp
