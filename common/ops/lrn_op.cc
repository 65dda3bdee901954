// lrn (fluid.layers.lrn): local response normalization across channels of
// an NCHW image, as Paddle computes it: MidOut = k + alpha·Σ x² over the n
// channels [c − (n−1)/2, c − (n−1)/2 + n), Out = x·MidOut^−beta; the
// gradient adds −2·alpha·beta·x·Σ (Out@GRAD·Out / MidOut) over the windows
// that hold each channel.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

template <typename T, bool kGrad>
absl::Status LrnKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const DDim& d = x->dims();
  if (d.size() != 4) return absl::InvalidArgumentError(absl::StrCat("lrn: X", d.ToString(), " must be 4-D NCHW"));
  const int64_t n = ctx.Attr<int32_t>("n"), c = d[1], plane = d[2] * d[3], pre = (n - 1) / 2;
  const double k = ctx.Attr<float>("k"), alpha = ctx.Attr<float>("alpha"), beta = ctx.Attr<float>("beta");
  const T* xp = x->data<T>();
  auto at = [&](int64_t b, int64_t ch, int64_t p) { return (b * c + ch) * plane + p; };
  std::vector<double> mid(static_cast<size_t>(x->numel()));
  for (int64_t b = 0; b < d[0]; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < plane; ++p) {
        double s = 0;
        for (int64_t j = std::max<int64_t>(0, ch - pre); j < std::min(c, ch - pre + n); ++j)
          s += xp[at(b, j, p)] * xp[at(b, j, p)];
        mid[static_cast<size_t>(at(b, ch, p))] = k + alpha * s;
      }
    }
  }
  if (!kGrad) {
    T* o = ctx.Output("Out")->mutable_data<T>(d);
    T* m = ctx.Output("MidOut") ? ctx.Output("MidOut")->mutable_data<T>(d) : nullptr;
    for (int64_t i = 0; i < x->numel(); ++i) {
      o[i] = static_cast<T>(xp[i] * std::pow(mid[static_cast<size_t>(i)], -beta));
      if (m) m[i] = static_cast<T>(mid[static_cast<size_t>(i)]);
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T* gp = g->data<T>();
  T* dp = dx->mutable_data<T>(d);
  for (int64_t b = 0; b < d[0]; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < plane; ++p) {
        const size_t i = static_cast<size_t>(at(b, ch, p));
        double s = 0;  // over the output channels whose window holds ch
        for (int64_t o = std::max<int64_t>(0, ch - (n - 1 - pre)); o <= std::min(c - 1, ch + pre); ++o) {
          const size_t e = static_cast<size_t>(at(b, o, p));
          s += gp[e] * xp[e] * std::pow(mid[e], -beta) / mid[e];
        }
        dp[i] = static_cast<T>(gp[i] * std::pow(mid[i], -beta) - 2 * alpha * beta * xp[i] * s);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterLrnOp(OpRegistry* r) {
  auto attrs = [](OpInfo& i) -> OpInfo& {
    return i.Attr("n", int32_t{5})
        .Attr("k", 2.0f)
        .Attr("alpha", 1e-4f)
        .Attr("beta", 0.75f)
        .Attr("data_format", std::string("AnyLayout"))
        .Implements("data_format", {std::string("AnyLayout"), std::string("NCHW")});
  };
  attrs(r->Register("lrn").NotInPlace().Input("X").Output("Out").Output("MidOut", kDispensable))
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({"X"}, {"Out", "MidOut"}, {"Out"}, {"X"}))
      .Kernel<float>(LrnKernel<float, false>)
      .Kernel<double>(LrnKernel<double, false>);
  attrs(r->Register("lrn_grad")
            .NotInPlace()
            .Input("X")
            .Input("Out", kDispensable)
            .Input("MidOut", kDispensable)
            .Input(GradVarName("Out"))
            .Output(GradVarName("X"), kDispensable))
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(LrnKernel<float, true>)
      .Kernel<double>(LrnKernel<double, true>);
}

}  // namespace oar
