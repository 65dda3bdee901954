// Spatial transformer ops, with gradients, as Paddle computes them:
// affine_grid (Theta [N, 2, 3] → a sampling grid [N, H, W, 2] of
// Theta·[x, y, 1] over the output's normalized coordinates; align_corners
// puts ±1 on the corner pixels' centres, else on their outer edges) and
// grid_sampler (X sampled at Grid's (x, y) ∈ [−1, 1]²: bilinear or
// nearest, padding zeros or border).
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// The normalized coordinate of pixel i of n.
double Base(int64_t i, int64_t n, bool corners) {
  if (n <= 1) return 0;
  return corners ? -1 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1)
                 : (2.0 * static_cast<double>(i) + 1) / static_cast<double>(n) - 1;
}

template <bool kGrad>
absl::Status AffineGridKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* theta, RequireInput(ctx, "Theta"));
  const auto shape = ctx.Attr<std::vector<int32_t>>("output_shape");
  if (shape.size() != 4 || theta->numel() != static_cast<int64_t>(shape[0]) * 6) {
    return absl::UnimplementedError(absl::StrCat("affine_grid: Theta", theta->dims().ToString(),
                                                 " with output_shape of ", shape.size(),
                                                 " values (Oar implements 2-D, [N, 2, 3])"));
  }
  const int64_t n = shape[0], h = shape[2], w = shape[3];
  const bool corners = ctx.Attr<bool>("align_corners");
  const float* t = theta->data<float>();
  if (!kGrad) {
    float* o = ctx.Output("Output")->mutable_data<float>(DDim{n, h, w, 2});
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t i = 0; i < h; ++i) {
        for (int64_t j = 0; j < w; ++j) {
          const double x = Base(j, w, corners), y = Base(i, h, corners);
          for (int k = 0; k < 2; ++k) {
            o[((b * h + i) * w + j) * 2 + k] =
                static_cast<float>(t[b * 6 + k * 3] * x + t[b * 6 + k * 3 + 1] * y + t[b * 6 + k * 3 + 2]);
          }
        }
      }
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Output")));
  float* d = ZeroedGradOutput<float>(ctx, "Theta", theta->dims());
  if (d == nullptr) return absl::OkStatus();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < h; ++i) {
      for (int64_t j = 0; j < w; ++j) {
        const double x = Base(j, w, corners), y = Base(i, h, corners);
        for (int k = 0; k < 2; ++k) {
          const double gv = g->data<float>()[((b * h + i) * w + j) * 2 + k];
          d[b * 6 + k * 3] += static_cast<float>(gv * x), d[b * 6 + k * 3 + 1] += static_cast<float>(gv * y);
          d[b * 6 + k * 3 + 2] += static_cast<float>(gv);
        }
      }
    }
  }
  return absl::OkStatus();
}

struct Sampler {
  bool bilinear = true, border = false, corners = true;
  int64_t h = 0, w = 0;
  // Grid coordinate to pixel coordinate, and its derivative.
  double Pixel(double g, int64_t n) const {
    return corners ? (g + 1) / 2 * static_cast<double>(n - 1) : ((g + 1) * static_cast<double>(n) - 1) / 2;
  }
  double Scale(int64_t n) const { return corners ? static_cast<double>(n - 1) / 2 : static_cast<double>(n) / 2; }
  double Clip(double v, int64_t n) const { return border ? std::clamp(v, 0.0, static_cast<double>(n - 1)) : v; }
};

