// Patch and pairwise-product ops, with gradients: unfold (F.unfold: each
// kernel_sizes window of an NCHW image as a column, [N, C·kh·kw, L]),
// im2sequence (fluid.layers.im2sequence: the windows as rows, one LoD
// sequence per image), fsp (fluid.layers.fsp_matrix: X·Yᵀ over the image,
// divided by H·W) and bilinear_tensor_product (nn.Bilinear: Out[n, o] =
// x_n·W_o·y_nᵀ + b_o). Windows go through im2col.h, products through Gemm.
//
// Thread-safety: stateless kernels.
#include <algorithm>
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

// The im2col geometry of unfold / im2sequence over one image of X.
absl::StatusOr<ConvGeometry> Windows(const ExecutionContext& ctx, const DDim& x) {
  const bool unfold = ctx.op().type.rfind("unfold", 0) == 0;
  const auto k = ctx.Attr<std::vector<int32_t>>(unfold ? "kernel_sizes" : "kernels");
  const auto s = ctx.Attr<std::vector<int32_t>>("strides");
  const auto p = ctx.Attr<std::vector<int32_t>>("paddings");
  const std::vector<int32_t> d = unfold ? ctx.Attr<std::vector<int32_t>>("dilations") : std::vector<int32_t>{1, 1};
  if (x.size() != 4 || k.size() != 2 || s.size() != 2 || d.size() != 2 || p.size() != 4 || p[0] != p[2] ||
      p[1] != p[3]) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": X", x.ToString(), " with kernels [",
                                                   absl::StrJoin(k, ", "), "], paddings [", absl::StrJoin(p, ", "),
                                                   "] (Oar implements NCHW and equal paddings on both sides)"));
  }
  ConvGeometry g{x[1], x[2], x[3], k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], 0, 0};
  g.out_h = ConvOutSize(x[2], k[0], p[0], s[0], d[0]);
  g.out_w = ConvOutSize(x[3], k[1], p[1], s[1], d[1]);
  if (g.out_h <= 0 || g.out_w <= 0)
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": windows do not fit X", x.ToString()));
  return g;
}

template <bool kGrad>
absl::Status PatchKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const ConvGeometry g, Windows(ctx, x->dims()));
  const bool unfold = ctx.op().type.rfind("unfold", 0) == 0;
  const int64_t n = x->dims()[0], rows = g.channels * g.kernel_h * g.kernel_w, plane = g.out_h * g.out_w;
  const int64_t image = g.channels * g.height * g.width;
  std::vector<float> col(static_cast<size_t>(rows * plane));
  if (!kGrad) {
    Tensor* out = ctx.Output(unfold ? "Y" : "Out");
    float* o = out->mutable_data<float>(unfold ? DDim{n, rows, plane} : DDim{n * plane, rows});
    for (int64_t i = 0; i < n; ++i) {
      Im2Col(x->data<float>() + i * image, g, unfold ? o + i * rows * plane : col.data());
      if (!unfold) {  // rows are windows
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < plane; ++c) o[(i * plane + c) * rows + r] = col[static_cast<size_t>(r * plane + c)];
        }
      }
    }
    if (!unfold) {
      std::vector<size_t> lod;
      for (int64_t i = 0; i <= n; ++i) lod.push_back(static_cast<size_t>(i * plane));
      out->set_lod(LoD{lod});
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* gr, RequireInput(ctx, GradVarName(unfold ? "Y" : "Out")));
  float* d = ZeroedGradOutput<float>(ctx, "X", x->dims());
  if (d == nullptr) return absl::OkStatus();
  for (int64_t i = 0; i < n; ++i) {
    const float* src = gr->data<float>() + i * rows * plane;
    if (!unfold) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < plane; ++c)
          col[static_cast<size_t>(r * plane + c)] = gr->data<float>()[(i * plane + c) * rows + r];
      }
      src = col.data();
    }
    Col2Im(src, g, d + i * image);
  }
  return absl::OkStatus();
}

