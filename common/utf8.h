// utf8.h: UTF-8 validation and repair without allocation, shared by the trace encoder (which
// repairs every string it writes) and the reader (which repairs what older or foreign writers
// left invalid, so a bad string never costs a whole chunk).
#pragma once

#include <cstddef>
#include <cstdint>

namespace kp {

// Length of the well-formed UTF-8 sequence at p[0..n) (1 to 4), or 0 if p[0] does not begin
// one (overlong forms, surrogates and code points above U+10FFFF are not well formed).
size_t Utf8SequenceLength(const unsigned char* p, size_t n);

// True if s[0..n) is entirely well-formed UTF-8.
bool IsValidUtf8(const char* s, size_t n);

// The repaired form of s[0..n) replaces every byte that does not begin a well-formed sequence
// with U+FFFD (3 bytes). Its size (== n when s is valid):
size_t RepairedUtf8Size(const char* s, size_t n);
// Writes the repaired form to out (RepairedUtf8Size bytes); returns the end.
char* WriteRepairedUtf8(const char* s, size_t n, char* out);

// Repairs s[0..n) in place at the same length: every offending byte becomes '?'. Used where the
// length is fixed (inside an encoded message). Returns the number of bytes replaced.
size_t RepairUtf8InPlace(char* s, size_t n);

}  // namespace kp
