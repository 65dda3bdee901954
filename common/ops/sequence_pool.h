// What sequence_pool's CPU kernel (sequence_ops.cc) and GPU kernel
// (sequence_ops_cuda.cc) share: the parse of `pooltype` and the checked
// offsets of X's last LoD level.
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/framework/op_context.h"
#include "common/ops/sequence_pool_type.h"

namespace oar {

// InvalidArgument naming the value for anything but Fluid's six names.
absl::StatusOr<SequencePool> ParseSequencePool(const std::string& pooltype);

// X's last LoD level, which must partition its rows (start at 0, end at
// dims[0], never decrease); InvalidArgument naming the op and X otherwise.
absl::StatusOr<std::vector<size_t>> SequenceOffsets(const ExecutionContext& ctx, const Tensor& x);

}  // namespace oar
