// Per-channel rearrangements and activations of NCHW images, with their
// gradients, as Fluid and Paddle write them: pixel_shuffle (C·r² channels to
// an r-times larger image), shuffle_channel (channels of `group` groups
// interleaved), temporal_shift (TSM: of each clip of seg_num frames, the
// first shift_ratio of channels from the previous frame, the next as many
// from the following one), maxout (the max of each `groups` channels),
// prelu (mode all, channel or element) and affine_channel (x·scale + bias
// per channel).
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status Need4D(const ExecutionContext& ctx, const DDim& x) {
  if (x.size() == 4) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": X", x.ToString(), " must be 4-D NCHW"));
}

// A rearrangement: the output's shape and, for each output element, the
// input element it copies (−1: zero).
struct Mapping {
  DDim out;
  std::vector<int64_t> src;
};

absl::StatusOr<Mapping> Map(const ExecutionContext& ctx, const DDim& x) {
  OAR_RETURN_IF_ERROR(Need4D(ctx, x));
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  const std::string& type = ctx.op().type;
  Mapping m{.out = x};
  if (absl::StartsWith(type, "pixel_shuffle")) {
    const int64_t r = ctx.Attr<int32_t>("upscale_factor");
    if (r < 1 || c % (r * r) != 0)
      return absl::InvalidArgumentError(absl::StrCat(type, ": C=", c, " not divisible by r²"));
    m.out = DDim{n, c / (r * r), h * r, w * r};
  } else if (absl::StartsWith(type, "shuffle_channel")) {
    if (ctx.Attr<int32_t>("group") < 1 || c % ctx.Attr<int32_t>("group") != 0) {
      return absl::InvalidArgumentError(absl::StrCat(type, ": C=", c, " not divisible by group"));
    }
  } else if (n % ctx.Attr<int32_t>("seg_num") != 0) {
    return absl::InvalidArgumentError(absl::StrCat(type, ": N=", n, " not divisible by seg_num"));
  }
  const DDim& o = m.out;
  m.src.resize(static_cast<size_t>(o.numel()));
  for (int64_t i = 0; i < o.numel(); ++i) {
    const int64_t ow = i % o[3], oh = (i / o[3]) % o[2], oc = (i / (o[3] * o[2])) % o[1], on = i / (o[3] * o[2] * o[1]);
    int64_t sn = on, sc = oc, sh = oh, sw = ow;
    if (absl::StartsWith(type, "pixel_shuffle")) {
      const int64_t r = ctx.Attr<int32_t>("upscale_factor");
      sc = oc * r * r + (oh % r) * r + (ow % r), sh = oh / r, sw = ow / r;
    } else if (absl::StartsWith(type, "shuffle_channel")) {
      const int64_t g = ctx.Attr<int32_t>("group"), k = c / g;
      sc = (oc % g) * k + oc / g;
    } else {  // temporal_shift
      const int64_t t = ctx.Attr<int32_t>("seg_num"), ti = on % t;
      const float ratio = ctx.Attr<float>("shift_ratio");
      const int64_t c1 = static_cast<int64_t>(static_cast<float>(c) * ratio);
      const int64_t c2 = static_cast<int64_t>(static_cast<float>(c) * 2 * ratio);
      const int64_t st = oc < c1 ? ti - 1 : (oc < c2 ? ti + 1 : ti);
      if (st < 0 || st >= t) {
        m.src[static_cast<size_t>(i)] = -1;
        continue;
      }
      sn = on - ti + st;
    }
    m.src[static_cast<size_t>(i)] = ((sn * c + sc) * h + sh) * w + sw;
  }
  return m;
}

template <typename T>
absl::Status MapKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Mapping m, Map(ctx, x->dims()));
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(m.out);
  for (size_t i = 0; i < m.src.size(); ++i) o[i] = m.src[i] < 0 ? T(0) : xp[m.src[i]];
  return absl::OkStatus();
}

// The X shape a rearrangement's gradient restores, from Out@GRAD's.
DDim InputDims(const ExecutionContext& ctx, const DDim& out) {
  if (!absl::StartsWith(ctx.op().type, "pixel_shuffle") || out.size() != 4) return out;
  const int64_t r = ctx.Attr<int32_t>("upscale_factor");
  return DDim{out[0], out[1] * r * r, out[2] / r, out[3] / r};
}

template <typename T>
absl::Status MapGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const DDim xd = InputDims(ctx, g->dims());
  OAR_ASSIGN_OR_RETURN(const Mapping m, Map(ctx, xd));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(xd);
  std::fill(d, d + dx->numel(), T(0));
  for (size_t i = 0; i < m.src.size(); ++i) {
    if (m.src[i] >= 0) d[m.src[i]] += gp[i];
  }
  return absl::OkStatus();
}

// ---- maxout ----

