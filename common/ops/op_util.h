// Small helpers shared by the op libraries: common shape-inference rules and
// checked access to kernel inputs.
//
// Thread-safety: stateless.
#pragma once

#include "absl/strings/str_cat.h"
#include "common/op_context.h"
#include "common/status.h"

namespace oar {

// Out has the shape of X (and shares its LoD).
absl::Status SameShapeAsX(InferShapeContext& ctx);
// For a grad op: X@GRAD has the shape of X.
absl::Status GradSameShapeAsX(InferShapeContext& ctx);
// For ops with no outputs to shape (I/O, RPC, control).
inline absl::Status NoShapeInference(InferShapeContext&) { return absl::OkStatus(); }
// For ops whose kernel works on any dtype: picks the one float32 kernel.
inline DataType AnyKernelDtype(const ExecutionContext&) { return DataType::kFloat32; }

// The input tensor of `slot`, or InvalidArgument naming the op and slot when
// it is missing or holds no data.
absl::StatusOr<const Tensor*> RequireInput(const ExecutionContext& ctx,
                                           const std::string& slot, size_t i = 0);

// Checks that a tensor has dtype T.
template <typename T>
absl::Status RequireDtype(const ExecutionContext& ctx, const std::string& slot,
                          const Tensor& t) {
  if (t.dtype() == DataTypeOf<T>::value) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      ctx.op().type, ": input ", slot, " has dtype ", DataTypeName(t.dtype()),
      ", expected ", DataTypeName(DataTypeOf<T>::value)));
}

}  // namespace oar
