#include "common/stats_table.h"

namespace kp {

StatClass ClassifyStat(std::string_view name) {
  for (const schema::StatField& f : schema::kStatFields) {
    if (name != f.name) continue;
    switch (f.severity) {
      case schema::StatSeverity::kBookkeeping:
        return StatClass::kBookkeeping;
      case schema::StatSeverity::kInfo:
        return StatClass::kInfo;
      default:
        return StatClass::kLoss;
    }
  }
  return StatClass::kLoss;
}

}  // namespace kp
