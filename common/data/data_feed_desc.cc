#include "common/data/data_feed_desc.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace oar {
namespace {

using paddle::framework::Slot;

// Collects the text parser's complaints (line and column) instead of logging them.
class Collector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (first.empty()) first = absl::StrCat("line ", line + 1, " column ", column + 1, ": ", message);
  }
  std::string first;
};

absl::Status CheckSlot(const Slot& s, int index, const std::string& source) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": slot ", index, " ('", s.name(), "') ", what));
  };
  if (s.name().empty()) return bad("has no name");
  if (s.type() != "uint64" && s.type() != "float") {
    return bad(absl::StrCat("has type '", s.type(), "'; a MultiSlot feed reads \"uint64\" or \"float\""));
  }
  int inferred = 0;
  for (int d : s.shape()) {
    if (d == -1) {
      ++inferred;
    } else if (d <= 0) {
      return bad(absl::StrCat("has shape [", absl::StrJoin(s.shape(), ", "), "]; dimensions are positive or -1"));
    }
  }
  if (inferred > 1) return bad(absl::StrCat("has shape [", absl::StrJoin(s.shape(), ", "), "] with more than one -1"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DataFeedDesc> DataFeedDesc::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the DataFeedDesc file '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

absl::StatusOr<DataFeedDesc> DataFeedDesc::Parse(const std::string& text, const std::string& source) {
  paddle::framework::DataFeedDesc proto;
  google::protobuf::TextFormat::Parser parser;
  Collector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &proto)) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, " is not a DataFeedDesc in protobuf text format: ", errors.first));
  }
  return From(std::move(proto), source);
}

absl::StatusOr<DataFeedDesc> DataFeedDesc::From(paddle::framework::DataFeedDesc proto, const std::string& source) {
  if (proto.batch_size() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": batch_size is ", proto.batch_size(), "; it must be > 0"));
  }
  if (!proto.rank_offset().empty() || proto.pv_batch_size() != 32 || proto.input_type() != 0) {
    return absl::UnimplementedError(absl::StrCat(
        source,
        ": rank_offset, pv_batch_size and input_type (later Paddle's PV-instance feeds) are not implemented; "
        "leave them unset"));
  }
  std::set<std::string> names;
  for (int i = 0; i < proto.multi_slot_desc().slots_size(); ++i) {
    const Slot& s = proto.multi_slot_desc().slots(i);
    if (absl::Status st = CheckSlot(s, i, source); !st.ok()) return st;
    if (!names.insert(s.name()).second) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": two slots are named '", s.name(), "'"));
    }
  }
  return DataFeedDesc(std::move(proto));
}

absl::Status DataFeedDesc::ForSlots(const std::vector<std::string>& names, void (*set)(Slot*)) {
  std::vector<Slot*> found;
  auto* slots = proto_.mutable_multi_slot_desc()->mutable_slots();
  for (const std::string& name : names) {
    Slot* hit = nullptr;
    for (Slot& s : *slots) {
      if (s.name() == name) hit = &s;
    }
    if (hit == nullptr) {
      std::vector<std::string> all;
      for (const Slot& s : *slots) all.push_back(s.name());
      return absl::NotFoundError(
          absl::StrCat("no slot named '", name, "' (the slots: ", absl::StrJoin(all, ", "), ")"));
    }
    found.push_back(hit);
  }
  for (Slot* s : found) set(s);
  return absl::OkStatus();
}

absl::Status DataFeedDesc::set_dense_slots(const std::vector<std::string>& names) {
  return ForSlots(names, [](Slot* s) { s->set_is_dense(true); });
}

absl::Status DataFeedDesc::set_use_slots(const std::vector<std::string>& names) {
  return ForSlots(names, [](Slot* s) { s->set_is_used(true); });
}

std::string DataFeedDesc::desc() const {
  std::string out;
  google::protobuf::TextFormat::PrintToString(proto_, &out);
  return out;
}

std::vector<int> DataFeedDesc::used_slots() const {
  std::vector<int> used;
  for (int i = 0; i < proto_.multi_slot_desc().slots_size(); ++i) {
    if (proto_.multi_slot_desc().slots(i).is_used()) used.push_back(i);
  }
  return used;
}

}  // namespace oar
