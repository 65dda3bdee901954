// Small helpers shared by the op libraries: common shape-inference rules and
// checked access to kernel inputs.
//
// Thread-safety: stateless.
#pragma once

#include <algorithm>

#include <vector>

#include <string>
#include <type_traits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/framework/op_context.h"
#include "common/framework/op_registry.h"

namespace oar {

// Out has the shape of X (and shares its LoD).
absl::Status SameShapeAsX(InferShapeContext& ctx);

// The outputs of `grad_slot` become SelectedRows where the op's is_sparse
// attribute is set, dense tensors otherwise (the InferVarType of ops with
// a sparse weight gradient: lookup_table, nce, hierarchical_sigmoid).
void SetSparseGradType(const OpDesc& op, BlockDesc* block, const std::string& grad_slot);
// For a grad op: X@GRAD has the shape of X.
absl::Status GradSameShapeAsX(InferShapeContext& ctx);
// For ops with no outputs to shape (I/O, RPC, control).
inline absl::Status NoShapeInference(InferShapeContext&) { return absl::OkStatus(); }
// For ops whose kernel works on any dtype: picks the one float32 kernel.
inline DataType AnyKernelDtype(const ExecutionContext&) { return DataType::kFloat32; }

// The dtype of input `slot` (float32 before it holds a value): the kernel
// dtype of ops that run in their input's dtype, whatever it is.
DataType InputDtypeOf(const ExecutionContext& ctx, const char* slot);

// Registers CPU kernels for float32, float64, int32 and int64.
OpInfo& NumericCpuKernels(OpInfo& info, KernelFn f32, KernelFn f64, KernelFn i32, KernelFn i64);

// An int32 or int64 input's values as int64, each checked to lie in
// [0, limit); InvalidArgument naming op, slot and the value otherwise.
absl::StatusOr<std::vector<int64_t>> IndexValues(const ExecutionContext& ctx, const char* slot, int64_t limit);

// A creation op's shape from its ShapeTensor (a 1-D int tensor) or
// ShapeTensorList (one-value int tensors, one per dimension), as Paddle 2.x
// writes when a dimension is computed (a batch size from `shape`): `out`
// resized to it. Nothing changes when neither is bound (the `shape`
// attribute holds); an error names the tensor that is not on the host or
// not one int32/int64 value per dimension.
absl::Status ResizeFromShapeTensors(const ExecutionContext& ctx, Tensor* out);

// Whether ShapeTensor or ShapeTensorList names a variable.
bool HasShapeTensors(const OpDesc& op);

// The gradient output GradVarName(`slot`) shaped `dims` and zeroed (for
// kernels that add into it), or nullptr when the op does not bind it.
template <typename T>
T* ZeroedGradOutput(const ExecutionContext& ctx, const std::string& slot, const DDim& dims) {
  Tensor* t = ctx.Output(GradVarName(slot));
  if (t == nullptr) return nullptr;
  T* p = t->mutable_data<T>(dims);
  std::fill(p, p + t->numel(), T(0));
  return p;
}

// The input tensor of `slot`, or InvalidArgument naming the op and slot when
// it is missing or holds no data.
absl::StatusOr<const Tensor*> RequireInput(const ExecutionContext& ctx, const std::string& slot, size_t i = 0);
// `t` itself when it is in host memory, else its copy into `storage` (a
// GPU kernel reading a shape or bounds from a tensor a GPU op made, as
// Paddle's kernels copy them back synchronously).
absl::StatusOr<const Tensor*> OnHost(const Tensor& t, Tensor* storage);

// Checks that a tensor has dtype T.
template <typename T>
absl::Status RequireDtype(const ExecutionContext& ctx, const std::string& slot, const Tensor& t) {
  if (t.dtype() == DataTypeOf<T>::value) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": input ", slot, " has dtype ",
                                                 DataTypeName(t.dtype()), ", expected ",
                                                 DataTypeName(DataTypeOf<T>::value)));
}

// "'b' (X[1])": the i-th argument of input `slot` and where it sits (the
// index only when the slot holds several).
std::string InputLabel(const OpDesc& op, const std::string& slot, size_t i = 0);

// Checks that input `slot`[i], tensor `t`, has dtype T, the dtype of the
// kernel that runs: InvalidArgument "<op>: input 'b' (X[1]) has dtype int64,
// expected float32" otherwise. For kernels that read several inputs as T.
template <typename T>
absl::Status RequireInputDtype(const ExecutionContext& ctx, const std::string& slot, size_t i, const Tensor& t) {
  if (t.dtype() == DataTypeOf<T>::value) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": input ", InputLabel(ctx.op(), slot, i),
                                                 " has dtype ", DataTypeName(t.dtype()), ", expected ",
                                                 DataTypeName(DataTypeOf<T>::value)));
}

// At run time, InvalidArgument "<op>: input 'g' (Out@GRAD) has shape [3],
// expected [2, 3]" unless input `slot`[i] has shape `want`. Does nothing at
// build time (shapes there may be stale or unknown). For shape inference.
// The "2" ops' XShape: [0, X.dims...] (no data), from which their grads
// read X's shape back (FromXShape), as in Fluid.
DDim XShapeOf(const DDim& x);
DDim FromXShape(const DDim& xshape);

// A scalar is a scalar: Paddle 2.5+'s 0-D [] and Fluid 1.x's [1] pass as the
// same shape (a loss@GRAD of one shape reaches a grad op expecting the other).
bool SameScalar(const DDim& a, const DDim& b);
absl::Status ExpectInputDims(const InferShapeContext& ctx, const std::string& slot, const DDim& want, size_t i = 0);
// At run time, input `slot` (a gradient, e.g. Out@GRAD) must have the shape
// and dtype of input `like` (e.g. Out): InvalidArgument naming both otherwise.
absl::Status ExpectLikeInput(const InferShapeContext& ctx, const std::string& slot, const std::string& like);

// fill_constant's value as T: `value`, or `str_value` where Paddle wrote
// the value as text too (exact for int64s a float cannot hold), which then
// wins, as in Paddle. InvalidArgument for text that is not a number. The
// CPU and GPU kernels both read it here.
template <typename T>
absl::StatusOr<T> FillConstantValue(const ExecutionContext& ctx) {
  const std::string& text = ctx.Attr<std::string>("str_value");
  if (text.empty()) return static_cast<T>(ctx.Attr<float>("value"));
  bool ok;
  T value;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    int64_t v = 0;
    ok = absl::SimpleAtoi(text, &v);
    double d = 0;  // "6.0": Paddle reads the integer before the point
    if (!ok && absl::SimpleAtod(text, &d) && std::isfinite(d) && d == std::trunc(d)) {
      ok = true;
      v = static_cast<int64_t>(d);
    }
    value = static_cast<T>(v);
  } else {
    double v = 0;
    ok = absl::SimpleAtod(text, &v);
    value = static_cast<T>(v);
  }
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("fill_constant: str_value '", text, "' is not a number"));
  return value;
}

}  // namespace oar
