// Resizing, as Fluid 1.x (bilinear_interp, nearest_interp,
// trilinear_interp) and Paddle 2.x (their _v2 forms, linear_interp_v2 too)
// write it, NCHW / NCDHW, with gradients. The output size comes from
// out_d/out_h/out_w, else from `scale`; the source coordinates are Paddle's:
// align_corners maps corner to corner ((in−1)/(out−1)); otherwise
// align_mode 0 samples at half-pixel centres and align_mode 1 at
// ratio·o; nearest rounds (align_corners) or floors. Each output cell is a
// weighted sum of input cells, and the gradient scatters it back.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// Along one spatial dimension: output o reads lo[o] (weight wl[o]) and
// hi[o] (weight 1 − wl[o]); nearest reads lo[o] alone.
struct Taps {
  std::vector<int64_t> lo, hi;
  std::vector<float> wl;
};

struct InterpPlan {
  DDim out;
  std::vector<Taps> taps;  // per spatial dimension
  bool nearest = false;
};

absl::StatusOr<InterpPlan> Plan(const ExecutionContext& ctx, const DDim& x) {
  const std::string& type = ctx.op().type;
  const int spatial = x.size() - 2;
  if (spatial < 1 || spatial > 3) {
    return absl::InvalidArgumentError(absl::StrCat(type, ": X", x.ToString(), " must be 3-, 4- or 5-D (NC + space)"));
  }
  const bool v2 = absl::EndsWith(type, "_v2") || absl::EndsWith(type, "_v2_grad");
  const std::string method = ctx.Attr<std::string>("interp_method");
  const bool align_corners = ctx.Attr<bool>("align_corners");
  const int align_mode = ctx.Attr<int32_t>("align_mode");
  std::vector<float> scale;
  if (v2) {
    scale = ctx.Attr<std::vector<float>>("scale");
  } else if (ctx.Attr<float>("scale") > 0) {
    scale.assign(static_cast<size_t>(spatial), ctx.Attr<float>("scale"));
  }
  if (scale.size() == 1) scale.assign(static_cast<size_t>(spatial), scale[0]);
  const int32_t attrs[3] = {ctx.Attr<int32_t>("out_d"), ctx.Attr<int32_t>("out_h"), ctx.Attr<int32_t>("out_w")};
  InterpPlan p{.out = x, .nearest = method == "nearest"};
  for (int d = 0; d < spatial; ++d) {
    const int64_t in = x[d + 2];
    const int32_t given = attrs[3 - spatial + d];
    const bool by_scale = !scale.empty() && scale[static_cast<size_t>(d)] > 0 && (v2 || given <= 0);
    const int64_t out = by_scale ? static_cast<int64_t>(static_cast<float>(in) * scale[static_cast<size_t>(d)]) : given;
    if (out <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(type, ": no output size for spatial dimension ", d, " (out_d/out_h/out_w or scale)"));
    }
    p.out[d + 2] = out;
    float ratio = 0;
    if (out > 1) {
      ratio = align_corners    ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
              : by_scale && v2 ? 1.0f / scale[static_cast<size_t>(d)]
                               : static_cast<float>(in) / static_cast<float>(out);
    }
    Taps t;
    const bool half = align_mode == 0 && !align_corners;
    for (int64_t o = 0; o < out; ++o) {
      if (p.nearest) {
        const int64_t i = align_corners ? static_cast<int64_t>(ratio * static_cast<float>(o) + 0.5f)
                                        : static_cast<int64_t>(ratio * static_cast<float>(o));
        t.lo.push_back(std::min(i, in - 1));
        continue;
      }
      float src = half ? ratio * (static_cast<float>(o) + 0.5f) - 0.5f : ratio * static_cast<float>(o);
      src = std::max(src, 0.0f);
      const int64_t lo = std::min(static_cast<int64_t>(src), in - 1);
      t.lo.push_back(lo);
      t.hi.push_back(lo < in - 1 ? lo + 1 : lo);
      t.wl.push_back(1.0f - (src - static_cast<float>(lo)));
    }
    p.taps.push_back(std::move(t));
  }
  return p;
}

