// dropout with both of Fluid's implementations:
//   downgrade_in_infer: train y = x·mask, test y = x·(1−p)
//   upscale_in_train:   train y = x·mask/(1−p), test y = x
// Mask holds the kept (1) / dropped (0) pattern for the gradient.
#include <random>

#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status DropoutInferShape(InferShapeContext& ctx) {
  const float p = ctx.Attr<float>("dropout_prob");
  if (!(p >= 0.0f && p <= 1.0f)) return ctx.Error("dropout_prob ", p, " is outside [0, 1]");
  const std::string impl = ctx.Attr<std::string>("dropout_implementation");
  if (impl != "downgrade_in_infer" && impl != "upscale_in_train") {
    return ctx.Error("dropout_implementation '", impl, "' is not downgrade_in_infer or upscale_in_train");
  }
  ctx.SetOutputDim("Out", ctx.InputDim("X"));
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.SetOutputDim("Mask", ctx.InputDim("X"));
  ctx.SetOutputDtype("Mask", ctx.InputDtype("X"));
  ctx.ShareLoD("X", "Out");
  return absl::OkStatus();
}

template <typename T>
absl::Status DropoutKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T p = static_cast<T>(ctx.Attr<float>("dropout_prob"));
  const bool upscale = ctx.Attr<std::string>("dropout_implementation") == "upscale_in_train";
  const T* xp = x->data<T>();
  T* y = ctx.Output("Out")->mutable_data<T>();
  const int64_t n = x->numel();
  if (ctx.Attr<bool>("is_test")) {
    const T k = upscale ? T(1) : T(1) - p;
    for (int64_t i = 0; i < n; ++i) y[i] = xp[i] * k;
    // A Mask of ones where the program names one: Paddle 2.x's programs keep
    // dropout_grad behind an is_test dropout, and it runs on the constant.
    if (Tensor* mask = ctx.Output("Mask")) {
      T* m = mask->mutable_data<T>(x->dims());
      std::fill(m, m + n, T(1));
    }
    return absl::OkStatus();
  }
  Tensor* mask_t = ctx.Output("Mask");
  Tensor scratch;
  if (mask_t == nullptr) {
    scratch.Resize(x->dims());
    mask_t = &scratch;
  }
  T* mask = mask_t->mutable_data<T>();
  std::mt19937_64 rng(ctx.Attr<bool>("fix_seed") ? static_cast<uint64_t>(ctx.Attr<int32_t>("seed"))
                                                 : std::random_device{}());
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  const T keep_scale = (upscale && p < T(1)) ? T(1) / (T(1) - p) : T(1);
  for (int64_t i = 0; i < n; ++i) {
    mask[i] = u(rng) < static_cast<float>(p) ? T(0) : T(1);
    y[i] = xp[i] * mask[i] * keep_scale;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status DropoutGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T p = static_cast<T>(ctx.Attr<float>("dropout_prob"));
  const bool upscale = ctx.Attr<std::string>("dropout_implementation") == "upscale_in_train";
  if (ctx.Attr<bool>("is_test")) {  // the forward scaled by a constant (and wrote no Mask), as Paddle's grad does
    const T k = upscale ? T(1) : T(1) - p;
    const T* gp = g->data<T>();
    T* d = dx->mutable_data<T>();
    for (int64_t i = 0, n = g->numel(); i < n; ++i) d[i] = gp[i] * k;
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* mask, RequireInput(ctx, "Mask"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Mask", 0, *mask));
  const T k = (upscale && p < T(1)) ? T(1) / (T(1) - p) : T(1);
  const T* mp = mask->data<T>();
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>();
  for (int64_t i = 0, n = g->numel(); i < n; ++i) d[i] = gp[i] * mp[i] * k;
  return absl::OkStatus();
}

absl::Status DropoutGradInferShape(InferShapeContext& ctx) {
  if (!ctx.Attr<bool>("is_test")) OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, "Mask", ctx.InputDim(GradVarName("Out"))));
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim(GradVarName("Out")));
  return absl::OkStatus();
}

}  // namespace

void RegisterDropoutOps(OpRegistry* r) {
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("dropout_prob", 0.5f)
        .Attr("is_test", false)
        .Attr("fix_seed", false)
        .Attr("seed", int32_t{0})
        .Attr("dropout_implementation", std::string("downgrade_in_infer"));
  };
  attrs(r->Register("dropout").Input("X").Input("Seed", kUnimplemented).Output("Out").Output("Mask", kDispensable))
      .SetInferShape(DropoutInferShape)
      .SetGradMaker(GradOpMaker({}, {"Mask"}, {"Out"}, {"X"}))
      .Kernel<float>(DropoutKernel<float>)
      .Kernel<double>(DropoutKernel<double>);
  // X and Out: Fluid 1.0-1.3's default grad maker passed them; the mask is what counts.
  attrs(r->Register("dropout_grad")
            .Input("Mask")
            .Input("X", kDispensable)
            .Input("Out", kDispensable)
            .Input(GradVarName("Out"))
            .Output(GradVarName("X"), kDispensable))
      .SetInferShape(DropoutGradInferShape)
      .Kernel<float>(DropoutGradKernel<float>)
      .Kernel<double>(DropoutGradKernel<double>);
}

}  // namespace oar
