// pool3d (NCDHW; max or avg; strides, paddings, global_pooling, ceil_mode,
// exclusive, adaptive) and max_pool2d_with_index / max_pool3d_with_index
// (Out and Mask, each max's flat position in its input image; adaptive or
// strided), with their gradients, as Paddle writes them for MaxPool3D,
// AvgPool3D, AdaptiveAvgPool3D and the adaptive max pools. The windows are
// Paddle's: strided ones clamped to the input (an average divides by the
// clamped window when `exclusive`, else by ksize); adaptive output cell i
// covers [floor(i·in/out), ceil((i+1)·in/out)). pool2d itself is
// pool_ops.cc.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// The windows of one spatial dimension: output cell o reads [begin[o], end[o]).
struct Axis1 {
  int64_t in = 0, out = 0, k = 1;
  std::vector<int64_t> begin, end;
};

struct NdGeom {
  int64_t n = 0, c = 0;
  std::vector<Axis1> axes;
  bool is_max = true, exclusive = true, adaptive = false;
  int64_t InSize() const {
    int64_t s = 1;
    for (const Axis1& a : axes) s *= a.in;
    return s;
  }
  int64_t OutSize() const {
    int64_t s = 1;
    for (const Axis1& a : axes) s *= a.out;
    return s;
  }
  DDim OutDims() const {
    std::vector<int64_t> d = {n, c};
    for (const Axis1& a : axes) d.push_back(a.out);
    return DDim(d);
  }
};

absl::StatusOr<NdGeom> Geometry(const ExecutionContext& ctx, const DDim& x, int spatial) {
  const std::string& type = ctx.op().type;
  if (x.size() != spatial + 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, ": X", x.ToString(), " must have ", spatial + 2, " dimensions"));
  }
  const bool with_index = absl::StartsWith(type, "max_pool");
  NdGeom g{.n = x[0], .c = x[1]};
  g.is_max = with_index || ctx.Attr<std::string>("pooling_type") == "max";
  g.exclusive = with_index || ctx.Attr<bool>("exclusive");
  g.adaptive = ctx.Attr<bool>("adaptive");
  const bool global = ctx.Attr<bool>("global_pooling");
  const bool ceil = !with_index && ctx.Attr<bool>("ceil_mode");
  std::vector<int32_t> ks = ctx.Attr<std::vector<int32_t>>("ksize");
  std::vector<int32_t> st = ctx.Attr<std::vector<int32_t>>("strides");
  std::vector<int32_t> pd = ctx.Attr<std::vector<int32_t>>("paddings");
  if (static_cast<int>(pd.size()) == spatial) {  // symmetric: one per dimension
    std::vector<int32_t> pairs;
    for (int32_t p : pd) pairs.insert(pairs.end(), {p, p});
    pd = pairs;
  }
  if (static_cast<int>(ks.size()) != spatial || static_cast<int>(st.size()) != spatial ||
      static_cast<int>(pd.size()) != 2 * spatial) {
    return absl::InvalidArgumentError(absl::StrCat(type, ": ksize [", absl::StrJoin(ks, ", "), "], strides [",
                                                   absl::StrJoin(st, ", "), "], paddings [", absl::StrJoin(pd, ", "),
                                                   "] must give each of the ", spatial, " spatial dimensions"));
  }
  for (int d = 0; d < spatial; ++d) {
    Axis1 a{.in = x[d + 2]};
    if (global) {
      a.out = 1, a.k = a.in, a.begin = {0}, a.end = {a.in};
    } else if (g.adaptive) {
      a.out = ks[static_cast<size_t>(d)];
      for (int64_t o = 0; o < a.out; ++o) {
        a.begin.push_back(o * a.in / a.out);
        a.end.push_back(((o + 1) * a.in + a.out - 1) / a.out);
      }
    } else {
      a.k = ks[static_cast<size_t>(d)];
      const int64_t s = st[static_cast<size_t>(d)], p0 = pd[static_cast<size_t>(2 * d)];
      const int64_t p1 = pd[static_cast<size_t>(2 * d + 1)];
      if (a.k < 1 || s < 1)
        return absl::InvalidArgumentError(absl::StrCat(type, ": ksize and strides must be positive"));
      const int64_t span = a.in + p0 + p1 - a.k;
      a.out = (ceil ? (span + s - 1) / s : span / s) + 1;
      if (a.out <= 0) return absl::InvalidArgumentError(absl::StrCat(type, ": window does not fit X", x.ToString()));
      for (int64_t o = 0; o < a.out; ++o) {
        const int64_t b = o * s - p0;
        a.begin.push_back(std::max<int64_t>(b, 0));
        a.end.push_back(std::min(b + a.k, a.in));
      }
    }
    g.axes.push_back(std::move(a));
  }
  return g;
}