template <bool kGrad>
absl::Status GridSamplerKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* grid, RequireInput(ctx, "Grid"));
  const DDim &xd = x->dims(), &gd = grid->dims();
  const std::string mode = ctx.Attr<std::string>("mode"), pad = ctx.Attr<std::string>("padding_mode");
  if (xd.size() != 4 || gd.size() != 4 || gd[3] != 2 || gd[0] != xd[0] || (mode != "bilinear" && mode != "nearest") ||
      (pad != "zeros" && pad != "border")) {
    return absl::UnimplementedError(absl::StrCat("grid_sampler: X", xd.ToString(), ", Grid", gd.ToString(), ", mode ",
                                                 mode, ", padding_mode ", pad,
                                                 " (Oar implements 4-D bilinear/nearest, zeros/border)"));
  }
  Sampler s{mode == "bilinear", pad == "border", ctx.Attr<bool>("align_corners"), xd[2], xd[3]};
  const int64_t n = xd[0], c = xd[1], oh = gd[1], ow = gd[2], plane = s.h * s.w;
  const float* xp = x->data<float>();
  const float* gp = grid->data<float>();
  float* out = nullptr;
  const float* go = nullptr;
  float *dx = nullptr, *dg = nullptr;
  if (!kGrad) {
    out = ctx.Output("Output")->mutable_data<float>(DDim{n, c, oh, ow});
  } else {
    OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Output")));
    go = g->data<float>();
    if (Tensor* t = ctx.Output(GradVarName("X"))) dx = t->mutable_data<float>(xd), std::fill(dx, dx + t->numel(), 0.f);
    if (Tensor* t = ctx.Output(GradVarName("Grid")))
      dg = t->mutable_data<float>(gd), std::fill(dg, dg + t->numel(), 0.f);
  }
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t gi = ((b * oh + i) * ow + j) * 2;
        const double px = s.Clip(s.Pixel(gp[gi], s.w), s.w), py = s.Clip(s.Pixel(gp[gi + 1], s.h), s.h);
        const int64_t x0 = static_cast<int64_t>(std::floor(px)), y0 = static_cast<int64_t>(std::floor(py));
        const double fx = px - static_cast<double>(x0), fy = py - static_cast<double>(y0);
        auto in = [&](int64_t yy, int64_t xx) { return yy >= 0 && yy < s.h && xx >= 0 && xx < s.w; };
        double gx = 0, gy = 0;  // d out / d(px, py), summed over channels
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* img = xp + (b * c + ch) * plane;
          const int64_t oi = ((b * c + ch) * oh + i) * ow + j;
          if (!s.bilinear) {
            const int64_t xx = static_cast<int64_t>(std::nearbyint(px)), yy = static_cast<int64_t>(std::nearbyint(py));
            if (!kGrad)
              out[oi] = in(yy, xx) ? img[yy * s.w + xx] : 0.f;
            else if (dx && in(yy, xx))
              dx[(b * c + ch) * plane + yy * s.w + xx] += go[oi];
            continue;
          }
          const double v00 = in(y0, x0) ? img[y0 * s.w + x0] : 0, v01 = in(y0, x0 + 1) ? img[y0 * s.w + x0 + 1] : 0;
          const double v10 = in(y0 + 1, x0) ? img[(y0 + 1) * s.w + x0] : 0,
                       v11 = in(y0 + 1, x0 + 1) ? img[(y0 + 1) * s.w + x0 + 1] : 0;
          if (!kGrad) {
            out[oi] = static_cast<float>(v00 * (1 - fx) * (1 - fy) + v01 * fx * (1 - fy) + v10 * (1 - fx) * fy +
                                         v11 * fx * fy);
            continue;
          }
          const double g = go[oi];
          if (dx) {
            float* d = dx + (b * c + ch) * plane;
            if (in(y0, x0)) d[y0 * s.w + x0] += static_cast<float>(g * (1 - fx) * (1 - fy));
            if (in(y0, x0 + 1)) d[y0 * s.w + x0 + 1] += static_cast<float>(g * fx * (1 - fy));
            if (in(y0 + 1, x0)) d[(y0 + 1) * s.w + x0] += static_cast<float>(g * (1 - fx) * fy);
            if (in(y0 + 1, x0 + 1)) d[(y0 + 1) * s.w + x0 + 1] += static_cast<float>(g * fx * fy);
          }
          gx += g * ((v01 - v00) * (1 - fy) + (v11 - v10) * fy);
          gy += g * ((v10 - v00) * (1 - fx) + (v11 - v01) * fx);
        }
        if (kGrad && dg && s.bilinear) {
          const double rx = s.Pixel(gp[gi], s.w), ry = s.Pixel(gp[gi + 1], s.h);
          const bool cx = s.border && (rx < 0 || rx > static_cast<double>(s.w - 1));
          const bool cy = s.border && (ry < 0 || ry > static_cast<double>(s.h - 1));
          dg[gi] = cx ? 0.f : static_cast<float>(gx * s.Scale(s.w));
          dg[gi + 1] = cy ? 0.f : static_cast<float>(gy * s.Scale(s.h));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterImageSampleOps(OpRegistry* r) {
  auto grid = [](OpInfo& i) -> OpInfo& {
    return i.Attr("output_shape", std::vector<int32_t>{})
        .Attr("align_corners", true)
        .Attr("use_cudnn", false)
        .Input("OutputShape", kUnimplemented);
  };
  grid(r->Register("affine_grid").Input("Theta").Output("Output"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"Theta"}, {}, {"Output"}, {"Theta"}))
      .Kernel<float>(AffineGridKernel<false>);
  grid(r->Register("affine_grid_grad")
           .Input("Theta", kDispensable)
           .Input(GradVarName("Output"))
           .Output(GradVarName("Theta"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(AffineGridKernel<true>);
  auto sampler = [](OpInfo& i) -> OpInfo& {
    return i.Attr("mode", std::string("bilinear"))
        .Attr("padding_mode", std::string("zeros"))
        .Attr("align_corners", true)
        .Attr("use_cudnn", false);
  };
  sampler(r->Register("grid_sampler").NotInPlace().Input("X").Input("Grid").Output("Output"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Grid"}, {}, {"Output"}, {"X", "Grid"}))
      .Kernel<float>(GridSamplerKernel<false>);
  sampler(r->Register("grid_sampler_grad")
              .NotInPlace()
              .Input("X")
              .Input("Grid")
              .Input(GradVarName("Output"))
              .Output(GradVarName("X"), kDispensable)
              .Output(GradVarName("Grid"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(GridSamplerKernel<true>);
}

}  // namespace oar
