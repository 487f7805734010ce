#include "inject/metrics/l2_evict.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kp {

namespace {

// The driver's user-space structures (names in the comments are the driver's).
struct RmAlloc {  // NVOS21_PARAMETERS
  uint32_t root, parent, object, cls;
  uint64_t params;
  uint32_t params_size, status;
};
struct RmControl {  // NVOS54_PARAMETERS
  uint32_t client, object, cmd, flags;
  uint64_t params;
  uint32_t params_size, status;
};
struct RmFree {  // NVOS00_PARAMETERS
  uint32_t root, parent, object, status;
};
struct PciInfo {  // nv_pci_info_t
  uint32_t domain;
  uint8_t bus, slot, function;
  uint16_t vendor_id, device_id;
};
struct CardInfo {  // nv_ioctl_card_info_t
  uint8_t valid;
  PciInfo pci;
  uint32_t gpu_id;
  uint16_t interrupt_line;
  uint64_t reg_address, reg_size, fb_address, fb_size;
  uint32_t minor_number;
  uint8_t dev_name[10];
};
struct GpuIdInfo {  // NV0000_CTRL_GPU_GET_ID_INFO_V2_PARAMS
  uint32_t gpu_id, gpu_flags, device_instance, subdevice_instance, sli_status, board_id,
      gpu_instance;
  int32_t numa_id;
};
struct DeviceParams {  // NV0080_ALLOC_PARAMETERS
  uint32_t device_id, client_share, target_client, target_device, flags;
  uint64_t va_space_size, va_start, va_limit;
  uint32_t va_mode;
};
struct FlushParams {  // NV2080_CTRL_FB_FLUSH_GPU_CACHE_PARAMS
  uint64_t addresses[500];
  uint32_t address_count, address_align;
  uint64_t block_bytes;
  uint32_t flags;
};
static_assert(sizeof(RmAlloc) == 32 && sizeof(RmControl) == 32 && sizeof(RmFree) == 16);
static_assert(sizeof(CardInfo) == 72 && sizeof(GpuIdInfo) == 32);
static_assert(sizeof(DeviceParams) == 56 && sizeof(FlushParams) == 4024);

// _IOWR('F', nr, size), the driver's ioctl encoding.
unsigned long Ioc(unsigned nr, size_t size) {
  return (3ul << 30) | (static_cast<unsigned long>(size) << 16) | ('F' << 8) | nr;
}
constexpr unsigned kEscCardInfo = 200, kEscRegisterFd = 201;
constexpr unsigned kEscFree = 0x29, kEscControl = 0x2A, kEscAlloc = 0x2B;
constexpr uint32_t kClassRootClient = 0x41, kClassDevice = 0x80, kClassSubdevice = 0x2080;
constexpr uint32_t kCtrlGetIdInfoV2 = 0x205, kCtrlFlushGpuCache = 0x2080130e;
// Aperture video memory (bits 1:0 = 0), write back (bit 2), invalidate (bit 3), the whole cache
// rather than an address list (bit 4).
constexpr uint32_t kFlushEvictAll = (1u << 2) | (1u << 3) | (1u << 4);
constexpr size_t kMaxCards = 32;

// ioctl, again while a signal interrupts it (the driver's waits are interruptible).
int Ioctl(int fd, unsigned long request, void* arg) {
  int r;
  do {
    r = ::ioctl(fd, request, arg);
  } while (r != 0 && errno == EINTR);
  return r;
}

Status Error(const std::string& what) { return Status::Error("driver L2 flush: " + what); }
Status Errno(const std::string& what) { return Error(what + ": " + std::strerror(errno)); }
Status RmStatus(const char* what, uint32_t status) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%x", status);
  return Error(std::string(what) + ": the driver answered status " + hex);
}

}  // namespace

// One request on the control file: the ioctl, then the driver's own status in the request.
Status DriverL2Evict::Request(unsigned escape, void* request, size_t size, const uint32_t* status,
                              const char* what) {
  if (Ioctl(ctl_, Ioc(escape, size), request) != 0) return Errno(what);
  if (*status != 0) return RmStatus(what, *status);
  return Status();
}

