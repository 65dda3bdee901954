// Norms and normalizations beyond batch_norm and layer_norm, with Paddle's
// slots and gradients: p_norm (any porder along an axis, or all elements),
// norm (fluid.layers.l2_normalize: Out = X / Norm), instance_norm
// (per sample and channel; SavedVariance holds 1/sqrt(var + epsilon)) and
// group_norm (per sample and channel group; Mean and Variance [N, groups]).
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// X as [outer, len, inner] around `axis` (asvector: one vector of all).
struct Around {
  int64_t outer = 1, len = 1, inner = 1;
  DDim out;
};

absl::StatusOr<Around> AroundAxis(const ExecutionContext& ctx, const DDim& x, int axis, bool all, bool keep) {
  if (all) return Around{1, x.numel(), 1, keep ? DDim(std::vector<int64_t>(static_cast<size_t>(x.size()), 1)) : DDim{}};
  if (axis < 0) axis += x.size();
  if (axis < 0 || axis >= x.size())
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": axis outside X", x.ToString()));
  std::vector<int64_t> od;
  for (int d = 0; d < x.size(); ++d) {
    if (d != axis)
      od.push_back(x[d]);
    else if (keep)
      od.push_back(1);
  }
  return Around{x.Product(0, axis), x[axis], x.Product(axis + 1, x.size()), DDim(od)};
}

// ---- p_norm ----

template <typename T, bool kGrad>
absl::Status PNormKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const double p = ctx.Attr<float>("porder");
  OAR_ASSIGN_OR_RETURN(const Around a, AroundAxis(ctx, x->dims(), ctx.Attr<int32_t>("axis"), ctx.Attr<bool>("asvector"),
                                                  ctx.Attr<bool>("keepdim")));
  const T* xp = x->data<T>();
  auto at = [&](int64_t o, int64_t k, int64_t i) { return (o * a.len + k) * a.inner + i; };
  if (!kGrad) {
    T* out = ctx.Output("Out")->mutable_data<T>(a.out);
    for (int64_t o = 0; o < a.outer; ++o) {
      for (int64_t i = 0; i < a.inner; ++i) {
        double acc = std::isinf(p) ? (p > 0 ? 0.0 : std::numeric_limits<double>::infinity()) : 0.0;
        for (int64_t k = 0; k < a.len; ++k) {
          const double v = std::abs(static_cast<double>(xp[at(o, k, i)]));
          if (std::isinf(p))
            acc = p > 0 ? std::max(acc, v) : std::min(acc, v);
          else if (p == 0)
            acc += v != 0;
          else
            acc += std::pow(v, p);
        }
        out[o * a.inner + i] = static_cast<T>(std::isinf(p) || p == 0 ? acc : std::pow(acc, 1 / p));
      }
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T* op = out->data<T>();
  const T* gp = g->data<T>();
  const double eps = ctx.Attr<float>("epsilon");
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t i = 0; i < a.inner; ++i) {
      const double y = op[o * a.inner + i], gy = gp[o * a.inner + i];
      for (int64_t k = 0; k < a.len; ++k) {
        const double v = xp[at(o, k, i)], s = (v > 0) - (v < 0);
        double r = 0;
        if (std::isinf(p))
          r = std::abs(v) == y ? s * gy : 0;
        else if (p != 0)
          r = s * std::pow(std::abs(v), p - 1) * gy / (std::pow(y, p - 1) + eps);
        d[at(o, k, i)] = static_cast<T>(r);
      }
    }
  }
  return absl::OkStatus();
}

// ---- norm (l2_normalize) ----