template <typename T, bool kGrad>
absl::Status MaxoutKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_RETURN_IF_ERROR(Need4D(ctx, x->dims()));
  const DDim& d = x->dims();
  const int64_t g = ctx.Attr<int32_t>("groups"), plane = d[2] * d[3], oc = d[1] / std::max<int64_t>(g, 1);
  if (g < 1 || d[1] % g != 0 ||
      (ctx.op().HasAttr("axis") && ctx.Attr<int32_t>("axis") != 1 && ctx.Attr<int32_t>("axis") != -3)) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": X", d.ToString(), " with groups=", g, " (Oar implements axis 1, NCHW)"));
  }
  const T* xp = x->data<T>();
  T* o = nullptr;
  T* dx = nullptr;
  const T* gp = nullptr;
  if (!kGrad) {
    o = ctx.Output("Out")->mutable_data<T>(DDim{d[0], oc, d[2], d[3]});
  } else {
    OAR_ASSIGN_OR_RETURN(const Tensor* gt, RequireInput(ctx, GradVarName("Out")));
    gp = gt->data<T>();
    Tensor* t = ctx.Output(GradVarName("X"));
    if (t == nullptr) return absl::OkStatus();
    dx = t->mutable_data<T>(d);
    std::fill(dx, dx + t->numel(), T(0));
  }
  for (int64_t n = 0; n < d[0]; ++n) {
    for (int64_t c = 0; c < oc; ++c) {
      for (int64_t p = 0; p < plane; ++p) {
        int64_t best = ((n * d[1]) + c * g) * plane + p;
        for (int64_t k = 1; k < g; ++k) {
          const int64_t at = ((n * d[1]) + c * g + k) * plane + p;
          if (xp[at] > xp[best]) best = at;
        }
        const int64_t oi = (n * oc + c) * plane + p;
        if (kGrad)
          dx[best] += gp[oi];
        else
          o[oi] = xp[best];
      }
    }
  }
  return absl::OkStatus();
}

// ---- prelu, affine_channel: a per-channel (or per-element) parameter ----

// Which parameter entry element i of X uses.
absl::StatusOr<std::vector<int64_t>> ParamIndex(const ExecutionContext& ctx, const DDim& x, int64_t params,
                                                const std::string& mode) {
  std::vector<int64_t> k(static_cast<size_t>(x.numel()));
  const bool nhwc = (ctx.op().HasAttr("data_format") && ctx.Attr<std::string>("data_format") == "NHWC") ||
                    (ctx.op().HasAttr("data_layout") && ctx.Attr<std::string>("data_layout") == "NHWC");
  const int64_t c = x.size() > 1 ? (nhwc ? x[x.size() - 1] : x[1]) : 1;
  const int64_t inner = nhwc ? 1 : x.Product(2, x.size());
  const int64_t per_sample = x.size() > 0 && x[0] > 0 ? x.numel() / x[0] : 0;
  const int64_t want = mode == "all" ? 1 : mode == "channel" ? c : per_sample;
  if (params != want) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", params, " parameters for X", x.ToString(),
                                                   " in mode ", mode, " (want ", want, ")"));
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    k[static_cast<size_t>(i)] = mode == "all" ? 0 : mode == "channel" ? (i / inner) % c : i % per_sample;
  }
  return k;
}

template <typename T, bool kGrad>
absl::Status PreluKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* alpha, RequireInput(ctx, "Alpha"));
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> k,
                       ParamIndex(ctx, x->dims(), alpha->numel(), ctx.Attr<std::string>("mode")));
  const T* xp = x->data<T>();
  const T* ap = alpha->data<T>();
  if (!kGrad) {
    T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
    for (int64_t i = 0; i < x->numel(); ++i) o[i] = xp[i] > T(0) ? xp[i] : ap[k[static_cast<size_t>(i)]] * xp[i];
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const T* gp = g->data<T>();
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* da = ctx.Output(GradVarName("Alpha"));
  T* dxp = dx ? dx->mutable_data<T>(x->dims()) : nullptr;
  T* dap = da ? da->mutable_data<T>(alpha->dims()) : nullptr;
  if (dap) std::fill(dap, dap + alpha->numel(), T(0));
  for (int64_t i = 0; i < x->numel(); ++i) {
    const int64_t j = k[static_cast<size_t>(i)];
    if (dxp) dxp[i] = xp[i] > T(0) ? gp[i] : ap[j] * gp[i];
    if (dap && xp[i] <= T(0)) dap[j] += gp[i] * xp[i];
  }
  return absl::OkStatus();
}

