// json_writer.h: a streaming JSON writer into an OutputBuffer, flushed to a FILE in large writes.
// Used by the Chrome trace-event exporter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tools/export/output_buffer.h"

namespace kp {

// A streaming JSON writer: commas, nesting and string escaping (control characters, quotes,
// backslashes; invalid UTF-8 becomes U+FFFD) are its job, never the caller's.
class JsonWriter {
 public:
  // `reserve`: the buffer's first size (a writer that only builds a short fragment needs little).
  explicit JsonWriter(FILE* out, size_t reserve = size_t{1} << 20) : out_(out) {
    buf_.Reserve(reserve);
  }
  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  void Key(std::string_view key);
  // A key the program spells itself (a literal, an argument name) that needs no escaping:
  // copied as is (hot: several per event).
  void KeyPlain(std::string_view key);
  void String(std::string_view s);
  // A string the caller knows needs no escaping (IsPlain): copied between quotes.
  void PlainString(std::string_view s);
  // Object members the program spells itself ("ph":"X","cat":"kernel"), copied as they are.
  void PlainMembers(std::string_view members);
  // True if String(s) would copy s unchanged (printable ASCII, no quote or backslash).
  static bool IsPlain(std::string_view s);
  void UInt(uint64_t v);
  void Int(int64_t v);
  void Double(double v);
  void Bool(bool v);
  // A number of ns written as µs with exactly three decimals ("12.345").
  void MicrosFromNs(int64_t ns);
  // A whole member, "key":value, with a key KeyPlain could take: the same bytes as KeyPlain
  // and then the value's call, in one step (hot: most members of an event).
  void UIntMember(std::string_view key, uint64_t v);
  void IntMember(std::string_view key, int64_t v);
  void MicrosMember(std::string_view key, int64_t ns);
  // Two MicrosMember calls in one step (an event's "ts" and "dur").
  void MicrosMembers(std::string_view key1, int64_t ns1, std::string_view key2, int64_t ns2);
  // UIntMember, then PlainMembers(members), in one step (a launch arrow's end: "bind_id" and
  // "flow_in" or "flow_out").
  void UIntMemberThen(std::string_view key, uint64_t v, std::string_view members);
  // Writes out the buffer if it is large (or always, with force). False after a write error.
  bool Flush(bool force = false);
  // A line break outside any value (the end of the document).
  void Newline() { buf_.Put('\n'); }
  std::string buffer() const { return std::string(buf_.view()); }  // tests

 private:
  void Separator();
  void Digits(uint64_t v);
  // Separator, then "key": at the buffer's end (reserved: key.size() + 4 bytes, with the comma);
  // returns the end, not yet advanced to.
  char* MemberKey(std::string_view key);
  static char* Micros(char* p, int64_t ns);  // MicrosFromNs's text at p (24 bytes); the end
  FILE* out_;
  OutputBuffer buf_;
  std::vector<char>
      first_;  // per open container: nothing written in it yet (not vector<bool>: hot)
  bool after_key_ = false;
  bool failed_ = false;
};

// The hot members, inline: an event is a dozen of these calls.
inline void JsonWriter::Separator() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) buf_.Put(',');
    first_.back() = false;
  }
}

inline void JsonWriter::BeginObject() {
  Separator();
  buf_.Put('{');
  first_.push_back(true);
}
inline void JsonWriter::EndObject() {
  buf_.Put('}');
  first_.pop_back();
}
inline void JsonWriter::BeginArray() {
  Separator();
  buf_.Put('[');
  first_.push_back(true);
}
inline void JsonWriter::EndArray() {
  buf_.Put(']');
  first_.pop_back();
}

inline void JsonWriter::KeyPlain(std::string_view key) {
  buf_.Reserve(key.size() + 4);
  buf_.Advance(static_cast<size_t>(MemberKey(key) - buf_.Tail()));
  after_key_ = true;
}