template <typename T, bool kGrad>
absl::Status L2NormalizeKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Around a, AroundAxis(ctx, x->dims(), ctx.Attr<int32_t>("axis"), false, true));
  const T* xp = x->data<T>();
  auto at = [&](int64_t o, int64_t k, int64_t i) { return (o * a.len + k) * a.inner + i; };
  if (!kGrad) {
    const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
    T* out = ctx.Output("Out")->mutable_data<T>(x->dims());
    T* norm = ctx.Output("Norm") ? ctx.Output("Norm")->mutable_data<T>(a.out) : nullptr;
    for (int64_t o = 0; o < a.outer; ++o) {
      for (int64_t i = 0; i < a.inner; ++i) {
        T s = 0;
        for (int64_t k = 0; k < a.len; ++k) s += xp[at(o, k, i)] * xp[at(o, k, i)];
        const T n = std::sqrt(s + eps);
        if (norm) norm[o * a.inner + i] = n;
        for (int64_t k = 0; k < a.len; ++k) out[at(o, k, i)] = xp[at(o, k, i)] / n;
      }
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* norm, RequireInput(ctx, "Norm"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T* np = norm->data<T>();
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t o = 0; o < a.outer; ++o) {
    for (int64_t i = 0; i < a.inner; ++i) {
      const T n = np[o * a.inner + i];
      T dot = 0;
      for (int64_t k = 0; k < a.len; ++k) dot += gp[at(o, k, i)] * xp[at(o, k, i)];
      for (int64_t k = 0; k < a.len; ++k) d[at(o, k, i)] = (gp[at(o, k, i)] - xp[at(o, k, i)] * dot / (n * n)) / n;
    }
  }
  return absl::OkStatus();
}

// ---- instance_norm and group_norm: normalize each (sample, group) ----

// Channels per group and groups: instance_norm's groups are its channels.
struct Grouping {
  int64_t n, c, groups, per_group, plane;
};

absl::StatusOr<Grouping> GroupingOf(const ExecutionContext& ctx, const DDim& x) {
  if (x.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": X", x.ToString(), " has no channels"));
  const bool group = absl::StartsWith(ctx.op().type, "group_norm");
  const int64_t c = x[1], groups = group ? ctx.Attr<int32_t>("groups") : c;
  if (groups < 1 || c % groups != 0) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", c, " channels in ", groups, " groups"));
  }
  if (group && ctx.Attr<std::string>("data_layout") != "NCHW" && ctx.Attr<std::string>("data_layout") != "AnyLayout") {
    return absl::UnimplementedError("group_norm: data_layout NHWC is not implemented (Oar implements NCHW)");
  }
  return Grouping{x[0], c, groups, c / groups, x.Product(2, x.size())};
}

template <typename T>
absl::Status GroupNormKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Grouping gr, GroupingOf(ctx, x->dims()));
  const bool group = absl::StartsWith(ctx.op().type, "group_norm");
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const Tensor* scale = ctx.Input("Scale");
  const Tensor* bias = ctx.Input("Bias");
  const T* xp = x->data<T>();
  T* y = ctx.Output("Y")->mutable_data<T>(x->dims());
  const DDim stats = group ? DDim{gr.n, gr.groups} : DDim{gr.n * gr.c};
  T* mean = ctx.Output(group ? "Mean" : "SavedMean") ? ctx.Output(group ? "Mean" : "SavedMean")->mutable_data<T>(stats)
                                                     : nullptr;
  Tensor* var_t = ctx.Output(group ? "Variance" : "SavedVariance");
  T* var = var_t ? var_t->mutable_data<T>(stats) : nullptr;
  const int64_t size = gr.per_group * gr.plane;
  for (int64_t s = 0; s < gr.n * gr.groups; ++s) {
    const T* xs = xp + s * size;
    double m = 0, v = 0;
    for (int64_t i = 0; i < size; ++i) m += xs[i];
    m /= static_cast<double>(size);
    for (int64_t i = 0; i < size; ++i) v += (xs[i] - m) * (xs[i] - m);
    v /= static_cast<double>(size);
    const T inv = static_cast<T>(1 / std::sqrt(v + eps));
    if (mean) mean[s] = static_cast<T>(m);
    if (var) var[s] = group ? static_cast<T>(v) : inv;
    for (int64_t i = 0; i < size; ++i) {
      const int64_t ch = (s % gr.groups) * gr.per_group + i / gr.plane;
      const T sc = scale ? scale->data<T>()[ch] : T(1), b = bias ? bias->data<T>()[ch] : T(0);
      y[s * size + i] = static_cast<T>((xs[i] - m) * inv) * sc + b;
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status GroupNormGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Y")));
  OAR_ASSIGN_OR_RETURN(const Grouping gr, GroupingOf(ctx, x->dims()));
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const Tensor* scale = ctx.Input("Scale");
  const T* xp = x->data<T>();
  const T* gp = g->data<T>();
  Tensor* dx_t = ctx.Output(GradVarName("X"));
  Tensor* ds_t = ctx.Output(GradVarName("Scale"));
  Tensor* db_t = ctx.Output(GradVarName("Bias"));
  T* dx = dx_t ? dx_t->mutable_data<T>(x->dims()) : nullptr;
  T* ds = ds_t ? ds_t->mutable_data<T>(DDim{gr.c}) : nullptr;
  T* db = db_t ? db_t->mutable_data<T>(DDim{gr.c}) : nullptr;
  if (ds) std::fill(ds, ds + gr.c, T(0));
  if (db) std::fill(db, db + gr.c, T(0));
  const int64_t size = gr.per_group * gr.plane;
  std::vector<double> xhat(static_cast<size_t>(size)), dxhat(static_cast<size_t>(size));
  for (int64_t s = 0; s < gr.n * gr.groups; ++s) {  // statistics recomputed from X, in double
    const T* xs = xp + s * size;
    const T* gs = gp + s * size;
    double m = 0, v = 0;
    for (int64_t i = 0; i < size; ++i) m += xs[i];
    m /= static_cast<double>(size);
    for (int64_t i = 0; i < size; ++i) v += (xs[i] - m) * (xs[i] - m);
    v /= static_cast<double>(size);
    const double inv = 1 / std::sqrt(v + eps);
    double mean_d = 0, mean_dx = 0;
    for (int64_t i = 0; i < size; ++i) {
      const int64_t ch = (s % gr.groups) * gr.per_group + i / gr.plane;
      xhat[static_cast<size_t>(i)] = (xs[i] - m) * inv;
      dxhat[static_cast<size_t>(i)] = gs[i] * (scale ? scale->data<T>()[ch] : T(1));
      mean_d += dxhat[static_cast<size_t>(i)];
      mean_dx += dxhat[static_cast<size_t>(i)] * xhat[static_cast<size_t>(i)];
      if (ds) ds[ch] += static_cast<T>(gs[i] * xhat[static_cast<size_t>(i)]);
      if (db) db[ch] += gs[i];
    }
    mean_d /= static_cast<double>(size), mean_dx /= static_cast<double>(size);
    if (dx) {
      for (int64_t i = 0; i < size; ++i) {
        dx[s * size + i] =
            static_cast<T>(inv * (dxhat[static_cast<size_t>(i)] - mean_d - xhat[static_cast<size_t>(i)] * mean_dx));
      }
    }
  }
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)
#define OAR_FLOATS2(K, B) Kernel<float>(K<float, B>).Kernel<double>(K<double, B>)

}  // namespace

