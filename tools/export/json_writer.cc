#include "tools/export/json_writer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

namespace kp {

namespace {

// True if none of the 8 bytes at p needs escaping: no control character, no '"', no '\\' and
// no byte >= 0x80 (SWAR: one test per word instead of four per byte).
inline bool PlainAscii8(const unsigned char* p) {
  uint64_t x;
  std::memcpy(&x, p, 8);
  constexpr uint64_t kOnes = 0x0101010101010101ull;
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  const uint64_t below_space = x - kOnes * 0x20;
  const uint64_t quote = (x ^ (kOnes * '"')) - kOnes;
  const uint64_t backslash = (x ^ (kOnes * '\\')) - kOnes;
  // A byte >= 0x80 sets its high bit in x; otherwise a high bit in one of the differences
  // marks a byte < 0x20, == '"' or == '\\' (all bytes < 0x80, so no false borrows).
  return ((x | ((below_space | quote | backslash) & ~x)) & kHigh) == 0;
}

}  // namespace

void JsonWriter::Key(std::string_view key) {
  String(key);
  buf_.Put(':');
  after_key_ = true;
}

bool JsonWriter::IsPlain(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* end = p + s.size();
  while (end - p >= 8 && PlainAscii8(p)) p += 8;
  while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') ++p;
  return p == end;
}

void JsonWriter::String(std::string_view s) {
  Separator();
  static const char kHex[] = "0123456789abcdef";
  buf_.Put('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char* end = p + s.size();
  while (p < end) {
    unsigned char c = *p;
    if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
      // Copy the run of plain ASCII in one go, finding its end 8 bytes at a time.
      const unsigned char* run = p;
      while (end - p >= 8 && PlainAscii8(p)) p += 8;
      while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\') ++p;
      buf_.Append(reinterpret_cast<const char*>(run), p - run);
      continue;
    }
    if (c < 0x80) {
      switch (c) {
        case '"':
          buf_.Append("\\\"");
          break;
        case '\\':
          buf_.Append("\\\\");
          break;
        case '\n':
          buf_.Append("\\n");
          break;
        case '\r':
          buf_.Append("\\r");
          break;
        case '\t':
          buf_.Append("\\t");
          break;
        case '\b':
          buf_.Append("\\b");
          break;
        case '\f':
          buf_.Append("\\f");
          break;
        default: {
          char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
          buf_.Append(esc, 6);
        }
      }
      ++p;
      continue;
    }
    // UTF-8 sequence: validate (no overlongs, no surrogates, <= U+10FFFF), else U+FFFD.
    int len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    }
    bool valid = len != 0 && end - p >= len;
    for (int i = 1; valid && i < len; ++i) {
      if ((p[i] & 0xC0) != 0x80) valid = false;
      cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (valid) {
      if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
          (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
        valid = false;
      }
    }
    if (valid) {
      buf_.Append(reinterpret_cast<const char*>(p), len);
      p += len;
    } else {
      buf_.Append("\xEF\xBF\xBD");
      ++p;  // resynchronise on the next byte
    }
  }
  buf_.Put('"');
}

void JsonWriter::Double(double v) {
  Separator();
  if (!std::isfinite(v)) {
    buf_.Append("null");  // JSON has no NaN/Inf
    return;
  }
  // printf's "%.*g" with the least precision (at least 6) that reads back exactly. The shortest
  // round-trip digit count comes from to_chars; to_chars with a precision is printf's %g.
  char tmp[48];
  auto shortest = std::to_chars(tmp, tmp + sizeof(tmp), v, std::chars_format::scientific);
  int digits = 0;
  for (const char* c = tmp; c < shortest.ptr && *c != 'e'; ++c) digits += (*c >= '0' && *c <= '9');
  auto r =
      std::to_chars(tmp, tmp + sizeof(tmp), v, std::chars_format::general, std::max(digits, 6));
  buf_.Append(tmp, static_cast<size_t>(r.ptr - tmp));
}

void JsonWriter::Bool(bool v) {
  Separator();
  buf_.Append(v ? "true" : "false");
}

bool JsonWriter::Flush(bool force) {
  // 1 MiB: the bytes are still in the CPU cache when they are copied to the file.
  if (!force && buf_.size() < (1u << 20)) return !failed_;
  if (!failed_ && out_ != nullptr && !buf_.WriteTo(out_)) failed_ = true;
  buf_.clear();
  return !failed_;
}

}  // namespace kp