inline void JsonWriter::PlainString(std::string_view s) {
  Separator();
  buf_.Reserve(s.size() + 2);
  char* p = buf_.Tail();
  *p++ = '"';
  if (!s.empty()) std::memcpy(p, s.data(), s.size());  // a null source is UB even for 0
  p[s.size()] = '"';
  buf_.Advance(s.size() + 2);
}

inline void JsonWriter::PlainMembers(std::string_view members) {
  Separator();
  buf_.Append(members);
}

inline void JsonWriter::Digits(uint64_t v) {
  buf_.Reserve(20);
  char* p = buf_.Tail();
  buf_.Advance(static_cast<size_t>(WriteDecimal(p, v) - p));
}

inline void JsonWriter::UInt(uint64_t v) {
  Separator();
  Digits(v);
}

inline void JsonWriter::Int(int64_t v) {
  Separator();
  buf_.Reserve(21);
  buf_.Advance(static_cast<size_t>(WriteSignedDecimal(buf_.Tail(), v) - buf_.Tail()));
}

inline char* JsonWriter::Micros(char* p, int64_t ns) {
  const uint64_t a = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  if (ns < 0) *p++ = '-';
  p = WriteDecimal(p, a / 1000);
  const auto frac = static_cast<uint32_t>(a % 1000);
  p[0] = '.';
  p[1] = static_cast<char>('0' + frac / 100);
  p[2] = static_cast<char>('0' + frac / 10 % 10);
  p[3] = static_cast<char>('0' + frac % 10);
  return p + 4;
}

inline void JsonWriter::MicrosFromNs(int64_t ns) {
  Separator();
  buf_.Reserve(24);
  buf_.Advance(static_cast<size_t>(Micros(buf_.Tail(), ns) - buf_.Tail()));
}

inline char* JsonWriter::MemberKey(std::string_view key) {
  Separator();
  char* p = buf_.Tail();
  *p++ = '"';
  if (!key.empty()) std::memcpy(p, key.data(), key.size());  // a null source is UB even for 0
  p += key.size();
  *p++ = '"';
  *p++ = ':';
  return p;
}

inline void JsonWriter::UIntMember(std::string_view key, uint64_t v) {
  buf_.Reserve(key.size() + 4 + 20);
  char* p = MemberKey(key);
  buf_.Advance(static_cast<size_t>(WriteDecimal(p, v) - buf_.Tail()));
}

inline void JsonWriter::IntMember(std::string_view key, int64_t v) {
  buf_.Reserve(key.size() + 4 + 21);
  char* p = MemberKey(key);
  buf_.Advance(static_cast<size_t>(WriteSignedDecimal(p, v) - buf_.Tail()));
}

inline void JsonWriter::MicrosMember(std::string_view key, int64_t ns) {
  buf_.Reserve(key.size() + 4 + 24);
  char* p = MemberKey(key);
  buf_.Advance(static_cast<size_t>(Micros(p, ns) - buf_.Tail()));
}

inline void JsonWriter::MicrosMembers(std::string_view key1, int64_t ns1, std::string_view key2,
                                      int64_t ns2) {
  buf_.Reserve(key1.size() + key2.size() + 8 + 48);
  char* p = Micros(MemberKey(key1), ns1);
  // The second key written here, not by MemberKey: its separator is known to be a comma, and a
  // second Separator and Advance cost 1 % of a Chrome conversion's instructions.
  *p++ = ',';
  *p++ = '"';
  std::memcpy(p, key2.data(), key2.size());
  p += key2.size();
  *p++ = '"';
  *p++ = ':';
  buf_.Advance(static_cast<size_t>(Micros(p, ns2) - buf_.Tail()));
}

inline void JsonWriter::UIntMemberThen(std::string_view key, uint64_t v, std::string_view members) {
  buf_.Reserve(key.size() + 4 + 20 + 1 + members.size());
  char* p = WriteDecimal(MemberKey(key), v);
  *p++ = ',';
  std::memcpy(p, members.data(), members.size());
  buf_.Advance(static_cast<size_t>(p + members.size() - buf_.Tail()));
}

}  // namespace kp