Status DriverL2Evict::Alloc(uint32_t parent, uint32_t cls, void* params, uint32_t size,
                            const char* what, uint32_t* handle) {
  RmAlloc a{};
  a.root = client_;
  a.parent = parent;
  a.cls = cls;
  a.params = reinterpret_cast<uintptr_t>(params);
  a.params_size = size;
  Status s = Request(kEscAlloc, &a, sizeof a, &a.status, what);
  if (s.ok()) *handle = a.object;
  return s;
}

Status DriverL2Evict::Control(uint32_t object, uint32_t cmd, void* params, uint32_t size,
                              const char* what) {
  RmControl c{};
  c.client = client_;
  c.object = object;
  c.cmd = cmd;
  c.params = reinterpret_cast<uintptr_t>(params);
  c.params_size = size;
  return Request(kEscControl, &c, sizeof c, &c.status, what);
}

Status DriverL2Evict::Open(unsigned domain, unsigned bus, unsigned device,
                           const std::string& control_node) {
  Close();
  Status s = [&]() -> Status {
    ctl_ = ::open(control_node.c_str(), O_RDWR | O_CLOEXEC);
    if (ctl_ < 0) return Errno("opening " + control_node);
    if (Status a = Alloc(0, kClassRootClient, nullptr, 0, "allocating a client", &client_); !a.ok())
      return a;
    CardInfo cards[kMaxCards] = {};
    if (Ioctl(ctl_, Ioc(kEscCardInfo, sizeof cards), cards) != 0) return Errno("listing the GPUs");
    const CardInfo* card = nullptr;
    for (const CardInfo& c : cards)
      if (c.valid && c.pci.domain == domain && c.pci.bus == bus && c.pci.slot == device) card = &c;
    if (!card) {
      char pci[32];
      std::snprintf(pci, sizeof pci, "%04x:%02x:%02x", domain, bus, device);
      return Error(std::string("the driver lists no GPU at PCI ") + pci);
    }
    const std::string node = "/dev/nvidia" + std::to_string(card->minor_number);
    dev_ = ::open(node.c_str(), O_RDWR | O_CLOEXEC);
    if (dev_ < 0) return Errno("opening " + node);
    int ctl_fd = ctl_;
    if (Ioctl(dev_, Ioc(kEscRegisterFd, sizeof ctl_fd), &ctl_fd) != 0)
      return Errno("registering " + node);
    GpuIdInfo id{};
    id.gpu_id = card->gpu_id;
    if (Status c = Control(client_, kCtrlGetIdInfoV2, &id, sizeof id, "reading the GPU's ids");
        !c.ok())
      return c;
    DeviceParams dp{};
    dp.device_id = id.device_instance;
    uint32_t device_handle = 0, subdevice_id = 0, subdevice = 0;
    if (Status a =
            Alloc(client_, kClassDevice, &dp, sizeof dp, "allocating the device", &device_handle);
        !a.ok())
      return a;
    if (Status a = Alloc(device_handle, kClassSubdevice, &subdevice_id, sizeof subdevice_id,
                         "allocating the subdevice", &subdevice);
        !a.ok())
      return a;
    subdevice_ = subdevice;
    return Status();
  }();
  if (!s.ok()) Close();
  return s;
}

Status DriverL2Evict::Evict() {
  if (!ready()) return Error("not open");
  FlushParams p{};
  p.flags = kFlushEvictAll;
  return Control(subdevice_, kCtrlFlushGpuCache, &p, sizeof p, "flushing the L2");
}

void DriverL2Evict::Close() {
  if (client_ != 0) {
    // Freeing the client frees the device and subdevice under it.
    RmFree f{};
    f.root = f.object = client_;
    Ioctl(ctl_, Ioc(kEscFree, sizeof f), &f);
  }
  if (dev_ >= 0) ::close(dev_);
  if (ctl_ >= 0) ::close(ctl_);
  ctl_ = dev_ = -1;
  client_ = subdevice_ = 0;
}

}  // namespace kp
