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

}  // namespace

struct BudgetField {
  enum Kind : uint8_t { kUnknown, kString, kBytes, kMessage, kVarint, kFixed } kind = kUnknown;
  bool repeated = false;
  const BudgetType* sub = nullptr;
};

struct BudgetType {
  uint64_t cost = 0;                // the object itself (SpaceUsedLong of the default instance)
  std::vector<BudgetField> fields;  // indexed by field number
  const BudgetField& Field(uint64_t number) const {
    static const BudgetField kNone;
    return number < fields.size() ? fields[number] : kNone;
  }
};

namespace {

class Schema {
 public:
  Schema() { chunk_ = Build(Chunk::descriptor()); }
  const BudgetType* chunk() const { return chunk_; }

 private:
  const BudgetType* Build(const Descriptor* d) {
    auto it = types_.find(d);
    if (it != types_.end()) return it->second.get();
    auto info = std::make_unique<BudgetType>();
    BudgetType* t = info.get();
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
      BudgetField& fi = t->fields[static_cast<size_t>(f->number())];
      fi.repeated = f->is_repeated();
      switch (f->type()) {
        case FieldDescriptor::TYPE_STRING:
          fi.kind = BudgetField::kString;
          break;
        case FieldDescriptor::TYPE_BYTES:
          fi.kind = BudgetField::kBytes;
          break;
        case FieldDescriptor::TYPE_MESSAGE:
        case FieldDescriptor::TYPE_GROUP:
          fi.kind = BudgetField::kMessage;
          fi.sub = Build(f->message_type());
          break;
        case FieldDescriptor::TYPE_DOUBLE:
        case FieldDescriptor::TYPE_FLOAT:
        case FieldDescriptor::TYPE_FIXED64:
        case FieldDescriptor::TYPE_FIXED32:
        case FieldDescriptor::TYPE_SFIXED64:
        case FieldDescriptor::TYPE_SFIXED32:
          fi.kind = BudgetField::kFixed;
          break;
        default:
          fi.kind = BudgetField::kVarint;
          break;
      }
    }
    return t;
  }
  std::unordered_map<const Descriptor*, std::unique_ptr<BudgetType>> types_;
  const BudgetType* chunk_ = nullptr;
};

const Schema& TheSchema() {
  static const Schema schema;
  return schema;
}

}  // namespace

const BudgetType* ChunkBudget::ChunkType() { return TheSchema().chunk(); }

const BudgetType* ChunkBudget::FieldType(const BudgetType* t, uint64_t number) {
  return t->Field(number).sub;
}

uint64_t ChunkBudget::ObjectCost(const BudgetType* t, bool repeated) {
  return (repeated ? kPointerSlot : 0) + t->cost;
}

void ChunkBudget::RepairString(uint8_t* p, size_t n) {
  r_->strings_repaired += RepairUtf8InPlace(reinterpret_cast<char*>(p), n) != 0;
}

bool ChunkBudget::Field(const BudgetType* t, uint64_t tag, uint8_t** pp, const uint8_t* end,
                        int depth) {
  const uint64_t number = tag >> 3;
  if (number == 0) return Malformed();
  const BudgetField& f = t->Field(number);
  uint8_t* p = *pp;
  uint64_t v, cost = 0;
  switch (tag & 7) {
    case 0:  // varint
      if (!ReadWireVarint(&p, end, &v)) return Malformed();
      cost = f.kind == BudgetField::kUnknown ? kUnknownField : f.repeated ? kRepeatedScalar : 0;
      break;
    case 1:  // fixed64
      if (end - p < 8) return Malformed();
      p += 8;
      cost = f.kind == BudgetField::kUnknown ? kUnknownField : f.repeated ? kRepeatedScalar : 0;
      break;
    case 5:  // fixed32
      if (end - p < 4) return Malformed();
      p += 4;
      cost = f.kind == BudgetField::kUnknown ? kUnknownField : f.repeated ? kRepeatedScalar : 0;
      break;
    case 2: {  // length-delimited
      if (!ReadWireVarint(&p, end, &v) || v > static_cast<uint64_t>(end - p)) return Malformed();
      uint8_t* body = p;
      p += v;
      const uint64_t slot = f.repeated ? kPointerSlot : 0;
      switch (f.kind) {
        case BudgetField::kString:
          RepairString(body, static_cast<size_t>(v));
          cost = slot + kStringObject + v;
          break;
        case BudgetField::kBytes:
          cost = slot + kStringObject + v;
          break;
        case BudgetField::kMessage:
          if (!Add(slot + f.sub->cost)) return false;
          if (!Walk(f.sub, body, static_cast<size_t>(v), depth + 1)) return false;
          break;
        case BudgetField::kVarint:  // packed: up to one element per byte, 8 bytes each
          cost = 8 * v;
          break;
        case BudgetField::kFixed:
          cost = 2 * v;
          break;
        case BudgetField::kUnknown:
          cost = kUnknownField + v;
          break;
      }
      break;
    }
    default:  // groups (3, 4) are not part of the schema; 6, 7 do not exist
      return Malformed();
  }
  *pp = p;
  return cost == 0 || Add(cost);
}

bool ChunkBudget::Walk(const BudgetType* t, uint8_t* p, size_t n, int depth) {
  if (depth > kMaxDepth) return Malformed();
  const uint8_t* end = p + n;
  while (p < end) {
    uint64_t tag;
    if (!ReadWireVarint(&p, end, &tag)) return Malformed();
    if (!Field(t, tag, &p, end, depth)) return false;
  }
  return true;
}

uint64_t DecodeBudget(uint64_t raw_bytes) {
  return std::min(kMaxDecodedChunkBytes, kMaxDecodedBytesPerRawByte * raw_bytes + 4096);
}

uint64_t ColumnsDecodeBudget(uint64_t raw_bytes) {
  return std::min(kMaxDecodedChunkBytes, kMaxDecodedBytesPerColumnByte * raw_bytes + 4096);
}

ChunkScanResult ScanChunk(uint8_t* msg, size_t n, uint64_t budget_bytes) {
  ChunkScanResult r;
  ChunkBudget b(budget_bytes, &r);
  const BudgetType* chunk = ChunkBudget::ChunkType();
  if (b.Add(ChunkBudget::ObjectCost(chunk, false))) b.Walk(chunk, msg, n, 0);
  return r;
}

}  // namespace kp
