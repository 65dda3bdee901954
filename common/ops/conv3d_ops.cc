// conv3d and conv3d_transpose (NCDHW; strides, paddings, dilations, groups;
// the transpose's output_padding / output_size) with their gradients, by
// vol2col (each output cell's window as a column) and one GEMM per image
// and group, the 3-D form of conv_ops.cc and conv_transpose_ops.cc: the
// transpose's forward is conv3d's input gradient and its gradients a conv3d
// and conv3d's filter gradient with input and output exchanged.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <array>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/blas.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// One group of one image: `in` the volume the windows slide over (conv3d's
// input, the transpose's output), `out` the cells (conv3d's output).
struct Geom3 {
  int64_t channels;
  std::array<int64_t, 3> in, k, s, p, d, out;
  int64_t InSize() const { return channels * in[0] * in[1] * in[2]; }
  int64_t Rows() const { return channels * k[0] * k[1] * k[2]; }
  int64_t Cells() const { return out[0] * out[1] * out[2]; }
};

// col[(c, a, b, e)][(z, y, x)] = vol[c][z·s − p + a·d][...] (0 outside), or
// (kAdd) the adjoint: each column entry added back into vol.
template <bool kAdd>
void Vol2Col(const Geom3& g, const float* vol, float* col) {
  int64_t row = 0;
  for (int64_t c = 0; c < g.channels; ++c) {
    for (int64_t a = 0; a < g.k[0]; ++a) {
      for (int64_t b = 0; b < g.k[1]; ++b) {
        for (int64_t e = 0; e < g.k[2]; ++e, ++row) {
          int64_t cell = 0;
          for (int64_t z = 0; z < g.out[0]; ++z) {
            const int64_t iz = z * g.s[0] - g.p[0] + a * g.d[0];
            for (int64_t y = 0; y < g.out[1]; ++y) {
              const int64_t iy = y * g.s[1] - g.p[1] + b * g.d[1];
              for (int64_t x = 0; x < g.out[2]; ++x, ++cell) {
                const int64_t ix = x * g.s[2] - g.p[2] + e * g.d[2];
                const bool inside = iz >= 0 && iz < g.in[0] && iy >= 0 && iy < g.in[1] && ix >= 0 && ix < g.in[2];
                float& at = col[row * g.Cells() + cell];
                const int64_t vi = ((c * g.in[0] + iz) * g.in[1] + iy) * g.in[2] + ix;
                if (kAdd) {
                  if (inside) const_cast<float*>(vol)[vi] += at;
                } else {
                  at = inside ? vol[vi] : 0.f;
                }
              }
            }
          }
        }
      }
    }
  }
}

struct Setup3 {
  Geom3 g;
  int64_t n, groups, m;  // m: the channels per group on the cells' side
  DDim cells_dims;       // conv3d: Output; transpose: Input
  DDim volume_dims;      // conv3d: Input; transpose: Output
};

absl::StatusOr<Setup3> Plan(const ExecutionContext& ctx, const DDim& x, const DDim& f) {
  const bool transpose = ctx.op().type.rfind("conv3d_transpose", 0) == 0;
  auto s = ctx.Attr<std::vector<int32_t>>("strides");
  auto p = ctx.Attr<std::vector<int32_t>>("paddings");
  auto d = ctx.Attr<std::vector<int32_t>>("dilations");
  const int64_t groups = ctx.Attr<int32_t>("groups");
  if (p.size() == 6 && p[0] == p[1] && p[2] == p[3] && p[4] == p[5]) p = {p[0], p[2], p[4]};
  if (x.size() != 5 || f.size() != 5 || s.size() != 3 || p.size() != 3 || d.size() != 3 || groups < 1 ||
      x[1] % groups != 0 || (transpose ? x[1] != f[0] : x[1] != f[1] * groups)) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Input", x.ToString(), ", Filter", f.ToString(),
                                                   ", strides [", absl::StrJoin(s, ", "), "], paddings [",
                                                   absl::StrJoin(p, ", "), "] and groups ", groups, " do not fit"));
  }
  Setup3 c{.n = x[0], .groups = groups};
  Geom3& g = c.g;
  for (int i = 0; i < 3; ++i) g.k[i] = f[2 + i], g.s[i] = s[i], g.p[i] = p[i], g.d[i] = d[i];
  if (!transpose) {
    g.channels = x[1] / groups, c.m = f[0] / groups;
    for (int i = 0; i < 3; ++i) {
      g.in[i] = x[2 + i];
      g.out[i] = (x[2 + i] + 2 * p[i] - (d[i] * (f[2 + i] - 1) + 1)) / s[i] + 1;
      if (g.out[i] <= 0)
        return absl::InvalidArgumentError(absl::StrCat("conv3d: window does not fit Input", x.ToString()));
    }
    c.volume_dims = x, c.cells_dims = DDim{x[0], f[0], g.out[0], g.out[1], g.out[2]};
  } else {
    const auto op = ctx.Attr<std::vector<int32_t>>("output_padding");
    const auto os = ctx.Attr<std::vector<int32_t>>("output_size");
    g.channels = f[1], c.m = x[1] / groups;
    for (int i = 0; i < 3; ++i) {
      g.out[i] = x[2 + i];
      g.in[i] =
          (x[2 + i] - 1) * s[i] - 2 * p[i] + d[i] * (f[2 + i] - 1) + 1 + (op.empty() ? 0 : op[static_cast<size_t>(i)]);
      if (!os.empty()) g.in[i] = os[static_cast<size_t>(i)];
    }
    c.cells_dims = x, c.volume_dims = DDim{x[0], f[1] * groups, g.in[0], g.in[1], g.in[2]};
  }
  return c;
}

