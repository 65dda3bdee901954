// DataFeedDesc: Fluid's description of a data feed's files — the slots of a
// MultiSlot line (name, uint64 ids or floats, dense or sparse, used or not,
// a dense slot's shape), the batch size and an optional pipe command — as
// the reference's `fluid.DataFeedDesc` has it: loaded from the protobuf text
// file Fluid users write, changed with set_batch_size / set_dense_slots /
// set_use_slots, printed with desc().
//
//   OAR_ASSIGN_OR_RETURN(DataFeedDesc feed, DataFeedDesc::Load("data.proto"));
//   feed.set_batch_size(128);
//   OAR_RETURN_IF_ERROR(feed.set_use_slots({"words", "label"}));
//
// Load and Parse check what a feed relies on: every slot has a name (unique)
// and a type of "uint64" or "float"; a dense slot's shape has positive
// dimensions and at most one -1; batch_size > 0; the later-Paddle fields
// this feed does not implement (rank_offset, pv_batch_size, input_type)
// keep their defaults. Errors name the file, the slot and the field.
//
// Thread-safety: a value type; const methods may run concurrently.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/data_feed.pb.h"

namespace oar {

class DataFeedDesc {
 public:
  // Reads and checks a text-format DataFeedDesc file.
  static absl::StatusOr<DataFeedDesc> Load(const std::string& path);
  // The same from text; `source` names it in errors.
  static absl::StatusOr<DataFeedDesc> Parse(const std::string& text, const std::string& source = "DataFeedDesc");
  // Checks a message built in code.
  static absl::StatusOr<DataFeedDesc> From(paddle::framework::DataFeedDesc proto,
                                           const std::string& source = "DataFeedDesc");

  void set_batch_size(int batch_size) { proto_.set_batch_size(batch_size); }
  // Makes the named slots dense (the others keep theirs). NotFound naming
  // the first name that is not a slot; nothing changes then.
  absl::Status set_dense_slots(const std::vector<std::string>& names);
  // Marks the named slots used (the others keep theirs). NotFound as above.
  absl::Status set_use_slots(const std::vector<std::string>& names);
  // The message in protobuf text format, as Fluid's desc() prints it.
  std::string desc() const;

  const paddle::framework::DataFeedDesc& proto() const { return proto_; }
  int batch_size() const { return proto_.batch_size(); }
  const std::string& pipe_command() const { return proto_.pipe_command(); }
  // Indexes of the used slots, in the file's slot order.
  std::vector<int> used_slots() const;

 private:
  explicit DataFeedDesc(paddle::framework::DataFeedDesc proto) : proto_(std::move(proto)) {}
  absl::Status ForSlots(const std::vector<std::string>& names, void (*set)(paddle::framework::Slot*));

  paddle::framework::DataFeedDesc proto_;
};

}  // namespace oar