// Calls fn(out_cell, in_cells) for each output cell of one image, with the
// flat input positions its window covers.
template <typename Fn>
void ForEachWindow(const NdGeom& g, Fn fn) {
  const int s = static_cast<int>(g.axes.size());
  std::vector<int64_t> o(static_cast<size_t>(s), 0), cells;
  for (int64_t flat = 0, n = g.OutSize(); flat < n; ++flat) {
    int64_t rest = flat;
    for (int d = s - 1; d >= 0; --d) {
      o[static_cast<size_t>(d)] = rest % g.axes[static_cast<size_t>(d)].out;
      rest /= g.axes[static_cast<size_t>(d)].out;
    }
    cells.assign(1, 0);
    for (int d = 0; d < s; ++d) {
      const Axis1& a = g.axes[static_cast<size_t>(d)];
      std::vector<int64_t> next;
      for (int64_t base : cells) {
        for (int64_t i = a.begin[static_cast<size_t>(o[static_cast<size_t>(d)])];
             i < a.end[static_cast<size_t>(o[static_cast<size_t>(d)])]; ++i) {
          next.push_back(base * a.in + i);
        }
      }
      cells.swap(next);
    }
    fn(flat, cells);
  }
}

int64_t KernelVolume(const NdGeom& g) {
  int64_t v = 1;
  for (const Axis1& a : g.axes) v *= a.k;
  return v;
}

template <typename T, int kSpatial>
absl::Status PoolKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const NdGeom g, Geometry(ctx, x->dims(), kSpatial));
  const int64_t in = g.InSize(), out = g.OutSize();
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(g.OutDims());
  Tensor* mask_t = ctx.Output("Mask");
  int32_t* mask = mask_t ? mask_t->mutable_data<int32_t>(g.OutDims()) : nullptr;
  const int64_t volume = KernelVolume(g);
  for (int64_t img = 0; img < g.n * g.c; ++img) {
    const T* xi = xp + img * in;
    ForEachWindow(g, [&](int64_t cell, const std::vector<int64_t>& window) {
      T acc = g.is_max ? -std::numeric_limits<T>::max() : T(0);
      int64_t arg = window.empty() ? 0 : window[0];
      for (int64_t p : window) {
        if (g.is_max) {
          if (xi[p] > acc) acc = xi[p], arg = p;
        } else {
          acc += xi[p];
        }
      }
      if (!g.is_max) acc /= static_cast<T>(g.exclusive || g.adaptive ? static_cast<int64_t>(window.size()) : volume);
      o[img * out + cell] = acc;
      if (mask) mask[img * out + cell] = static_cast<int32_t>(arg);
    });
  }
  return absl::OkStatus();
}

