// json_writer.h: a streaming JSON writer into an OutputBuffer, flushed to a FILE in large writes.
// Used by the Chrome trace-event exporter.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "tools/export/output_buffer.h"

namespace kp {

// A streaming JSON writer: commas, nesting and string escaping (control characters, quotes,
// backslashes; invalid UTF-8 becomes U+FFFD) are its job, never the caller's.
class JsonWriter {
 public:
  explicit JsonWriter(FILE* out) : out_(out) { buf_.Reserve(1u << 20); }
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
  // Writes out the buffer if it is large (or always, with force). False after a write error.
  bool Flush(bool force = false);
  // A line break outside any value (the end of the document).
  void Newline() { buf_.Put('\n'); }
  std::string buffer() const { return std::string(buf_.view()); }  // tests

 private:
  void Separator();
  void Digits(uint64_t v);
  FILE* out_;
  OutputBuffer buf_;
  std::vector<char>
      first_;  // per open container: nothing written in it yet (not vector<bool>: hot)
  bool after_key_ = false;
  bool failed_ = false;
};

}  // namespace kp