template <bool kGrad>
absl::Status FspKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  const DDim &a = x->dims(), &b = y->dims();
  if (a.size() != 4 || b.size() != 4 || a[0] != b[0] || a[2] != b[2] || a[3] != b[3]) {
    return absl::InvalidArgumentError(
        absl::StrCat("fsp: X", a.ToString(), " and Y", b.ToString(), " must be NCHW of one size"));
  }
  const int64_t n = a[0], c1 = a[1], c2 = b[1], hw = a[2] * a[3];
  const float scale = 1.0f / static_cast<float>(hw);
  if (!kGrad) {
    float* o = ctx.Output("Out")->mutable_data<float>(DDim{n, c1, c2});
    for (int64_t i = 0; i < n; ++i) {
      Gemm<float>(false, true, c1, c2, hw, scale, x->data<float>() + i * c1 * hw, y->data<float>() + i * c2 * hw, 0,
                  o + i * c1 * c2);
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* dy = ctx.Output(GradVarName("Y"));
  for (int64_t i = 0; i < n; ++i) {
    const float* gi = g->data<float>() + i * c1 * c2;
    if (dx)
      Gemm<float>(false, false, c1, hw, c2, scale, gi, y->data<float>() + i * c2 * hw, 0,
                  dx->mutable_data<float>(a) + i * c1 * hw);
    if (dy)
      Gemm<float>(true, false, c2, hw, c1, scale, gi, x->data<float>() + i * c1 * hw, 0,
                  dy->mutable_data<float>(b) + i * c2 * hw);
  }
  return absl::OkStatus();
}

template <bool kGrad>
absl::Status BilinearProductKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, "Weight"));
  const int64_t n = x->dims()[0], m = x->dims()[1], k = y->dims()[1], outs = w->dims()[0];
  if (w->numel() != outs * m * k || y->dims()[0] != n) {
    return absl::InvalidArgumentError(absl::StrCat("bilinear_tensor_product: X", x->dims().ToString(), ", Y",
                                                   y->dims().ToString(), " and Weight", w->dims().ToString(),
                                                   " do not fit"));
  }
  std::vector<float> xw(static_cast<size_t>(n * k));  // x_n·W_o for one o
  if (!kGrad) {
    float* o = ctx.Output("Out")->mutable_data<float>(DDim{n, outs});
    const Tensor* bias = ctx.Input("Bias");
    for (int64_t j = 0; j < outs; ++j) {
      Gemm<float>(false, false, n, k, m, 1, x->data<float>(), w->data<float>() + j * m * k, 0, xw.data());
      for (int64_t i = 0; i < n; ++i) {
        float s = bias ? bias->data<float>()[j] : 0.f;
        for (int64_t c = 0; c < k; ++c) s += xw[static_cast<size_t>(i * k + c)] * y->data<float>()[i * k + c];
        o[i * outs + j] = s;
      }
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* dy = ctx.Output(GradVarName("Y"));
  Tensor* dw = ctx.Output(GradVarName("Weight"));
  Tensor* db = ctx.Output(GradVarName("Bias"));
  float* dxp = dx ? dx->mutable_data<float>(x->dims()) : nullptr;
  float* dyp = dy ? dy->mutable_data<float>(y->dims()) : nullptr;
  if (dxp) std::fill(dxp, dxp + dx->numel(), 0.f);
  if (dyp) std::fill(dyp, dyp + dy->numel(), 0.f);
  std::vector<float> gx(static_cast<size_t>(n * m)), gy(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < outs; ++j) {
    const float* wj = w->data<float>() + j * m * k;
    for (int64_t i = 0; i < n; ++i) {  // rows of x and y scaled by g[n, j]
      for (int64_t c = 0; c < m; ++c)
        gx[static_cast<size_t>(i * m + c)] = g->data<float>()[i * outs + j] * x->data<float>()[i * m + c];
      for (int64_t c = 0; c < k; ++c)
        gy[static_cast<size_t>(i * k + c)] = g->data<float>()[i * outs + j] * y->data<float>()[i * k + c];
    }
    if (dxp) Gemm<float>(false, true, n, m, k, 1, gy.data(), wj, 1, dxp);   // g·y·W_jᵀ
    if (dyp) Gemm<float>(false, false, n, k, m, 1, gx.data(), wj, 1, dyp);  // g·x·W_j
    if (dw)
      Gemm<float>(true, false, m, k, n, 1, gx.data(), y->data<float>(), 0,
                  dw->mutable_data<float>(w->dims()) + j * m * k);
  }
  if (db) {
    float* d = db->mutable_data<float>(DDim{1, outs});
    for (int64_t j = 0; j < outs; ++j) {
      d[j] = 0;
      for (int64_t i = 0; i < n; ++i) d[j] += g->data<float>()[i * outs + j];
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterPatchOps(OpRegistry* r) {
  auto unfold = [](OpInfo& i) -> OpInfo& {
    return i.Attr("kernel_sizes", std::vector<int32_t>{})
        .Attr("strides", std::vector<int32_t>{1, 1})
        .Attr("paddings", std::vector<int32_t>{0, 0, 0, 0})
        .Attr("dilations", std::vector<int32_t>{1, 1});
  };
  unfold(r->Register("unfold").NotInPlace().Input("X").Output("Y"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Y"}, {"X"}))
      .Kernel<float>(PatchKernel<false>);
  unfold(
      r->Register("unfold_grad").NotInPlace().Input("X").Input(GradVarName("Y")).Output(GradVarName("X"), kDispensable))
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(PatchKernel<true>);
  auto seq = [](OpInfo& i) -> OpInfo& {
    return i.Attr("kernels", std::vector<int32_t>{})
        .Attr("strides", std::vector<int32_t>{1, 1})
        .Attr("paddings", std::vector<int32_t>{0, 0, 0, 0})
        .Attr("out_stride", std::vector<int32_t>{1, 1})
        .Input("Y", kUnimplemented);
  };
  seq(r->Register("im2sequence").NotInPlace().Input("X").Output("Out"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .Kernel<float>(PatchKernel<false>);
  seq(r->Register("im2sequence_grad")
          .NotInPlace()
          .Input("X")
          .Input(GradVarName("Out"))
          .Output(GradVarName("X"), kDispensable))
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(PatchKernel<true>);
  r->Register("fsp")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Y"}, {}, {"Out"}, {"X", "Y"}))
      .Kernel<float>(FspKernel<false>);
  r->Register("fsp_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(FspKernel<true>);
  r->Register("bilinear_tensor_product")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input("Weight")
      .Input("Bias", kDispensable)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Y", "Weight"}, {}, {"Out"}, {"X", "Y", "Weight", "Bias"}))
      .Kernel<float>(BilinearProductKernel<false>);
  r->Register("bilinear_tensor_product_grad")
      .NotInPlace()
      .Input("X")
      .Input("Y")
      .Input("Weight")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Output(GradVarName("Weight"), kDispensable)
      .Output(GradVarName("Bias"), kDispensable)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(BilinearProductKernel<true>);
}

}  // namespace oar
