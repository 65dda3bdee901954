// Operations on SelectedRows (sparse row slices) shared by the sparse
// kernels: merging duplicate rows, densifying, reading rows, and cutting
// rows into consecutive height sections (a sliced table's pserver blocks).
//
// Thread-safety: stateless.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/framework/selected_rows.h"

namespace oar {

// Rows sorted and unique, values of duplicates summed. The row width is
// value.numel() / rows.size().
template <typename T>
SelectedRows MergeRows(const SelectedRows& in);

// The value shape of an empty result made from `like` (no rows): like's
// value shape with 0 rows, or [0] when like's value has no shape. Run-time
// shape inference reads [0] as an unknown width, so the op after it (an
// update of a [height, width] parameter) is not refused.
DDim EmptyRowShape(const SelectedRows& like);

// The full [height, width...] tensor, zeros outside the listed rows.
template <typename T>
Tensor Densify(const SelectedRows& in);

// Checks rows lie in [0, height) and value has one row per entry;
// InvalidArgument naming `what` otherwise.
absl::Status CheckSelectedRows(const SelectedRows& sr, const std::string& what);

// `in` cut into consecutive sections of `heights` rows (the blocks of a
// sliced table): block s holds the rows in [offset_s, offset_s + heights[s])
// rebased to start at 0, in their order in `in`, with their values, and
// height heights[s]. The split_selected_rows op, and the send op and the
// communicator under runtime_split_send_recv, cut with it. InvalidArgument
// naming `what` for a negative height or a row outside the sections.
absl::StatusOr<std::vector<SelectedRows>> SplitRowsBySections(const SelectedRows& in, absl::Span<const int64_t> heights,
                                                              const std::string& what);

}  // namespace oar
