// What the LoD sequence ops (sequence_shape_ops.cc, sequence_window_ops.cc,
// lstm_op.cc, gru_ops.cc) share: the checked offsets of an input's last LoD level,
// and a tensor's row width.
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/framework/op_context.h"
#include "common/ops/op_util.h"

namespace oar {

// The last LoD level of input `slot`, which must partition its rows;
// InvalidArgument naming op, slot and variable otherwise.
inline absl::StatusOr<std::vector<size_t>> LastLevel(const ExecutionContext& ctx, const std::string& slot,
                                                     const Tensor& t) {
  if (t.lod().empty() || t.dims().size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), slot), t.dims().ToString(), " has no LoD"));
  }
  const std::vector<size_t>& off = t.lod().back();
  if (off.empty() || off.front() != 0 || off.back() != static_cast<size_t>(t.dims()[0])) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": the LoD of ", InputLabel(ctx.op(), slot),
                                                   " does not partition its ", t.dims()[0], " rows"));
  }
  for (size_t i = 1; i < off.size(); ++i) {
    if (off[i] < off[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat(ctx.op().type, ": the LoD of ", InputLabel(ctx.op(), slot), " decreases"));
    }
  }
  return off;
}

// Elements per row (dims[0] rows).
inline int64_t RowWidth(const Tensor& t) {
  return t.dims().size() == 0 || t.dims()[0] == 0 ? t.dims().Product(1, t.dims().size()) : t.numel() / t.dims()[0];
}

}  // namespace oar
