// Operations on SelectedRows (sparse row slices) shared by the sparse
// kernels: merging duplicate rows, densifying, and reading rows.
//
// Thread-safety: stateless.
#pragma once

#include "absl/status/statusor.h"
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

}  // namespace oar
