// What the two NCCL users of trainer/collective/ share (NCCL builds only):
// an ncclResult_t as a Status, and the NCCL type a tensor's dtype sums as.
// Both NcclCollective (one GPU per process, across processes) and
// NcclPlaces (the clique of a process's GPUs) send broadcasts as bytes, so
// only sums need a type.
//
// Thread-safety: stateless.
#pragma once

#include <nccl.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/framework/data_type.h"

namespace oar {

// OK, or Internal "<what>: <NCCL's error text>".
inline absl::Status NcclStatus(ncclResult_t r, absl::string_view what) {
  if (r == ncclSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", ncclGetErrorString(r)));
}

// The NCCL type to sum `t` in; InvalidArgument "'<name>': NCCL cannot sum
// <dtype> tensors" for a dtype that does not add (bool, int8, uint8, ...).
inline absl::StatusOr<ncclDataType_t> NcclSumType(DataType t, absl::string_view name) {
  switch (t) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kFloat16:
      return ncclFloat16;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      return ncclInt64;
    default:
      return absl::InvalidArgumentError(absl::StrCat("'", name, "': NCCL cannot sum ", DataTypeName(t), " tensors"));
  }
}

}  // namespace oar
