// pool2d (NCHW): max or avg pooling with strides, paddings, global pooling,
// ceil_mode, `exclusive` (average over the window's in-image cells only) and
// `adaptive` (ksize is the output size; Paddle's AdaptiveAvgPool2D and
// AdaptiveMaxPool2D).
#include <limits>

#include "absl/strings/str_join.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/pool_geometry.h"

namespace oar {

static int64_t PoolOutSize(int64_t in, int64_t k, int64_t pad, int64_t stride, bool ceil_mode) {
  return ceil_mode ? (in - k + 2 * pad + stride - 1) / stride + 1 : (in - k + 2 * pad) / stride + 1;
}

absl::StatusOr<PoolGeom> PoolGeometry(const OpDesc& op, const DDim& x) {
  if (x.size() != 4) return absl::InvalidArgumentError(absl::StrCat("pool2d: X", x.ToString(), " must be 4-D NCHW"));
  auto ks = op.GetAttr<std::vector<int32_t>>("ksize");
  auto st = op.GetAttr<std::vector<int32_t>>("strides");
  auto pd = op.GetAttr<std::vector<int32_t>>("paddings");
  const std::string type = op.GetAttr<std::string>("pooling_type");
  if (type != "max" && type != "avg") {
    return absl::InvalidArgumentError(absl::StrCat("pool2d: pooling_type '", type, "' is not max or avg"));
  }
  if (op.GetAttr<bool>("adaptive") && !op.GetAttr<bool>("global_pooling")) {
    if (ks.size() != 2 || ks[0] < 1 || ks[1] < 1) {
      return absl::InvalidArgumentError(absl::StrCat("pool2d: adaptive pooling's ksize (the output size) [",
                                                     absl::StrJoin(ks, ", "), "] must be two positive values"));
    }
    PoolGeom g{x[0], x[1], x[2], x[3], ks[0], ks[1], -1, -1, -1, -1, 0, 0, type == "max", true, false};
    if (x[2] >= 0 && x[3] >= 0 && x[2] % ks[0] == 0 && x[3] % ks[1] == 0) {
      g.kh = g.sh = x[2] / ks[0];  // equal windows side by side: a regular pooling
      g.kw = g.sw = x[3] / ks[1];
    } else {
      g.adaptive = true;
    }
    return g;
  }
  if (op.GetAttr<bool>("global_pooling")) {
    ks = {static_cast<int32_t>(x[2]), static_cast<int32_t>(x[3])};
    pd = {0, 0};
  }
  if (ks.size() != 2 || st.size() != 2 || pd.size() != 2 || ks[0] < 1 || ks[1] < 1 || st[0] < 1 || st[1] < 1 ||
      pd[0] < 0 || pd[1] < 0) {
    return absl::InvalidArgumentError(absl::StrCat("pool2d: ksize [", absl::StrJoin(ks, ", "), "], strides [",
                                                   absl::StrJoin(st, ", "), "] and paddings [", absl::StrJoin(pd, ", "),
                                                   "] must be two positive (paddings: non-negative) values"));
  }
  const bool ceil = op.GetAttr<bool>("ceil_mode");
  PoolGeom g{x[0],
             x[1],
             x[2],
             x[3],
             -1,
             -1,
             ks[0],
             ks[1],
             st[0],
             st[1],
             pd[0],
             pd[1],
             type == "max",
             op.GetAttr<bool>("exclusive"),
             ceil};
  if (x[2] >= 0) g.oh = PoolOutSize(x[2], g.kh, g.ph, g.sh, ceil);
  if (x[3] >= 0) g.ow = PoolOutSize(x[3], g.kw, g.pw, g.sw, ceil);
  if ((x[2] >= 0 && g.oh <= 0) || (x[3] >= 0 && g.ow <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("pool2d: window does not fit X", x.ToString()));
  }
  return g;
}

namespace {

absl::Status PoolInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  OAR_ASSIGN_OR_RETURN(PoolGeom g, PoolGeometry(ctx.op(), x));
  ctx.SetOutputDim("Out", DDim{x[0], x[1], g.oh, g.ow});
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  return absl::OkStatus();
}

// Out and Out@GRAD have the shape pooling X gives.
absl::Status PoolGradInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  OAR_ASSIGN_OR_RETURN(PoolGeom g, PoolGeometry(ctx.op(), x));
  const DDim out{x[0], x[1], g.oh, g.ow};
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, "Out", out));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), out));
  return GradSameShapeAsX(ctx);
}