template <bool kGrad>
absl::Status Conv3dKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* filter, RequireInput(ctx, "Filter"));
  OAR_ASSIGN_OR_RETURN(const Setup3 c, Plan(ctx, in->dims(), filter->dims()));
  const bool transpose = ctx.op().type.rfind("conv3d_transpose", 0) == 0;
  const Geom3& g = c.g;
  const int64_t rows = g.Rows(), cells = g.Cells(), vol = g.InSize(), cell_group = c.m * cells;
  std::vector<float> col(static_cast<size_t>(rows * cells));
  const float* w = filter->data<float>();
  const float* x = in->data<float>();
  // conv3d: volume = Input, cells = Output; transpose: cells = Input, volume = Output.
  const Tensor* dout = nullptr;
  if (kGrad) {
    OAR_ASSIGN_OR_RETURN(dout, RequireInput(ctx, GradVarName("Output")));
  }
  Tensor* out = kGrad ? nullptr : ctx.Output("Output");
  Tensor* din = kGrad ? ctx.Output(GradVarName("Input")) : nullptr;
  Tensor* dw = kGrad ? ctx.Output(GradVarName("Filter")) : nullptr;
  float* o = out ? out->mutable_data<float>(transpose ? c.volume_dims : c.cells_dims) : nullptr;
  float* dx = din ? din->mutable_data<float>(in->dims()) : nullptr;
  float* dwp = dw ? dw->mutable_data<float>(filter->dims()) : nullptr;
  if (o && transpose) std::fill(o, o + out->numel(), 0.f);
  if (dx && !transpose) std::fill(dx, dx + din->numel(), 0.f);
  if (dwp) std::fill(dwp, dwp + dw->numel(), 0.f);
  for (int64_t i = 0; i < c.n; ++i) {
    for (int64_t gi = 0; gi < c.groups; ++gi) {
      const float* wg = w + gi * c.m * rows;
      const int64_t vol_at = (i * c.groups + gi) * vol, cell_at = (i * c.groups + gi) * cell_group;
      if (!transpose) {
        Vol2Col<false>(g, x + vol_at, col.data());
        if (!kGrad) {
          Gemm<float>(false, false, c.m, cells, rows, 1, wg, col.data(), 0, o + cell_at);
          continue;
        }
        const float* dy = dout->data<float>() + cell_at;
        if (dwp) Gemm<float>(false, true, c.m, rows, cells, 1, dy, col.data(), 1, dwp + gi * c.m * rows);
        if (dx) {
          Gemm<float>(true, false, rows, cells, c.m, 1, wg, dy, 0, col.data());
          Vol2Col<true>(g, dx + vol_at, col.data());
        }
        continue;
      }
      if (!kGrad) {  // col = W_gᵀ · X_g, then col2vol into the output
        Gemm<float>(true, false, rows, cells, c.m, 1, wg, x + cell_at, 0, col.data());
        Vol2Col<true>(g, o + vol_at, col.data());
        continue;
      }
      Vol2Col<false>(g, dout->data<float>() + vol_at, col.data());
      if (dx) Gemm<float>(false, false, c.m, cells, rows, 1, wg, col.data(), 0, dx + cell_at);
      if (dwp) Gemm<float>(false, true, c.m, rows, cells, 1, x + cell_at, col.data(), 1, dwp + gi * c.m * rows);
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterConv3dOps(OpRegistry* r) {
  for (const std::string type : {"conv3d", "conv3d_transpose"}) {
    auto attrs = [&](OpInfo& i) -> OpInfo& {
      i.Attr("strides", std::vector<int32_t>{1, 1, 1})
          .Attr("paddings", std::vector<int32_t>{0, 0, 0})
          .Attr("dilations", std::vector<int32_t>{1, 1, 1})
          .Attr("groups", int32_t{1})
          .Attr("use_cudnn", false)
          .Attr("use_mkldnn", false)
          .Attr("data_format", std::string("NCDHW"))
          .Attr("padding_algorithm", std::string("EXPLICIT"))
          .Attr("workspace_size_MB", int32_t{4096})
          .Attr("exhaustive_search", false)
          .Implements("data_format", {std::string("NCDHW"), std::string("NCHW"), std::string("AnyLayout")})
          .Implements("padding_algorithm", {std::string("EXPLICIT")});
      if (type == "conv3d_transpose")
        i.Attr("output_size", std::vector<int32_t>{}).Attr("output_padding", std::vector<int32_t>{});
      return i;
    };
    attrs(r->Register(type)
              .NotInPlace()
              .Input("Input")
              .Input("Filter")
              .Input("Bias", kDispensable | kUnimplemented)
              .Input("ResidualData", kDispensable | kUnimplemented)
              .Output("Output"))
        .SetInferShape(NoShapeInference)
        .SetGradMaker(GradOpMaker({"Input", "Filter"}, {}, {"Output"}, {"Input", "Filter"}))
        .Kernel<float>(Conv3dKernel<false>);
    attrs(r->Register(type + "_grad")
              .NotInPlace()
              .Input("Input")
              .Input("Filter")
              .Input("Output", kDispensable)
              .Input(GradVarName("Output"))
              .Output(GradVarName("Input"), kDispensable)
              .Output(GradVarName("Filter"), kDispensable))
        .SetInferShape(NoShapeInference)
        .Kernel<float>(Conv3dKernel<true>);
  }
}

}  // namespace oar
