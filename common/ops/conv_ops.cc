// conv2d (NCHW, groups, strides, paddings, dilations) by im2col + one GEMM
// per image and group, and its gradient (col2im for the input); also under
// depthwise_conv2d, Paddle's name for a Conv2D whose groups are its channels.
#include <array>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/base/blas.h"
#include "common/framework/op_registry.h"
#include "common/ops/im2col.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// Reads the four 2-element attributes, checking their lengths and signs.
absl::StatusOr<std::array<std::vector<int32_t>, 3>> ConvAttrs(const OpDesc& op) {
  std::array<std::vector<int32_t>, 3> a = {op.GetAttr<std::vector<int32_t>>("strides"),
                                           op.GetAttr<std::vector<int32_t>>("paddings"),
                                           op.GetAttr<std::vector<int32_t>>("dilations")};
  const char* names[] = {"strides", "paddings", "dilations"};
  for (int i = 0; i < 3; ++i) {
    if (a[i].size() != 2 || a[i][0] < (i == 1 ? 0 : 1) || a[i][1] < (i == 1 ? 0 : 1)) {
      return absl::InvalidArgumentError(absl::StrCat(op.type, ": ", names[i], " must be two ",
                                                     i == 1 ? "non-negative" : "positive", " values, got [",
                                                     absl::StrJoin(a[i], ", "), "]"));
    }
  }
  return a;
}

// Output's shape for Input and Filter, checking channels, groups and attrs.
absl::StatusOr<DDim> ConvOutDims(const InferShapeContext& ctx) {
  DDim in = ctx.InputDim("Input"), f = ctx.InputDim("Filter");
  if (in.size() != 4 || f.size() != 4) {
    return ctx.Error("Input", in.ToString(), " and Filter", f.ToString(), " must be 4-D (NCHW, MCHW)");
  }
  OAR_ASSIGN_OR_RETURN(auto a, ConvAttrs(ctx.op()));
  if (ctx.HasInput("Bias") || ctx.HasInput("ResidualData")) {
    return ctx.Error("the fused Bias/ResidualData inputs (MKL-DNN only in Fluid) are not supported");
  }
  const int groups = ctx.Attr<int32_t>("groups");
  if (groups < 1 || (in[1] >= 0 && in[1] != f[1] * groups) || f[0] % groups != 0) {
    return ctx.Error("Input has ", in[1], " channels, Filter", f.ToString(), " with groups=", groups, " expects ",
                     f[1] * groups, " (and filters divisible by groups)");
  }
  DDim out{in[0], f[0], -1, -1};
  for (int k = 0; k < 2; ++k) {
    if (in[2 + k] < 0) continue;
    int64_t o = ConvOutSize(in[2 + k], f[2 + k], a[1][k], a[0][k], a[2][k]);
    if (o <= 0) return ctx.Error("Filter", f.ToString(), " does not fit Input", in.ToString(), " with these paddings");
    out[2 + k] = o;
  }
  return out;
}

absl::Status ConvInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, ConvOutDims(ctx));
  ctx.SetOutputDim("Output", out);
  ctx.SetOutputDtype("Output", ctx.InputDtype("Input"));
  return absl::OkStatus();
}

// Everything both kernels derive from the shapes: one group's geometry and
// the GEMM sizes (m filters × k = C·kh·kw, over `plane` output cells).
struct ConvSetup {
  ConvGeometry g;
  int64_t n, groups, m, k, plane, in_group;
};

ConvSetup Setup(const DDim& in, const DDim& f, const DDim& out, const OpDesc& op) {
  const int64_t groups = op.GetAttr<int32_t>("groups");
  auto s = op.GetAttr<std::vector<int32_t>>("strides");
  auto p = op.GetAttr<std::vector<int32_t>>("paddings");
  auto d = op.GetAttr<std::vector<int32_t>>("dilations");
  ConvSetup c;
  c.g = ConvGeometry{in[1] / groups, in[2], in[3], f[2], f[3], s[0], s[1], p[0], p[1], d[0], d[1], out[2], out[3]};
  c.n = in[0];
  c.groups = groups;
  c.m = f[0] / groups;
  c.k = c.g.channels * c.g.kernel_h * c.g.kernel_w;
  c.plane = c.g.out_h * c.g.out_w;
  c.in_group = c.g.channels * c.g.height * c.g.width;
  return c;
}

