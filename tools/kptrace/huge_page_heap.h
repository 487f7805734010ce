// huge_page_heap.h: the reading commands (info, convert, summary, report, diff) keep a chunk's
// records, slices and output in tens of MiB of heap that they read out of stored order. On 4 KiB
// pages those reads miss the TLB and each page is a fault; on 2 MiB transparent huge pages far
// fewer do (CPU time measured in docs/benchmarks.md).
//
// Most kernels give huge pages only to memory that asks for them (THP mode "madvise"), and glibc's
// malloc asks only when GLIBC_TUNABLES says so at start-up. BackHeapWithHugePages asks for it from
// inside: it reserves kHugeHeapBytes at the top of malloc's main heap (address space only; pages
// come when touched) and marks that range MADV_HUGEPAGE; malloc then keeps blocks below 64 MiB
// (32 MiB on an older glibc) in its heap instead of separate mappings, and never gives the
// heap's top back to the system. Blocks past the reserved range come on ordinary pages. Call it
// first thing, in a command that starts no other program (`kptrace run` does not call it).
#pragma once

#include <cstddef>
#include <string>

namespace kp {

inline constexpr size_t kHugeHeapBytes = size_t{256} << 20;

enum class HugePageHeap {
  kAdvised,     // THP "madvise": the reserved heap range is marked MADV_HUGEPAGE
  kAlways,      // THP "always": every anonymous range gets huge pages already; nothing done
  kNotOffered,  // THP "never", or no THP in this kernel: nothing done
  kFailed,      // THP "madvise", but the heap could not be reserved or marked (malloc's
                // thresholds above may have been set; the program runs as it would otherwise)
};

// The kernel's THP mode from the text of /sys/kernel/mm/transparent_hugepage/enabled (the
// bracketed word: "always", "madvise" or "never"); "" when it cannot be read.
std::string TransparentHugePageMode(const std::string& enabled_file_text);

HugePageHeap BackHeapWithHugePages();

}  // namespace kp
