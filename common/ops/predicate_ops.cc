// Value tests, as Fluid and Paddle 2.x write them: isnan / isinf / isfinite
// (Fluid 1.x: one bool, whether any element is NaN / Inf, or all are finite;
// Paddle 2.x's isnan_v2 / isinf_v2 / isfinite_v2: elementwise), and
// where_index (fluid.layers.where, paddle.nonzero: the coordinates of the
// true elements, one row each, in row-major order). No gradients.
//
// Thread-safety: stateless kernels.
#include <cmath>
#include <vector>

#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

enum class Test { kNan, kInf, kFinite };

template <Test kTest, typename T>
bool Holds(T v) {
  if (kTest == Test::kNan) return std::isnan(static_cast<double>(v));
  if (kTest == Test::kInf) return std::isinf(static_cast<double>(v));
  return std::isfinite(static_cast<double>(v));
}

template <Test kTest, bool kElementwise, typename T>
absl::Status TestKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T* xp = x->data<T>();
  if (kElementwise) {
    bool* o = ctx.Output("Out")->mutable_data<bool>(x->dims());
    for (int64_t i = 0, n = x->numel(); i < n; ++i) o[i] = Holds<kTest>(xp[i]);
    return absl::OkStatus();
  }
  bool r = kTest == Test::kFinite;  // finite: all are; nan, inf: any is
  for (int64_t i = 0, n = x->numel(); i < n; ++i) {
    if (kTest == Test::kFinite)
      r = r && Holds<kTest>(xp[i]);
    else
      r = r || Holds<kTest>(xp[i]);
  }
  ctx.Output("Out")->mutable_data<bool>(DDim{1})[0] = r;
  return absl::OkStatus();
}

template <Test kTest, bool kElementwise>
void RegisterTest(OpRegistry* r, const std::string& type) {
  NumericCpuKernels(r->Register(type)
                        .Input("X")
                        .Output("Out")
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(+[](const ExecutionContext& c) { return InputDtypeOf(c, "X"); }),
                    TestKernel<kTest, kElementwise, float>, TestKernel<kTest, kElementwise, double>,
                    TestKernel<kTest, kElementwise, int32_t>, TestKernel<kTest, kElementwise, int64_t>);
}

absl::Status WhereIndexKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* c, RequireInput(ctx, "Condition"));
  const DDim& d = c->dims();
  std::vector<int64_t> hits;
  for (int64_t i = 0, n = c->numel(); i < n; ++i) {
    bool v = false;
    switch (c->dtype()) {
      case DataType::kBool:
        v = c->data<bool>()[i];
        break;
      case DataType::kFloat32:
        v = c->data<float>()[i] != 0;
        break;
      case DataType::kInt32:
        v = c->data<int32_t>()[i] != 0;
        break;
      case DataType::kInt64:
        v = c->data<int64_t>()[i] != 0;
        break;
      default:
        return absl::InvalidArgumentError("where_index: Condition must be bool, float32, int32 or int64");
    }
    if (v) hits.push_back(i);
  }
  const int64_t rank = d.size();
  int64_t* o = ctx.Output("Out")->mutable_data<int64_t>(DDim{static_cast<int64_t>(hits.size()), rank});
  for (size_t h = 0; h < hits.size(); ++h) {
    int64_t rest = hits[h];
    for (int64_t k = rank - 1; k >= 0; --k) {
      o[static_cast<int64_t>(h) * rank + k] = rest % d[static_cast<int>(k)];
      rest /= d[static_cast<int>(k)];
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterPredicateOps(OpRegistry* r) {
  RegisterTest<Test::kNan, false>(r, "isnan");
  RegisterTest<Test::kInf, false>(r, "isinf");
  RegisterTest<Test::kFinite, false>(r, "isfinite");
  RegisterTest<Test::kNan, true>(r, "isnan_v2");
  RegisterTest<Test::kInf, true>(r, "isinf_v2");
  RegisterTest<Test::kFinite, true>(r, "isfinite_v2");
  r->Register("where_index")
      .Input("Condition")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(WhereIndexKernel);
}

}  // namespace oar
