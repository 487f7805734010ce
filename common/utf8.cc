#include "common/utf8.h"

#include <cstring>

namespace kp {

size_t Utf8SequenceLength(const unsigned char* p, size_t n) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  const size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || len > n) return 0;
  uint32_t cp = c & (0x7Fu >> len);
  for (size_t k = 1; k < len; ++k) {
    if ((p[k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[k] & 0x3Fu);
  }
  static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

bool IsValidUtf8(const char* s, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {  // ASCII runs are the common case
      ++i;
      continue;
    }
    const size_t len = Utf8SequenceLength(p + i, n - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

size_t RepairedUtf8Size(const char* s, size_t n) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  size_t i = 0, size = n;
  while (i < n) {
    const size_t len = p[i] < 0x80 ? 1 : Utf8SequenceLength(p + i, n - i);
    if (len == 0) {
      size += 2;  // one byte becomes three
      ++i;
    } else {
      i += len;
    }
  }
  return size;
}

char* WriteRepairedUtf8(const char* s, size_t n, char* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  size_t i = 0;
  while (i < n) {
    const size_t len = p[i] < 0x80 ? 1 : Utf8SequenceLength(p + i, n - i);
    if (len == 0) {
      std::memcpy(out, "\xEF\xBF\xBD", 3);
      out += 3;
      ++i;
    } else {
      std::memcpy(out, s + i, len);
      out += len;
      i += len;
    }
  }
  return out;
}

size_t RepairUtf8InPlace(char* s, size_t n) {
  auto* p = reinterpret_cast<unsigned char*>(s);
  size_t i = 0, replaced = 0;
  while (i < n) {
    const size_t len = p[i] < 0x80 ? 1 : Utf8SequenceLength(p + i, n - i);
    if (len == 0) {
      p[i++] = '?';
      ++replaced;
    } else {
      i += len;
    }
  }
  return replaced;
}

}  // namespace kp
