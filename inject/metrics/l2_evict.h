// l2_evict.h: the kernel driver's own flush of a GPU's L2, asked for the way any unprivileged
// driver client may: a resource-manager client of kp's own on /dev/nvidiactl, the GPU's device
// and subdevice objects under it, and the subdevice's FLUSH_GPU_CACHE control with write-back
// and invalidate of the whole cache for video memory, which the driver carries out as an L2
// evict (every dirty line written back, every line dropped). It is what ncu's default
// --cache-control all leaves: on the H200, ncu --cache-control none after this evict reads
// every lts__t_* sector count within 0.25 % of ncu's own flush after every program history
// tried, where a read sweep + discard (l2_sweep.h) read up to 2.6 % less (and the metrics suite
// up to 5.6 % less)
// (bench/results/l2_probes_h200.md, probe J).
//
// The evict acts when called, not in stream order (a caller that needs the context's earlier
// work out of the L2 synchronizes first), on the whole GPU's L2, under every process and
// context on it, as ncu's flush does. It blocks until the driver is done (~0.5 ms on the H200). The
// structures follow the driver's user-space interface (nv-ioctl.h, nvos.h, ctrl0000gpu.h, cl0080.h,
// cl2080.h, ctrl2080fb.h of NVIDIA's open kernel modules); each size is checked at compile time
// against the one the driver expects. Linux only; no CUDA call.
//
// Not thread-safe: one owner (the measuring thread of a context's session).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace kp {

class DriverL2Evict {
 public:
  DriverL2Evict() = default;
  DriverL2Evict(const DriverL2Evict&) = delete;
  DriverL2Evict& operator=(const DriverL2Evict&) = delete;
  ~DriverL2Evict() { Close(); }

  // Opens a client for the GPU at PCI domain:bus:device (cuDeviceGetAttribute's
  // PCI_DOMAIN_ID, PCI_BUS_ID, PCI_DEVICE_ID). `control_node` is the driver's control device
  // (tests name another file). An error names the step that failed and why; what was made is
  // given back.
  Status Open(unsigned domain, unsigned bus, unsigned device,
              const std::string& control_node = "/dev/nvidiactl");
  // Writes back every dirty line of the GPU's L2 and invalidates every line. An error when not
  // open or when the driver refuses.
  Status Evict();
  // Frees the client and closes the files. Idempotent.
  void Close();

  bool ready() const { return subdevice_ != 0; }

 private:
  Status Request(unsigned escape, void* request, size_t size, const uint32_t* status,
                 const char* what);
  Status Alloc(uint32_t parent, uint32_t cls, void* params, uint32_t size, const char* what,
               uint32_t* handle);
  Status Control(uint32_t object, uint32_t cmd, void* params, uint32_t size, const char* what);

  int ctl_ = -1, dev_ = -1;
  uint32_t client_ = 0, subdevice_ = 0;
};

}  // namespace kp
