#include "common/data/multi_slot_batch.h"

#include <type_traits>

#include "absl/strings/str_cat.h"
#include "common/data/number_scan.h"

namespace oar {
namespace {

// Walks a line's whitespace-separated tokens, parsing each as it goes: one
// pass over the bytes, with no token copied.
class Tokens {
 public:
  enum Result { kOk, kEnd, kBad };
  explicit Tokens(std::string_view line) : p_(line.data()), end_(line.data() + line.size()) {}
  // Parses the next token as a T. kBad leaves the token in *bad.
  template <typename T>
  Result Parse(T* v, std::string_view* bad) {
    if (!SkipSpace()) return kEnd;
    const char* stop = p_;
    bool ok;
    if constexpr (std::is_same_v<T, float>) {
      ok = number_scan::ScanFloat(stop, end_, v);
    } else {
      static_assert(std::is_same_v<T, uint64_t>);
      ok = number_scan::ScanUint64(stop, end_, v);
    }
    if (ok && (stop == end_ || IsSpace(*stop))) {
      p_ = stop;
      return kOk;
    }
    *bad = Skip();
    return kBad;
  }
  // Steps over the next token; false at the line's end.
  bool Next(std::string_view* token) {
    if (!SkipSpace()) return false;
    *token = Skip();
    return true;
  }

 private:
  static bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }
  bool SkipSpace() {
    while (p_ != end_ && IsSpace(*p_)) ++p_;
    return p_ != end_;
  }
  std::string_view Skip() {
    const char* b = p_;
    while (p_ != end_ && !IsSpace(*p_)) ++p_;
    return std::string_view(b, static_cast<size_t>(p_ - b));
  }
  const char* p_;
  const char* end_;
};

}  // namespace

MultiSlotBatch::MultiSlotBatch(const DataFeedDesc& desc) : proto_(desc.proto()) {
  const auto& slots = proto_.multi_slot_desc().slots();
  column_of_.assign(slots.size(), -1);
  for (int i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    if (!s.is_used()) continue;
    Column c{.slot = i, .ids = s.type() == "uint64", .dense = s.is_dense()};
    if (c.dense && !s.shape().empty()) {
      c.width = 1;
      for (int d : s.shape()) {
        c.shape.push_back(d);
        if (d > 0) c.width *= d;
      }
    }
    column_of_[i] = static_cast<int>(columns_.size());
    columns_.push_back(std::move(c));
    names_.push_back(s.name());
  }
}

absl::Status MultiSlotBatch::AddLine(std::string_view line) {
  std::vector<size_t>& before = undo_sizes_;  // to undo a bad line
  before.clear();
  for (const Column& c : columns_) before.push_back(c.ids ? c.id_values.size() : c.float_values.size());
  auto undo = [&] {
    for (size_t k = 0; k < columns_.size(); ++k) {
      Column& c = columns_[k];
      c.ids ? c.id_values.resize(before[k]) : c.float_values.resize(before[k]);
    }
  };
  Tokens tokens(line);
  std::string_view tok;
  const auto& slots = proto_.multi_slot_desc().slots();
  for (int i = 0; i < slots.size(); ++i) {
    const std::string& name = slots[i].name();
    auto bad = [&](const std::string& what) {
      undo();
      return absl::InvalidArgumentError(absl::StrCat("slot '", name, "': ", what));
    };
    uint64_t n = 0;
    switch (tokens.Parse(&n, &tok)) {
      case Tokens::kEnd:
        return bad("the line ends before this slot's count");
      case Tokens::kBad:
        return bad(absl::StrCat("count '", std::string(tok), "' is not a number"));
      case Tokens::kOk:
        break;
    }
    if (n == 0) return bad("count 0: an empty slot must be padded (Fluid refuses it too)");
    Column* c = column_of_[i] >= 0 ? &columns_[column_of_[i]] : nullptr;
    if (c != nullptr && c->dense && c->width > 0 && static_cast<int64_t>(n) != c->width) {
      return bad(absl::StrCat("a dense slot of width ", c->width, ", but this line gives it ", n, " values"));
    }
    auto ended = [&](uint64_t k) { return bad(absl::StrCat("the line ends after ", k, " of its ", n, " values")); };
    for (uint64_t k = 0; k < n; ++k) {
      if (c == nullptr) {  // an unused slot: skipped unread
        if (!tokens.Next(&tok)) return ended(k);
      } else if (c->ids) {
        uint64_t id;
        const auto r = tokens.Parse(&id, &tok);
        if (r == Tokens::kEnd) return ended(k);
        if (r == Tokens::kBad) return bad(absl::StrCat("value '", std::string(tok), "' is not a uint64 id"));
        c->id_values.push_back(static_cast<int64_t>(id));
      } else {
        float f;
        const auto r = tokens.Parse(&f, &tok);
        if (r == Tokens::kEnd) return ended(k);
        if (r == Tokens::kBad) return bad(absl::StrCat("value '", std::string(tok), "' is not a float"));
        c->float_values.push_back(f);
      }
    }
  }
  if (tokens.Next(&tok)) {
    undo();
    return absl::InvalidArgumentError(absl::StrCat("values past the last slot ('", std::string(tok), "' ...)"));
  }
  for (Column& c : columns_) {
    const size_t total = c.ids ? c.id_values.size() : c.float_values.size();
    if (c.dense && c.width == 0) c.width = static_cast<int64_t>(total);  // the first line decides
    c.offsets.push_back(total);
  }
  ++instances_;
  return absl::OkStatus();
}

std::vector<Tensor> MultiSlotBatch::Take() {
  std::vector<Tensor> out;
  for (Column& c : columns_) {
    const int64_t total = static_cast<int64_t>(c.ids ? c.id_values.size() : c.float_values.size());
    DDim dims;
    if (!c.dense) {
      dims = DDim{total, 1};
    } else if (c.shape.empty()) {
      dims = DDim{instances_, c.width};
    } else {
      std::vector<int64_t> d;
      bool inferred = false;
      for (int64_t v : c.shape) {
        inferred |= v == -1;
        d.push_back(v == -1 ? instances_ : v);
      }
      if (!inferred) d.insert(d.begin(), instances_);
      dims = DDim(d);
    }
    Tensor t;
    if (c.ids) {
      std::copy(c.id_values.begin(), c.id_values.end(), t.mutable_data<int64_t>(dims));
    } else {
      std::copy(c.float_values.begin(), c.float_values.end(), t.mutable_data<float>(dims));
    }
    if (!c.dense) t.set_lod({c.offsets});
    out.push_back(std::move(t));
    c.id_values.clear();
    c.float_values.clear();
    c.offsets.assign(1, 0);
  }
  instances_ = 0;
  return out;
}

}  // namespace oar
