// A SparseTable on disk, in Fluid's SelectedRows layout (what Fluid's save
// op writes for a SELECTED_ROWS variable, so its tools can read a shard):
//   uint32 version (0), uint64 row count n, int64 ids[n], int64 height,
//   then the values as a tensor record without LoD: uint32 version (0),
//   int32 size of a VarType.TensorDesc proto (FP32, dims [n, width]), the
//   proto, n × width little-endian floats.
// Rows are written in the table's creation order.
//
// Thread-safety: as SparseTable's ForEach/Assign; streams are the caller's.
#pragma once

#include <istream>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "common/framework/sparse_table.h"

namespace oar {

absl::Status WriteSparseTable(const SparseTable& table, std::ostream& out);
// Replaces `table`'s rows with the record's; InvalidArgument naming `what`
// for a malformed record or a width other than the table's.
absl::Status ReadSparseTable(std::istream& in, const std::string& what, SparseTable* table);

}  // namespace oar
