// MultiSlotBatch: parses Fluid's MultiSlot text lines and gathers them into
// one batch of tensors, one per used slot.
//
// A line holds, for every slot of the DataFeedDesc in order, a count and
// then that many values: `3 11 12 13 1 0.5` is a slot of three ids and a
// slot of one float. An unused slot's count is checked and its values are
// skipped unread, as Fluid's feed does. Per used slot the
// batch becomes (Fluid's layout):
//  - sparse uint64: int64 [total ids, 1] with LoD {0, n1, n1+n2, ...};
//  - sparse float: float [total values, 1] with the same LoD;
//  - dense: its shape with -1 replaced by the number of instances, or
//    [instances, shape...] when the shape has no -1 ([instances, width]
//    when it is empty; the width is then the first line's count). Every
//    line carries exactly the slot's width of values.
// Ids are read as uint64 and stored in int64 tensors bit for bit, as Fluid
// feeds them.
//
// A malformed line — a count that is not a positive number (Fluid refuses
// empty slots: pad them), a value that is not a number of the slot's type,
// too few values, a dense slot of the wrong width, values past the last
// slot — is an InvalidArgument naming the slot, and leaves the batch as it
// was before the line.
//
// Thread-safety: externally synchronized (one per feed thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "common/data/data_feed_desc.h"
#include "common/framework/tensor.h"

namespace oar {

class MultiSlotBatch {
 public:
  explicit MultiSlotBatch(const DataFeedDesc& desc);

  absl::Status AddLine(std::string_view line);
  int64_t size() const { return instances_; }
  // The batch's tensors, one per used slot in slot order; empties the batch.
  std::vector<Tensor> Take();
  // The used slots' names, in the order Take returns their tensors.
  const std::vector<std::string>& names() const { return names_; }

 private:
  struct Column {
    int slot;  // index in the desc
    bool ids, dense;
    std::vector<int64_t> shape;  // dense: as declared (may hold one -1)
    int64_t width = 0;           // dense: values per line (0: from the first line)
    std::vector<int64_t> id_values;
    std::vector<float> float_values;
    std::vector<size_t> offsets{0};
  };
  const paddle::framework::DataFeedDesc& proto_;
  std::vector<int> column_of_;  // per slot: its column, or -1 when unused
  std::vector<Column> columns_;
  std::vector<std::string> names_;
  std::vector<size_t> undo_sizes_;  // AddLine's scratch
  int64_t instances_ = 0;
};

}  // namespace oar
