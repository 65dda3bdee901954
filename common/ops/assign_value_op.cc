// assign_value (paddle.assign of a Python list or numpy array, and
// paddle.to_tensor in a static program): Out of `shape` and `dtype` filled
// from the values attribute of that dtype — fp32_values, fp64_values
// (Paddle 2.x's FLOAT64S), int32_values, int64_values or bool_values
// (Paddle writes bools as ints).
//
// Thread-safety: stateless kernels.
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

template <typename T, typename V>
absl::Status Fill(const ExecutionContext& ctx, const std::vector<V>& values) {
  const std::vector<int32_t> shape = ctx.Attr<std::vector<int32_t>>("shape");
  const DDim dims(std::vector<int64_t>(shape.begin(), shape.end()));
  if (static_cast<int64_t>(values.size()) != dims.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat("assign_value: ", values.size(), " values for shape ", dims.ToString()));
  }
  T* o = ctx.Output("Out")->mutable_data<T>(dims);
  for (size_t i = 0; i < values.size(); ++i) o[i] = static_cast<T>(values[i]);
  return absl::OkStatus();
}

absl::Status AssignValueKernel(const ExecutionContext& ctx) {
  switch (static_cast<DataType>(ctx.Attr<int32_t>("dtype"))) {
    case DataType::kFloat32:
      return Fill<float>(ctx, ctx.Attr<std::vector<float>>("fp32_values"));
    case DataType::kFloat64: {
      const auto& attrs = ctx.op().attrs;
      auto it = attrs.find("fp64_values");
      if (it != attrs.end() && it->second.index() == 12)
        return Fill<double>(ctx, std::get<std::vector<double>>(it->second));
      return Fill<double>(ctx, ctx.Attr<std::vector<float>>("fp32_values"));
    }
    case DataType::kInt32:
      return Fill<int32_t>(ctx, ctx.Attr<std::vector<int32_t>>("int32_values"));
    case DataType::kInt64:
      return Fill<int64_t>(ctx, ctx.Attr<std::vector<int64_t>>("int64_values"));
    case DataType::kBool:
      return Fill<bool>(ctx, ctx.Attr<std::vector<int32_t>>("bool_values"));
    default:
      return absl::UnimplementedError(absl::StrCat("assign_value: dtype ", ctx.Attr<int32_t>("dtype"),
                                                   " is not implemented (float32/64, int32/64, bool)"));
  }
}

}  // namespace

void RegisterAssignValueOp(OpRegistry* r) {
  r->Register("assign_value")
      .Output("Out")
      .Attr("shape", std::vector<int32_t>{})
      .Attr("dtype", static_cast<int32_t>(DataType::kFloat32))
      .Attr("fp32_values", std::vector<float>{})
      .Attr("fp64_values", std::vector<double>{})
      .Attr("int32_values", std::vector<int32_t>{})
      .Attr("int64_values", std::vector<int64_t>{})
      .Attr("bool_values", std::vector<int32_t>{})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(AssignValueKernel);
}

}  // namespace oar