void RegisterNormMoreOps(OpRegistry* r) {
  auto pnorm = [](OpInfo& i) -> OpInfo& {
    return i.Attr("porder", 2.0f)
        .Attr("axis", int32_t{-1})
        .Attr("epsilon", 1e-12f)
        .Attr("keepdim", false)
        .Attr("asvector", false);
  };
  pnorm(r->Register("p_norm").Input("X").Output("Out"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {"Out"}, {"Out"}, {"X"}))
      .OAR_FLOATS2(PNormKernel, false);
  pnorm(r->Register("p_norm_grad")
            .Input("X")
            .Input("Out")
            .Input(GradVarName("Out"))
            .Output(GradVarName("X"), kDispensable))
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(PNormKernel, true);
  r->Register("norm")
      .Input("X")
      .Output("Out")
      .Output("Norm", kDispensable)
      .Attr("axis", int32_t{-1})
      .Attr("epsilon", 1e-10f)
      .Attr("is_test", false)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {"Norm"}, {"Out"}, {"X"}))
      .OAR_FLOATS2(L2NormalizeKernel, false);
  r->Register("norm_grad")
      .Input("X")
      .Input("Norm")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("axis", int32_t{-1})
      .Attr("epsilon", 1e-10f)
      .Attr("is_test", false)
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(L2NormalizeKernel, true);
  r->Register("instance_norm")
      .NotInPlace()
      .Input("X")
      .Input("Scale", kDispensable)
      .Input("Bias", kDispensable)
      .Output("Y")
      .Output("SavedMean", kDispensable)
      .Output("SavedVariance", kDispensable)
      .Attr("epsilon", 1e-5f)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Scale"}, {"SavedMean", "SavedVariance"}, {"Y"}, {"X", "Scale", "Bias"}))
      .OAR_FLOATS(GroupNormKernel);
  r->Register("instance_norm_grad")
      .NotInPlace()
      .Input("X")
      .Input("Scale", kDispensable)
      .Input("SavedMean", kDispensable)
      .Input("SavedVariance", kDispensable)
      .Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Scale"), kDispensable)
      .Output(GradVarName("Bias"), kDispensable)
      .Attr("epsilon", 1e-5f)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(GroupNormGradKernel);
  r->Register("group_norm")
      .NotInPlace()
      .Input("X")
      .Input("Scale", kDispensable)
      .Input("Bias", kDispensable)
      .Output("Y")
      .Output("Mean", kDispensable)
      .Output("Variance", kDispensable)
      .Attr("epsilon", 1e-5f)
      .Attr("groups", int32_t{1})
      .Attr("data_layout", std::string("NCHW"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Scale", "Bias"}, {"Y", "Mean", "Variance"}, {"Y"}, {"X", "Scale", "Bias"}))
      .OAR_FLOATS(GroupNormKernel);
  r->Register("group_norm_grad")
      .NotInPlace()
      .Input("X", kDispensable)
      .Input("Y", kDispensable)
      .Input("Scale", kDispensable)
      .Input("Bias", kDispensable)
      .Input("Mean", kDispensable)
      .Input("Variance", kDispensable)
      .Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Scale"), kDispensable)
      .Output(GradVarName("Bias"), kDispensable)
      .Attr("epsilon", 1e-5f)
      .Attr("groups", int32_t{1})
      .Attr("data_layout", std::string("NCHW"))
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(GroupNormGradKernel);
}

#undef OAR_FLOATS
#undef OAR_FLOATS2

}  // namespace oar