template <typename T, int kSpatial>
absl::Status PoolGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g_out, RequireInput(ctx, GradVarName("Out")));
  OAR_ASSIGN_OR_RETURN(const NdGeom g, Geometry(ctx, x->dims(), kSpatial));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const int64_t in = g.InSize(), out = g.OutSize();
  if (g_out->numel() != g.n * g.c * out) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": Out@GRAD", g_out->dims().ToString(), " does not fit X", x->dims().ToString()));
  }
  const T* xp = x->data<T>();
  const T* gp = g_out->data<T>();
  const Tensor* mask_t = ctx.Input("Mask");
  const Tensor* out_t = ctx.Input("Out");
  T* d = dx->mutable_data<T>(x->dims());
  std::fill(d, d + dx->numel(), T(0));
  const int64_t volume = KernelVolume(g);
  for (int64_t img = 0; img < g.n * g.c; ++img) {
    const T* xi = xp + img * in;
    T* di = d + img * in;
    ForEachWindow(g, [&](int64_t cell, const std::vector<int64_t>& window) {
      const T grad = gp[img * out + cell];
      if (mask_t != nullptr) {
        const int64_t p = mask_t->data<int32_t>()[img * out + cell];
        if (p >= 0 && p < in) di[p] += grad;
      } else if (g.is_max) {  // the first cell equal to Out, as Paddle's
        const T m = out_t->data<T>()[img * out + cell];
        for (int64_t p : window) {
          if (xi[p] == m) {
            di[p] += grad;
            break;
          }
        }
      } else {
        const T share = grad / static_cast<T>(g.exclusive || g.adaptive ? static_cast<int64_t>(window.size()) : volume);
        for (int64_t p : window) di[p] += share;
      }
    });
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterPoolNdOps(OpRegistry* r) {
  auto common = [](OpInfo& i, int spatial) -> OpInfo& {
    return i.Attr("ksize", std::vector<int32_t>{})
        .Attr("strides", std::vector<int32_t>(spatial, 1))
        .Attr("paddings", std::vector<int32_t>(spatial, 0))
        .Attr("global_pooling", false)
        .Attr("adaptive", false);
  };
  auto pool3d = [&](OpInfo& i) -> OpInfo& {
    return common(i, 3)
        .Attr("pooling_type", std::string("max"))
        .Attr("ceil_mode", false)
        .Attr("exclusive", true)
        .Attr("data_format", std::string("NCDHW"))
        .Attr("padding_algorithm", std::string("EXPLICIT"))
        .Implements("data_format", {std::string("NCDHW"), std::string("AnyLayout")})
        .Implements("padding_algorithm", {std::string("EXPLICIT")});
  };
  pool3d(r->Register("pool3d").NotInPlace().Input("X").Output("Out"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {"Out"}, {"Out"}, {"X"}))
      .Kernel<float>(PoolKernel<float, 3>)
      .Kernel<double>(PoolKernel<double, 3>);
  pool3d(r->Register("pool3d_grad")
             .NotInPlace()
             .Input("X")
             .Input("Out")
             .Input(GradVarName("Out"))
             .Output(GradVarName("X"), kDispensable))
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(PoolGradKernel<float, 3>)
      .Kernel<double>(PoolGradKernel<double, 3>);
  for (const int spatial : {2, 3}) {
    const std::string type = absl::StrCat("max_pool", spatial, "d_with_index");
    auto& fwd = common(r->Register(type).NotInPlace().Input("X").Output("Out").Output("Mask"), spatial)
                    .SetInferShape(NoShapeInference)
                    .SetGradMaker(GradOpMaker({"X"}, {"Mask"}, {"Out"}, {"X"}));
    auto& grad = common(r->Register(type + "_grad")
                            .NotInPlace()
                            .Input("X")
                            .Input("Mask")
                            .Input(GradVarName("Out"))
                            .Output(GradVarName("X"), kDispensable),
                        spatial)
                     .SetInferShape(GradSameShapeAsX);
    if (spatial == 2) {
      fwd.Kernel<float>(PoolKernel<float, 2>).Kernel<double>(PoolKernel<double, 2>);
      grad.Kernel<float>(PoolGradKernel<float, 2>).Kernel<double>(PoolGradKernel<double, 2>);
    } else {
      fwd.Kernel<float>(PoolKernel<float, 3>).Kernel<double>(PoolKernel<double, 3>);
      grad.Kernel<float>(PoolGradKernel<float, 3>).Kernel<double>(PoolGradKernel<double, 3>);
    }
  }
}

}  // namespace oar
