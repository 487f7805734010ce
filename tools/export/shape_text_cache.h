// shape_text_cache.h: text made once per kernel shape of an input file and reused for every
// launch of it (the exporters' shape arguments or columns: names, grid, block, registers ...).
// Shape ids are the file's own: one cache per file, or Clear() between files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kp {

class ShapeTextCache {
 public:
  // The text of `shape_id`, made by `make()` (returning std::string) the first time. A view
  // valid until the next Get or Clear. An id too large to index (a damaged trace) is made again
  // every time, so a wild id cannot make the table huge.
  template <typename Make>
  std::string_view Get(uint32_t shape_id, Make make) {
    if (shape_id >= kMaxIndexedShape) {
      scratch_ = make();
      return scratch_;
    }
    if (shape_id >= entries_.size()) entries_.resize(shape_id + 1);
    Entry& e = entries_[shape_id];
    if (!e.made) {
      e.text = make();
      e.made = true;
    }
    return e.text;
  }
  // The text of `shape_id` if made already, else null (never makes it).
  const std::string* Find(uint32_t shape_id) const {
    if (shape_id >= entries_.size() || !entries_[shape_id].made) return nullptr;
    return &entries_[shape_id].text;
  }
  void Clear() { entries_.clear(); }

 private:
  static constexpr uint32_t kMaxIndexedShape = 1u << 20;
  struct Entry {
    bool made = false;
    std::string text;
  };
  std::vector<Entry> entries_;
  std::string scratch_;
};

}  // namespace kp
