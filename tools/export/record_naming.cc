#include "tools/export/record_naming.h"

namespace kp {

const char* CopyKindName(int kind) {
  static const char* const kNames[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                       "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
  return kind >= 0 && kind <= 10 ? kNames[kind] : "unknown";
}

const char* MemoryKindName(int kind) {
  static const char* const kNames[] = {"unknown", "pageable", "pinned",        "device",
                                       "array",   "managed",  "device static", "managed static"};
  return kind >= 0 && kind <= 7 ? kNames[kind] : "unknown";
}

const char* SyncTypeLabel(int type) {
  static const char* const kNames[] = {"Synchronize (unknown kind)", "cudaEventSynchronize",
                                       "cudaStreamWaitEvent", "cudaStreamSynchronize",
                                       "cudaDeviceSynchronize"};
  return type >= 0 && type <= 4 ? kNames[type] : kNames[0];
}

std::string OverheadLabel(std::string_view name, uint32_t kind) {
  if (!name.empty()) return "CUPTI overhead: " + std::string(name);
  return "CUPTI overhead (kind " + std::to_string(kind) + ")";
}

bool ApiStartsGpuWork(std::string_view name) {
  return name.find("Launch") != std::string_view::npos ||
         name.find("Memcpy") != std::string_view::npos ||
         name.find("Memset") != std::string_view::npos;
}

std::string Dim3(uint32_t x, uint32_t y, uint32_t z) {
  std::string text = "(";
  text += std::to_string(x);
  text += ',';
  text += std::to_string(y);
  text += ',';
  text += std::to_string(z);
  return text + ')';
}

std::string CommandLabel(const Header* header) {
  if (header == nullptr || header->command_line_size() == 0) return "unknown process";
  std::string name = header->command_line(0);
  size_t slash = name.rfind('/');
  if (slash != std::string::npos) name = name.substr(slash + 1);
  for (int i = 1; i < header->command_line_size(); ++i) {
    name += ' ';
    name += header->command_line(i);
  }
  if (name.size() > 160) name = name.substr(0, 157) + "...";
  return name;
}

std::string ProcessGroupName(const Header* header, uint32_t pid) {
  const std::string host =
      header != nullptr && !header->hostname().empty() ? header->hostname() : "unknown";
  if (header != nullptr && header->rank() >= 0) {
    return "rank " + std::to_string(header->rank()) + " (pid " + std::to_string(pid) + ", host " +
           host + ")";
  }
  return "pid " + std::to_string(pid) + " (host " + host + ")";
}

int64_t ProcessSortIndex(const Header* header, int file_index) {
  // Ranks first, in rank order; then the processes without a rank, in input order.
  if (header != nullptr && header->rank() >= 0) return header->rank();
  return (int64_t{1} << 30) + file_index;
}

std::string ThreadLabel(uint32_t tid, std::string_view recorded_name) {
  if (!recorded_name.empty()) return std::string(recorded_name);
  return "thread " + std::to_string(tid);
}

std::string LaneName(std::string_view track_name, uint32_t lane) {
  return std::string(track_name) + " lane " + std::to_string(lane + 1);
}

}  // namespace kp
