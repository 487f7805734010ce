// mix64.h: one SplitMix64 step (add the golden-ratio gamma, then mix), a fast 64-bit hash whose
// every input bit changes about half of the output bits. For ids and jitter that must differ
// between nearby inputs; not for anything secret.
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
