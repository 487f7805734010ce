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

  // Blocks up to 64 MiB (32 MiB where an older glibc caps the threshold there) come from the
  // heap, not from mmap, which the advice would not cover; and free memory at the heap's top
  // stays there (given back and grown again, it would come back without the advice).
  if ((mallopt(M_MMAP_THRESHOLD, 64 << 20) == 0 && mallopt(M_MMAP_THRESHOLD, 32 << 20) == 0) ||
      mallopt(M_TRIM_THRESHOLD, 1 << 30) == 0) {
    return HugePageHeap::kFailed;
  }
  // A block larger than the heap's free top makes malloc grow the heap by the block plus
  // M_TOP_PAD: the reservation. The pad goes back to glibc's default afterwards.
  constexpr size_t kGrow = size_t{8} << 20;
  const auto top_before = reinterpret_cast<uintptr_t>(sbrk(0));
  if (mallopt(M_TOP_PAD, static_cast<int>(kHugeHeapBytes)) == 0) return HugePageHeap::kFailed;
  void* block = std::malloc(kGrow);
  mallopt(M_TOP_PAD, 128 << 10);
  if (block == nullptr) return HugePageHeap::kFailed;
  const auto begin_addr = reinterpret_cast<uintptr_t>(block);
  std::free(block);
  const auto top_after = reinterpret_cast<uintptr_t>(sbrk(0));
  // The block must be the brk heap's, just below its new top: the heap grew by the pad, and the
  // block starts in the free top it had (not in an mmap region, where malloc goes when the heap
  // cannot grow, above or below the heap depending on the address-space layout).
  constexpr uintptr_t kNone = static_cast<uintptr_t>(-1);
  if (top_before == kNone || top_after == kNone || top_after < top_before + kHugeHeapBytes ||
      begin_addr > top_before || top_after - begin_addr > kGrow + kHugeHeapBytes + (kGrow << 3)) {
    return HugePageHeap::kFailed;
  }
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  const uintptr_t begin = (begin_addr + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = top_after & ~(kHuge - 1);
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) != 0) {
    return HugePageHeap::kFailed;
  }
  return HugePageHeap::kAdvised;
}

}  // namespace kp
