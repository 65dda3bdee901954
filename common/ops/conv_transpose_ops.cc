// conv2d_transpose (NCHW; Filter [C_in, C_out/groups, kh, kw]; strides,
// paddings, dilations, groups, output_padding or output_size) and its
// gradient, the adjoint of conv2d built from the same im2col/col2im and one
// GEMM per image and group: the forward is conv2d's input gradient, the
// input gradient a conv2d, the filter gradient conv2d's filter gradient with
// the roles of input and output exchanged.
//
// Thread-safety: stateless kernels.
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/blas.h"
#include "common/framework/op_registry.h"
#include "common/ops/im2col.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

struct TransposeSetup {
  ConvGeometry g;  // of the output image (one group), as conv2d's input
  int64_t n = 0, groups = 1, m = 0, k = 0, plane = 0, out_group = 0, in_group = 0;
  DDim out;
};

absl::StatusOr<TransposeSetup> Setup(const ExecutionContext& ctx, const DDim& x, const DDim& f) {
  const std::string& type = ctx.op().type;
  const auto s = ctx.Attr<std::vector<int32_t>>("strides");
  auto p = ctx.Attr<std::vector<int32_t>>("paddings");
  const auto d = ctx.Attr<std::vector<int32_t>>("dilations");
  const auto out_size = ctx.Attr<std::vector<int32_t>>("output_size");
  const auto out_pad = ctx.Attr<std::vector<int32_t>>("output_padding");
  const int64_t groups = ctx.Attr<int32_t>("groups");
  if (p.size() == 4 && p[0] == p[1] && p[2] == p[3]) p = {p[0], p[2]};
  if (x.size() != 4 || f.size() != 4 || s.size() != 2 || p.size() != 2 || d.size() != 2 || groups < 1 || x[1] != f[0] ||
      x[1] % groups != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, ": Input", x.ToString(), ", Filter", f.ToString(), ", strides [", absl::StrJoin(s, ", "),
                     "], paddings [", absl::StrJoin(p, ", "), "], dilations [", absl::StrJoin(d, ", "), "] and groups ",
                     groups, " do not fit (Filter is [C_in, C_out/groups, kh, kw])"));
  }
  TransposeSetup c;
  c.n = x[0], c.groups = groups;
  int64_t hw[2];
  for (int i = 0; i < 2; ++i) {
    hw[i] = (x[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (f[2 + i] - 1) + 1;
    if (!out_pad.empty()) hw[i] += out_pad[static_cast<size_t>(i)];
    if (!out_size.empty()) {
      if (out_size[static_cast<size_t>(i)] < hw[i] || out_size[static_cast<size_t>(i)] >= hw[i] + s[i]) {
        return absl::InvalidArgumentError(absl::StrCat(type, ": output_size [", absl::StrJoin(out_size, ", "),
                                                       "] is not reachable from Input", x.ToString()));
      }
      hw[i] = out_size[static_cast<size_t>(i)];
    }
  }
  c.out = DDim{x[0], f[1] * groups, hw[0], hw[1]};
  c.g = ConvGeometry{f[1], hw[0], hw[1], f[2], f[3], s[0], s[1], p[0], p[1], d[0], d[1], x[2], x[3]};
  c.m = x[1] / groups;       // input channels per group
  c.k = f[1] * f[2] * f[3];  // output channels per group × window
  c.plane = x[2] * x[3];
  c.out_group = f[1] * hw[0] * hw[1];
  c.in_group = c.m * c.plane;
  return c;
}

template <typename T>
absl::Status TransposeKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* filter, RequireInput(ctx, "Filter"));
  OAR_ASSIGN_OR_RETURN(const TransposeSetup c, Setup(ctx, in->dims(), filter->dims()));
  std::vector<T> col(static_cast<size_t>(c.k * c.plane));
  const T* x = in->data<T>();
  const T* w = filter->data<T>();
  Tensor* out = ctx.Output("Output");
  T* y = out->mutable_data<T>(c.out);
  std::fill(y, y + out->numel(), T(0));
  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t gi = 0; gi < c.groups; ++gi) {  // col = W_gᵀ · X_g, then col2im
      Gemm<T>(true, false, c.k, c.plane, c.m, T(1), w + gi * c.m * c.k, x + (i * c.groups + gi) * c.in_group, T(0),
              col.data());
      Col2Im(col.data(), c.g, y + (i * c.groups + gi) * c.out_group);
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status TransposeGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* filter, RequireInput(ctx, "Filter"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Output")));
  OAR_ASSIGN_OR_RETURN(const TransposeSetup c, Setup(ctx, in->dims(), filter->dims()));
  if (dout->dims() != c.out) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": Output@GRAD", dout->dims().ToString(), " is not ", c.out.ToString()));
  }
  Tensor* din = ctx.Output(GradVarName("Input"));
  Tensor* dfilter = ctx.Output(GradVarName("Filter"));
  std::vector<T> col(static_cast<size_t>(c.k * c.plane));
  const T* x = in->data<T>();
  const T* w = filter->data<T>();
  const T* dy = dout->data<T>();
  T* dx = din ? din->mutable_data<T>(in->dims()) : nullptr;
  T* dw = dfilter ? dfilter->mutable_data<T>(filter->dims()) : nullptr;
  if (dw) std::fill(dw, dw + dfilter->numel(), T(0));
  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t gi = 0; gi < c.groups; ++gi) {
      Im2Col(dy + (i * c.groups + gi) * c.out_group, c.g, col.data());
      const T* x_g = x + (i * c.groups + gi) * c.in_group;
      if (dx) {  // dX_g = W_g · col
        Gemm<T>(false, false, c.m, c.plane, c.k, T(1), w + gi * c.m * c.k, col.data(), T(0),
                dx + (i * c.groups + gi) * c.in_group);
      }
      if (dw) {  // dW_g += X_g · colᵀ
        Gemm<T>(false, true, c.m, c.k, c.plane, T(1), x_g, col.data(), T(1), dw + gi * c.m * c.k);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterConvTransposeOps(OpRegistry* r) {
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("strides", std::vector<int32_t>{1, 1})
        .Attr("paddings", std::vector<int32_t>{0, 0})
        .Attr("dilations", std::vector<int32_t>{1, 1})
        .Attr("groups", int32_t{1})
        .Attr("output_size", std::vector<int32_t>{})
        .Attr("output_padding", std::vector<int32_t>{})
        .Attr("use_cudnn", false)
        .Attr("use_mkldnn", false)
        .Attr("data_format", std::string("NCHW"))
        .Attr("padding_algorithm", std::string("EXPLICIT"))
        .Attr("workspace_size_MB", int32_t{4096})
        .Implements("data_format", {std::string("AnyLayout"), std::string("NCHW")})
        .Implements("padding_algorithm", {std::string("EXPLICIT")});
  };
  attrs(r->Register("conv2d_transpose")
            .NotInPlace()
            .Input("Input")
            .Input("Filter")
            .Input("Bias", kDispensable | kUnimplemented)
            .Output("Output"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"Input", "Filter"}, {}, {"Output"}, {"Input", "Filter"}))
      .Kernel<float>(TransposeKernel<float>)
      .Kernel<double>(TransposeKernel<double>);
  attrs(r->Register("conv2d_transpose_grad")
            .NotInPlace()
            .Input("Input")
            .Input("Filter")
            .Input("Output", kDispensable)
            .Input(GradVarName("Output"))
            .Output(GradVarName("Input"), kDispensable)
            .Output(GradVarName("Filter"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(TransposeGradKernel<float>)
      .Kernel<double>(TransposeGradKernel<double>);
}

}  // namespace oar