template <typename T, bool kGrad>
absl::Status AffineChannelKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* scale, RequireInput(ctx, "Scale"));
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> k, ParamIndex(ctx, x->dims(), scale->numel(), "channel"));
  const T* xp = x->data<T>();
  const T* sp = scale->data<T>();
  if (!kGrad) {
    OAR_ASSIGN_OR_RETURN(const Tensor* bias, RequireInput(ctx, "Bias"));
    const T* bp = bias->data<T>();
    T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
    for (int64_t i = 0; i < x->numel(); ++i)
      o[i] = xp[i] * sp[k[static_cast<size_t>(i)]] + bp[k[static_cast<size_t>(i)]];
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const T* gp = g->data<T>();
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* ds = ctx.Output(GradVarName("Scale"));
  Tensor* db = ctx.Output(GradVarName("Bias"));
  T* dxp = dx ? dx->mutable_data<T>(x->dims()) : nullptr;
  T* dsp = ds ? ds->mutable_data<T>(scale->dims()) : nullptr;
  T* dbp = db ? db->mutable_data<T>(scale->dims()) : nullptr;
  if (dsp) std::fill(dsp, dsp + scale->numel(), T(0));
  if (dbp) std::fill(dbp, dbp + scale->numel(), T(0));
  for (int64_t i = 0; i < x->numel(); ++i) {
    const int64_t j = k[static_cast<size_t>(i)];
    if (dxp) dxp[i] = gp[i] * sp[j];
    if (dsp) dsp[j] += gp[i] * xp[i];
    if (dbp) dbp[j] += gp[i];
  }
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)
#define OAR_FLOATS2(K, B) Kernel<float>(K<float, B>).Kernel<double>(K<double, B>)

}  // namespace

void RegisterChannelOps(OpRegistry* r) {
  const std::vector<std::pair<std::string, std::function<void(OpInfo&)>>> maps = {
      {"pixel_shuffle",
       [](OpInfo& i) {
         i.Attr("upscale_factor", int32_t{1})
             .Attr("data_format", std::string("NCHW"))
             .Implements("data_format", {std::string("NCHW")});
       }},
      {"shuffle_channel", [](OpInfo& i) { i.Attr("group", int32_t{1}); }},
      {"temporal_shift", [](OpInfo& i) {
         i.Attr("seg_num", int32_t{1})
             .Attr("shift_ratio", 0.25f)
             .Attr("data_format", std::string("NCHW"))
             .Implements("data_format", {std::string("NCHW")});
       }}};
  for (const auto& [type, attrs] : maps) {
    auto& fwd = r->Register(type)
                    .NotInPlace()
                    .Input("X")
                    .Output("Out")
                    .SetInferShape(NoShapeInference)
                    .SetGradMaker(GradOpMaker({}, {}, {"Out"}, {"X"}))
                    .OAR_FLOATS(MapKernel);
    attrs(fwd);
    auto& grad = r->Register(type + "_grad")
                     .NotInPlace()
                     .Input(GradVarName("Out"))
                     .Output(GradVarName("X"), kDispensable)
                     .SetInferShape(NoShapeInference)
                     .OAR_FLOATS(MapGradKernel);
    attrs(grad);
  }
  r->Register("maxout")
      .NotInPlace()
      .Input("X")
      .Output("Out")
      .Attr("groups", int32_t{1})
      .Attr("axis", int32_t{1})
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {"Out"}, {"Out"}, {"X"}))
      .OAR_FLOATS2(MaxoutKernel, false);
  r->Register("maxout_grad")
      .NotInPlace()
      .Input("X")
      .Input("Out", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("groups", int32_t{1})
      .Attr("axis", int32_t{1})
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(MaxoutKernel, true);
  r->Register("prelu")
      .NotInPlace()
      .Input("X")
      .Input("Alpha")
      .Output("Out")
      .Attr("mode", std::string("all"))
      .Attr("data_format", std::string("NCHW"))
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({"X", "Alpha"}, {}, {"Out"}, {"X", "Alpha"}))
      .OAR_FLOATS2(PreluKernel, false);
  r->Register("prelu_grad")
      .NotInPlace()
      .Input("X")
      .Input("Alpha")
      .Input("Out", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Alpha"), kDispensable)
      .Attr("mode", std::string("all"))
      .Attr("data_format", std::string("NCHW"))
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(PreluKernel, true);
  r->Register("affine_channel")
      .Input("X")
      .Input("Scale")
      .Input("Bias")
      .Output("Out")
      .Attr("data_layout", std::string("AnyLayout"))
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({"X", "Scale"}, {}, {"Out"}, {"X", "Scale", "Bias"}))
      .OAR_FLOATS2(AffineChannelKernel, false);
  r->Register("affine_channel_grad")
      .NotInPlace()
      .Input("X")
      .Input("Scale")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Scale"), kDispensable)
      .Output(GradVarName("Bias"), kDispensable)
      .Attr("data_layout", std::string("AnyLayout"))
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(AffineChannelKernel, true);
}

#undef OAR_FLOATS
#undef OAR_FLOATS2

}  // namespace oar