template <typename T>
absl::Status ConvKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* filter, RequireInput(ctx, "Filter"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Input", 0, *in));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Filter", 0, *filter));
  Tensor* out = ctx.Output("Output");
  const ConvSetup c = Setup(in->dims(), filter->dims(), out->dims(), ctx.op());
  std::vector<T> col(static_cast<size_t>(c.k * c.plane));
  const T* x = in->data<T>();
  const T* w = filter->data<T>();
  T* y = out->mutable_data<T>();
  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t gi = 0; gi < c.groups; ++gi) {
      Im2Col(x + (i * c.groups + gi) * c.in_group, c.g, col.data());
      Gemm<T>(false, false, c.m, c.plane, c.k, T(1), w + gi * c.m * c.k, col.data(), T(0),
              y + (i * c.groups + gi) * c.m * c.plane);
    }
  }
  return absl::OkStatus();
}

absl::Status ConvGradInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, ConvOutDims(ctx));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Output"), out));
  ctx.SetOutputDim(GradVarName("Input"), ctx.InputDim("Input"));
  ctx.SetOutputDim(GradVarName("Filter"), ctx.InputDim("Filter"));
  return absl::OkStatus();
}

template <typename T>
absl::Status ConvGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* filter, RequireInput(ctx, "Filter"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Output")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Input", 0, *in));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Filter", 0, *filter));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Output"), 0, *dout));
  Tensor* din = ctx.Output(GradVarName("Input"));
  Tensor* dfilter = ctx.Output(GradVarName("Filter"));
  const ConvSetup c = Setup(in->dims(), filter->dims(), dout->dims(), ctx.op());
  std::vector<T> col(static_cast<size_t>(c.k * c.plane));
  const T* x = in->data<T>();
  const T* w = filter->data<T>();
  const T* dy = dout->data<T>();
  T* dx = din ? din->mutable_data<T>() : nullptr;
  T* dw = dfilter ? dfilter->mutable_data<T>() : nullptr;
  if (dx) std::fill(dx, dx + din->numel(), T(0));
  if (dw) std::fill(dw, dw + dfilter->numel(), T(0));
  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t gi = 0; gi < c.groups; ++gi) {
      const T* dy_g = dy + (i * c.groups + gi) * c.m * c.plane;
      if (dw) {  // dW_g += dY_g · colᵀ
        Im2Col(x + (i * c.groups + gi) * c.in_group, c.g, col.data());
        Gemm<T>(false, true, c.m, c.k, c.plane, T(1), dy_g, col.data(), T(1), dw + gi * c.m * c.k);
      }
      if (dx) {  // col = W_gᵀ · dY_g, then col2im
        Gemm<T>(true, false, c.k, c.plane, c.m, T(1), w + gi * c.m * c.k, dy_g, T(0), col.data());
        Col2Im(col.data(), c.g, dx + (i * c.groups + gi) * c.in_group);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterConvOps(OpRegistry* r) {
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("strides", std::vector<int32_t>{1, 1})
        .Attr("paddings", std::vector<int32_t>{0, 0})
        .Attr("dilations", std::vector<int32_t>{1, 1})
        .Attr("groups", int32_t{1})
        .Attr("use_cudnn", false)
        .Attr("use_mkldnn", false)
        .Attr("data_format", std::string("AnyLayout"))
        .Attr("workspace_size_MB", int32_t{4096})
        .Attr("exhaustive_search", false)
        .Attr("padding_algorithm", std::string("EXPLICIT"))
        .Implements("data_format", {std::string("AnyLayout"), std::string("NCHW")})
        .Implements("padding_algorithm", {std::string("EXPLICIT")});
  };
  for (const std::string type : {"conv2d", "depthwise_conv2d"}) {
    // Output on Input: the CPU kernel is right only while im2col copies an
    // image before its output is written, and cuDNN refuses it outright.
    attrs(r->Register(type)
              .NotInPlace()
              .Input("Input")
              .Input("Filter")
              .Input("Bias", kDispensable)
              .Input("ResidualData", kDispensable)
              .Output("Output"))
        .SetInferShape(ConvInferShape)
        .SetGradMaker(GradOpMaker({"Input", "Filter"}, {}, {"Output"}, {"Input", "Filter"}))
        .Kernel<float>(ConvKernel<float>)
        .Kernel<double>(ConvKernel<double>);
    // Output: Fluid 1.0-1.2's default grad maker passed it; no kernel reads it.
    attrs(r->Register(type + "_grad")
              .NotInPlace()
              .Input("Input")
              .Input("Filter")
              .Input("Bias", kDispensable)
              .Input("Output", kDispensable)
              .Input("ResidualData", kDispensable | kUnimplemented)
              .Input(GradVarName("Output"))
              .Output(GradVarName("Input"), kDispensable)
              .Output(GradVarName("Filter"), kDispensable)
              .Output(GradVarName("Bias"), kDispensable))
        .SetInferShape(ConvGradInferShape)
        .Kernel<float>(ConvGradKernel<float>)
        .Kernel<double>(ConvGradKernel<double>);
  }
}

}  // namespace oar
