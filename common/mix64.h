// mix64.h: SplitMix64's finalizer, a fast 64-bit mix whose every input bit changes about half
// of the output bits. For ids and jitter that must differ between nearby inputs; not for
// anything secret.
#pragma once

#include <cstdint>

namespace kp {

inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace kp
