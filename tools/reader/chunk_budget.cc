#include "tools/reader/chunk_budget.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "common/utf8.h"
#include "kptrace.pb.h"

namespace kp {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;

// Cost model of libprotobuf's C++ objects (protobuf 3.21, no arena), rounded up: a repeated
// pointer slot may be doubled by growth, a set string field is a heap std::string, an unknown
// field lives in an UnknownFieldSet entry.
constexpr uint64_t kPointerSlot = 16;
constexpr uint64_t kStringObject = 32;
constexpr uint64_t kRepeatedScalar = 16;
constexpr uint64_t kUnknownField = 48;

struct TypeInfo;
struct FieldInfo {
  enum Kind : uint8_t { kUnknown, kString, kBytes, kMessage, kVarint, kFixed } kind = kUnknown;
  bool repeated = false;
  const TypeInfo* sub = nullptr;
};
struct TypeInfo {
  uint64_t cost = 0;              // the object itself (SpaceUsedLong of the default instance)
  std::vector<FieldInfo> fields;  // indexed by field number
  const FieldInfo& Field(uint64_t number) const {
    static const FieldInfo kNone;
    return number < fields.size() ? fields[number] : kNone;
  }
};

class Schema {
 public:
  Schema() { chunk_ = Build(Chunk::descriptor()); }
  const TypeInfo* chunk() const { return chunk_; }

 private:
  const TypeInfo* Build(const Descriptor* d) {
    auto it = types_.find(d);
    if (it != types_.end()) return it->second.get();
    auto info = std::make_unique<TypeInfo>();
    TypeInfo* t = info.get();
    types_[d] = std::move(info);
    const google::protobuf::Message* proto =
        google::protobuf::MessageFactory::generated_factory()->GetPrototype(d);
    t->cost = static_cast<uint64_t>(proto->SpaceUsedLong());
    int max_number = 0;
    for (int i = 0; i < d->field_count(); ++i)
      max_number = std::max(max_number, d->field(i)->number());
    t->fields.resize(static_cast<size_t>(max_number) + 1);
    for (int i = 0; i < d->field_count(); ++i) {
      const FieldDescriptor* f = d->field(i);
      FieldInfo& fi = t->fields[static_cast<size_t>(f->number())];
      fi.repeated = f->is_repeated();
      switch (f->type()) {
        case FieldDescriptor::TYPE_STRING:
          fi.kind = FieldInfo::kString;
          break;
        case FieldDescriptor::TYPE_BYTES:
          fi.kind = FieldInfo::kBytes;
          break;
        case FieldDescriptor::TYPE_MESSAGE:
        case FieldDescriptor::TYPE_GROUP:
          fi.kind = FieldInfo::kMessage;
          fi.sub = Build(f->message_type());
          break;
        case FieldDescriptor::TYPE_DOUBLE:
        case FieldDescriptor::TYPE_FLOAT:
        case FieldDescriptor::TYPE_FIXED64:
        case FieldDescriptor::TYPE_FIXED32:
        case FieldDescriptor::TYPE_SFIXED64:
        case FieldDescriptor::TYPE_SFIXED32:
          fi.kind = FieldInfo::kFixed;
          break;
        default:
          fi.kind = FieldInfo::kVarint;
          break;
      }
    }
    return t;
  }
  std::unordered_map<const Descriptor*, std::unique_ptr<TypeInfo>> types_;
  const TypeInfo* chunk_ = nullptr;
};

class Scanner {
 public:
  Scanner(uint64_t budget, ChunkScanResult* r) : budget_(budget), r_(r) {}

  // Walks the fields of one message of type `t` in p[0..n). False stops the scan (malformed or
  // over budget; *r_ says which).
  bool Walk(const TypeInfo& t, uint8_t* p, size_t n, int depth) {
    if (depth > kMaxDepth) return Malformed();
    uint8_t* end = p + n;
    while (p < end) {
      uint64_t tag, v;
      if (!Varint(&p, end, &tag)) return Malformed();
      const uint64_t number = tag >> 3;
      if (number == 0) return Malformed();
      const FieldInfo& f = t.Field(number);
      uint64_t cost = 0;
      switch (tag & 7) {
        case 0:  // varint
          if (!Varint(&p, end, &v)) return Malformed();
          cost = f.kind == FieldInfo::kUnknown ? kUnknownField : f.repeated ? kRepeatedScalar : 0;
          break;
        case 1:  // fixed64
          if (end - p < 8) return Malformed();
          p += 8;
          cost = f.kind == FieldInfo::kUnknown ? kUnknownField : f.repeated ? kRepeatedScalar : 0;
          break;
        case 5:  // fixed32
          if (end - p < 4) return Malformed();
          p += 4;
          cost = f.kind == FieldInfo::kUnknown ? kUnknownField : f.repeated ? kRepeatedScalar : 0;
          break;
        case 2: {  // length-delimited
          if (!Varint(&p, end, &v) || v > static_cast<uint64_t>(end - p)) return Malformed();
          uint8_t* body = p;
          p += v;
          const uint64_t slot = f.repeated ? kPointerSlot : 0;
          switch (f.kind) {
            case FieldInfo::kString:
              r_->strings_repaired +=
                  RepairUtf8InPlace(reinterpret_cast<char*>(body), static_cast<size_t>(v)) != 0;
              cost = slot + kStringObject + v;
              break;
            case FieldInfo::kBytes:
              cost = slot + kStringObject + v;
              break;
            case FieldInfo::kMessage:
              if (!Add(slot + f.sub->cost)) return false;
              if (!Walk(*f.sub, body, static_cast<size_t>(v), depth + 1)) return false;
              break;
            case FieldInfo::kVarint:  // packed: up to one element per byte, 8 bytes each
              cost = 8 * v;
              break;
            case FieldInfo::kFixed:
              cost = 2 * v;
              break;
            case FieldInfo::kUnknown:
              cost = kUnknownField + v;
              break;
          }
          break;
        }
        default:  // groups (3, 4) are not part of the schema; 6, 7 do not exist
          return Malformed();
      }
      if (cost != 0 && !Add(cost)) return false;
    }
    return true;
  }

  bool Add(uint64_t cost) {
    ++r_->entries;
    r_->decoded_bytes += cost;
    if (r_->decoded_bytes <= budget_) return true;
    r_->over_budget = true;
    return false;
  }

 private:
  static constexpr int kMaxDepth = 16;  // the schema nests 3 deep
  bool Malformed() {
    r_->well_formed = false;
    return false;
  }
  static bool Varint(uint8_t** pp, const uint8_t* end, uint64_t* v) {
    uint8_t* p = *pp;
    if (p < end && *p < 0x80) {  // most tags and values are one byte
      *v = *p;
      *pp = p + 1;
      return true;
    }
    *v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      const uint8_t b = *p++;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) {
        *pp = p;
        return true;
      }
    }
    return false;
  }
  uint64_t budget_;
  ChunkScanResult* r_;
};

}  // namespace

uint64_t DecodeBudget(uint64_t raw_bytes) {
  return std::min(kMaxDecodedChunkBytes, kMaxDecodedBytesPerRawByte * raw_bytes + 4096);
}

ChunkScanResult ScanChunk(uint8_t* msg, size_t n, uint64_t budget_bytes) {
  static const Schema schema;
  ChunkScanResult r;
  Scanner s(budget_bytes, &r);
  if (s.Add(schema.chunk()->cost)) s.Walk(*schema.chunk(), msg, n, 0);
  return r;
}

}  // namespace kp