// Calls fn(out_index, h0, h1, w0, w1, divisor) for each output cell; the
// window [h0,h1)×[w0,w1) is clipped to the image.
template <typename Fn>
void ForEachWindow(const PoolGeom& g, Fn fn) {
  if (g.adaptive) {
    for (int64_t oh = 0; oh < g.oh; ++oh) {
      const int64_t h0 = oh * g.h / g.oh, h1 = ((oh + 1) * g.h + g.oh - 1) / g.oh;
      for (int64_t ow = 0; ow < g.ow; ++ow) {
        const int64_t w0 = ow * g.w / g.ow, w1 = ((ow + 1) * g.w + g.ow - 1) / g.ow;
        fn(oh * g.ow + ow, h0, h1, w0, w1, (h1 - h0) * (w1 - w0));
      }
    }
    return;
  }
  for (int64_t oh = 0; oh < g.oh; ++oh) {
    const int64_t hs = oh * g.sh - g.ph, he = std::min(hs + g.kh, g.h + g.ph);
    const int64_t h0 = std::max<int64_t>(hs, 0), h1 = std::min(he, g.h);
    for (int64_t ow = 0; ow < g.ow; ++ow) {
      const int64_t ws = ow * g.sw - g.pw, we = std::min(ws + g.kw, g.w + g.pw);
      const int64_t w0 = std::max<int64_t>(ws, 0), w1 = std::min(we, g.w);
      const int64_t div = g.exclusive ? (h1 - h0) * (w1 - w0) : g.kh * g.kw;
      fn(oh * g.ow + ow, h0, h1, w0, w1, div);
    }
  }
}

template <typename T>
absl::Status PoolKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(PoolGeom g, PoolGeometry(ctx.op(), x->dims()));
  const T* xp = x->data<T>();
  T* op = ctx.Output("Out")->mutable_data<T>();
  for (int64_t p = 0; p < g.n * g.c; ++p) {
    const T* img = xp + p * g.h * g.w;
    T* out = op + p * g.oh * g.ow;
    ForEachWindow(g, [&](int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t div) {
      T acc = g.is_max ? -std::numeric_limits<T>::infinity() : T(0);
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) {
          acc = g.is_max ? std::max(acc, img[h * g.w + w]) : acc + img[h * g.w + w];
        }
      }
      out[o] = g.is_max ? acc : (div > 0 ? acc / T(div) : T(0));
    });
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status PoolGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Out", 0, *out));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *dout));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  OAR_ASSIGN_OR_RETURN(PoolGeom g, PoolGeometry(ctx.op(), x->dims()));
  const T* xp = x->data<T>();
  const T* yp = out->data<T>();
  const T* gp = dout->data<T>();
  T* dp = dx->mutable_data<T>();
  std::fill(dp, dp + dx->numel(), T(0));
  for (int64_t p = 0; p < g.n * g.c; ++p) {
    const T* img = xp + p * g.h * g.w;
    T* dimg = dp + p * g.h * g.w;
    const T* y = yp + p * g.oh * g.ow;
    const T* gy = gp + p * g.oh * g.ow;
    ForEachWindow(g, [&](int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1, int64_t div) {
      if (g.is_max) {  // the first cell that holds the maximum takes the gradient
        for (int64_t h = h0; h < h1; ++h) {
          for (int64_t w = w0; w < w1; ++w) {
            if (img[h * g.w + w] == y[o]) {
              dimg[h * g.w + w] += gy[o];
              return;
            }
          }
        }
        return;
      }
      if (div <= 0) return;
      const T share = gy[o] / T(div);
      for (int64_t h = h0; h < h1; ++h) {
        for (int64_t w = w0; w < w1; ++w) dimg[h * g.w + w] += share;
      }
    });
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterPoolOps(OpRegistry* r) {
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("pooling_type", std::string("max"))
        .Attr("ksize", std::vector<int32_t>{2, 2})
        .Attr("global_pooling", false)
        .Attr("strides", std::vector<int32_t>{1, 1})
        .Attr("paddings", std::vector<int32_t>{0, 0})
        .Attr("exclusive", true)
        .Attr("adaptive", false)
        .Attr("ceil_mode", false)
        .Attr("use_cudnn", false)
        .Attr("use_mkldnn", false)
        .Attr("data_format", std::string("AnyLayout"))
        .Attr("padding_algorithm", std::string("EXPLICIT"))
        .Implements("data_format", {std::string("AnyLayout"), std::string("NCHW")})
        .Implements("padding_algorithm", {std::string("EXPLICIT")});
  };
  attrs(r->Register("pool2d").NotInPlace().Input("X").Output("Out"))
      .SetInferShape(PoolInferShape)
      .SetGradMaker(GradOpMaker({"X"}, {"Out"}, {"Out"}, {"X"}))
      .Kernel<float>(PoolKernel<float>)
      .Kernel<double>(PoolKernel<double>);
  attrs(r->Register("pool2d_grad")
            .NotInPlace()
            .Input("X")
            .Input("Out")
            .Input(GradVarName("Out"))
            .Output(GradVarName("X"), kDispensable))
      .SetInferShape(PoolGradInferShape)
      .Kernel<float>(PoolGradKernel<float>)
      .Kernel<double>(PoolGradKernel<double>);
}

}  // namespace oar
