// huge_page_heap.cc: see huge_page_heap.h.
#include "tools/kptrace/huge_page_heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace kp {

std::string TransparentHugePageMode(const std::string& enabled_file_text) {
  const size_t open = enabled_file_text.find('[');
  const size_t close = enabled_file_text.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return enabled_file_text.substr(open + 1, close - open - 1);
}

HugePageHeap BackHeapWithHugePages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream text;
  text << in.rdbuf();
  const std::string mode = TransparentHugePageMode(text.str());
  if (mode == "always") return HugePageHeap::kAlways;
  if (mode != "madvise") return HugePageHeap::kNotOffered;

  // Blocks up to 64 MiB come from the heap (not from mmap, which the advice would not cover),
  // and free memory at the heap's top stays there (given back and grown again, it would come
  // back without the advice).
  if (mallopt(M_MMAP_THRESHOLD, 64 << 20) == 0 || mallopt(M_TRIM_THRESHOLD, 1 << 30) == 0) {
    return HugePageHeap::kFailed;
  }
  // A block larger than the heap's free top makes malloc grow the heap by the block plus
  // M_TOP_PAD: the reservation. The pad goes back to glibc's default afterwards.
  constexpr size_t kGrow = size_t{8} << 20;
  if (mallopt(M_TOP_PAD, static_cast<int>(kHugeHeapBytes)) == 0) return HugePageHeap::kFailed;
  void* block = std::malloc(kGrow);
  mallopt(M_TOP_PAD, 128 << 10);
  if (block == nullptr) return HugePageHeap::kFailed;
  const auto begin_addr = reinterpret_cast<uintptr_t>(block);
  std::free(block);
  const auto end_addr = reinterpret_cast<uintptr_t>(sbrk(0));
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (begin_addr + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = end_addr & ~(kHuge - 1);
  // The block must lie in the brk heap just below its top (not in an mmap region, which is
  // what malloc falls back to when the heap cannot grow).
  if (end_addr == static_cast<uintptr_t>(-1) || begin_addr > end_addr || end <= begin + kGrow) {
    return HugePageHeap::kFailed;
  }
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) != 0) {
    return HugePageHeap::kFailed;
  }
  return HugePageHeap::kAdvised;
}

}  // namespace kp