// fn(out_cell, in_cell, weight) for every tap of every output cell of one
// image.
template <typename Fn>
void ForEachTap(const InterpPlan& p, const DDim& x, Fn fn) {
  const int s = static_cast<int>(p.taps.size());
  const int64_t outs = p.out.Product(2, p.out.size());
  for (int64_t o = 0; o < outs; ++o) {
    int64_t coords[3] = {0, 0, 0}, rest = o;
    for (int d = s - 1; d >= 0; --d) coords[d] = rest % p.out[d + 2], rest /= p.out[d + 2];
    const int corners = p.nearest ? 1 : 1 << s;
    for (int c = 0; c < corners; ++c) {
      int64_t at = 0;
      float w = 1;
      for (int d = 0; d < s; ++d) {
        const Taps& t = p.taps[static_cast<size_t>(d)];
        const size_t k = static_cast<size_t>(coords[d]);
        const bool high = !p.nearest && ((c >> (s - 1 - d)) & 1);
        at = at * x[d + 2] + (high ? t.hi[k] : t.lo[k]);
        if (!p.nearest) w *= high ? 1.0f - t.wl[k] : t.wl[k];
      }
      fn(o, at, w);
    }
  }
}

template <typename T>
absl::Status InterpKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const InterpPlan p, Plan(ctx, x->dims()));
  const int64_t ins = x->dims().Product(2, x->dims().size()), outs = p.out.Product(2, p.out.size());
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(p.out);
  std::fill(o, o + p.out.numel(), T(0));
  for (int64_t img = 0; img < x->dims()[0] * x->dims()[1]; ++img) {
    ForEachTap(p, x->dims(), [&](int64_t out, int64_t in, float w) {
      o[img * outs + out] += static_cast<T>(w) * xp[img * ins + in];
    });
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status InterpGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_ASSIGN_OR_RETURN(const InterpPlan p, Plan(ctx, x->dims()));
  if (g->dims() != p.out) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": Out@GRAD", g->dims().ToString(), " is not ", p.out.ToString()));
  }
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const int64_t ins = x->dims().Product(2, x->dims().size()), outs = p.out.Product(2, p.out.size());
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  std::fill(d, d + dx->numel(), T(0));
  for (int64_t img = 0; img < x->dims()[0] * x->dims()[1]; ++img) {
    ForEachTap(p, x->dims(), [&](int64_t out, int64_t in, float w) {
      d[img * ins + in] += static_cast<T>(w) * gp[img * outs + out];
    });
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterInterpOps(OpRegistry* r) {
  for (const std::string method : {"bilinear", "nearest", "trilinear", "linear"}) {
    for (const bool v2 : {false, true}) {
      if (method == "linear" && !v2) continue;
      const std::string type = method + (v2 ? "_interp_v2" : "_interp");
      auto attrs = [&](OpInfo& i) -> OpInfo& {
        i.Attr("out_d", int32_t{-1})
            .Attr("out_h", int32_t{-1})
            .Attr("out_w", int32_t{-1})
            .Attr("interp_method", method)
            .Attr("align_corners", true)
            .Attr("align_mode", int32_t{1})
            .Attr("data_layout", std::string("NCHW"))
            .Implements("data_layout", {std::string("NCHW"), std::string("NCDHW"), std::string("AnyLayout")})
            .Input("OutSize", kUnimplemented)
            .Input("SizeTensor", kDuplicable | kUnimplemented)
            .Input("Scale", kUnimplemented);
        return v2 ? i.Attr("scale", std::vector<float>{}) : i.Attr("scale", 0.0f);
      };
      attrs(r->Register(type).NotInPlace().Input("X").Output("Out"))
          .SetInferShape(NoShapeInference)
          .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
          .Kernel<float>(InterpKernel<float>)
          .Kernel<double>(InterpKernel<double>);
      attrs(r->Register(type + "_grad")
                .NotInPlace()
                .Input("X")
                .Input(GradVarName("Out"))
                .Output(GradVarName("X"), kDispensable))
          .SetInferShape(GradSameShapeAsX)
          .Kernel<float>(InterpGradKernel<float>)
          .Kernel<double>(InterpGradKernel<double>);
    }
  }
}

}  // namespace oar
