// schema_gen: writes kptrace_schema.h, the constants of proto/kptrace.proto for code that must
// not link libprotobuf (the injector's encoder and decoder).
//
// Runs at build time. It reads the schema through the descriptor compiled into kp_proto, so
// the numbers cannot drift from the .proto: per message a struct of field numbers, per enum a
// struct of values, and the Stats table (name, field, severity, counter) that the encoder's
// counters, their encoding and the readers' loss classification all come from.
//
// usage: kp_schema_gen OUTPUT_HEADER
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/status.h"
#include "kptrace.pb.h"

namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

// snake_case (or UPPER_SNAKE) -> kCamelCase.
std::string ConstantName(const std::string& name) {
  std::string out = "k";
  bool upper = true;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                 : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    upper = std::isdigit(static_cast<unsigned char>(c)) != 0;
  }
  return out;
}

// The prefix all values of an enum share, up to and including an underscore ("RECORD_FLAG_"),
// so RECORD_FLAG_NO_TIMING becomes RecordFlag::kNoTiming.
std::string CommonValuePrefix(const EnumDescriptor* e) {
  std::string prefix = e->value(0)->name();
  for (int i = 1; i < e->value_count(); ++i) {
    const std::string& n = e->value(i)->name();
    size_t k = 0;
    while (k < prefix.size() && k < n.size() && prefix[k] == n[k]) ++k;
    prefix.resize(k);
  }
  size_t cut = prefix.rfind('_');
  return cut == std::string::npos ? std::string() : prefix.substr(0, cut + 1);
}

void WriteEnum(const EnumDescriptor* e, std::ostringstream& o) {
  const std::string prefix = CommonValuePrefix(e);
  o << "// enum kp." << e->name() << "\n";
  o << "struct " << e->name() << " {\n";
  for (int i = 0; i < e->value_count(); ++i) {
    const auto* v = e->value(i);
    o << "  static constexpr uint32_t " << ConstantName(v->name().substr(prefix.size())) << " = "
      << v->number() << ";\n";
  }
  o << "};\n\n";
}

void WriteMessage(const Descriptor* m, std::ostringstream& o) {
  o << "// message kp." << m->name() << ": field numbers\n";
  o << "struct " << m->name() << " {\n";
  for (int i = 0; i < m->field_count(); ++i) {
    const auto* f = m->field(i);
    o << "  static constexpr uint32_t " << ConstantName(f->name()) << " = " << f->number() << ";\n";
  }
  o << "};\n\n";
}

// The Stats counters as plain uint64 members plus one table row per counter.
kp::StatusOr<std::string> StatsTable(const Descriptor* stats) {
  const EnumDescriptor* severity = kp::StatSeverity_descriptor();
  std::ostringstream members, rows;
  for (int i = 0; i < stats->field_count(); ++i) {
    const auto* f = stats->field(i);
    if (f->type() != FieldDescriptor::TYPE_UINT64 || f->is_repeated()) {
      return kp::Status::Error("kp.Stats." + f->name() + " is not a plain uint64 counter");
    }
    const kp::StatSeverity s = f->options().GetExtension(kp::stat_severity);
    if (s == kp::STAT_SEVERITY_UNSPECIFIED) {
      return kp::Status::Error("kp.Stats." + f->name() +
                               " has no severity: add [(stat_severity) = STAT_LOSS | "
                               "STAT_BOOKKEEPING | STAT_INFO] to it in proto/kptrace.proto");
    }
    members << "  uint64_t " << f->name() << " = 0;\n";
    rows << "    {\"" << f->name() << "\", " << f->number() << ", StatSeverity::"
         << ConstantName(
                severity->FindValueByNumber(s)->name().substr(CommonValuePrefix(severity).size()))
         << ", &StatCounters::" << f->name() << "},\n";
  }
  std::ostringstream o;
  o << "// kp.Stats as counters the injector increments directly.\n"
    << "struct StatCounters {\n"
    << members.str() << "};\n\n"
    << "// One row per kp.Stats field, in field order.\n"
    << "struct StatField {\n"
    << "  const char* name;\n"
    << "  uint32_t field;\n"
    << "  uint32_t severity;  // StatSeverity\n"
    << "  uint64_t StatCounters::*counter;\n"
    << "};\n"
    << "inline constexpr StatField kStatFields[] = {\n"
    << rows.str() << "};\n"
    << "inline constexpr size_t kNumStatFields = sizeof(kStatFields) / sizeof(kStatFields[0]);\n";
  return o.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kp_schema_gen OUTPUT_HEADER\n");
    return 2;
  }
  const FileDescriptor* file = kp::Chunk::descriptor()->file();
  std::ostringstream o;
  o << "// Generated from " << file->name()
    << " by proto/schema_gen.cc at build time. Do not edit.\n"
    << "#pragma once\n\n"
    << "#include <cstddef>\n"
    << "#include <cstdint>\n\n"
    << "namespace kp {\n"
    << "namespace schema {\n\n";
  for (int i = 0; i < file->enum_type_count(); ++i) WriteEnum(file->enum_type(i), o);
  for (int i = 0; i < file->message_type_count(); ++i) {
    const Descriptor* m = file->message_type(i);
    if (m->nested_type_count() != 0 || m->enum_type_count() != 0) {
      std::fprintf(stderr, "kp_schema_gen: kp.%s has nested types; teach schema_gen.cc them\n",
                   m->name().c_str());
      return 1;
    }
    WriteMessage(m, o);
  }
  const kp::StatusOr<std::string> stats = StatsTable(kp::Stats::descriptor());
  if (!stats.ok()) {
    std::fprintf(stderr, "kp_schema_gen: %s\n", stats.status().message().c_str());
    return 1;
  }
  o << stats.value();
  o << "\n}  // namespace schema\n"
    << "}  // namespace kp\n";

  // Rewrite only on change, so an edit elsewhere in the proto does not rebuild the injector.
  const std::string text = o.str();
  {
    std::ifstream in(argv[1], std::ios::binary);
    std::ostringstream old;
    old << in.rdbuf();
    if (in && old.str() == text) return 0;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << text;
  if (!out.flush()) {
    std::fprintf(stderr, "kp_schema_gen: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
