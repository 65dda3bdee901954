// reduce_sum / reduce_mean / reduce_max / reduce_min / reduce_prod and the
// boolean reduce_all / reduce_any (over `dim`, or everything with reduce_all),
// clip (elementwise into [min, max]) and clip_by_norm (rescale to an L2
// norm of at most max_norm) — the ops gradient clipping and regularization
// emit.
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_join.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// Whether every dimension is folded: reduce_all, or (Paddle 2.x, whose
// paddle.sum(x) writes dim=[]) no dimension named. Fluid 1.x always names one.
template <typename Ctx>
bool ReducesAll(const Ctx& ctx) {
  return ctx.template Attr<bool>("reduce_all") || ctx.template Attr<std::vector<int32_t>>("dim").empty();
}

// Which input dimensions a reduce op folds.
std::vector<bool> ReducedDims(const InferShapeContext& ctx, int rank) {
  std::vector<bool> r(rank, ReducesAll(ctx));
  for (int d : ctx.Attr<std::vector<int32_t>>("dim")) {
    int a = d < 0 ? d + rank : d;
    if (a >= 0 && a < rank) r[a] = true;
  }
  return r;
}

// Out's shape; every `dim` must lie in [-rank, rank).
absl::StatusOr<DDim> ReduceOutDims(const InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  for (int d : ctx.Attr<std::vector<int32_t>>("dim")) {
    if (d < -x.size() || d >= x.size()) return ctx.Error("dim ", d, " out of range for X", x.ToString());
  }
  std::vector<bool> r = ReducedDims(ctx, x.size());
  const bool keep = ctx.Attr<bool>("keep_dim");
  DDim out;
  for (int i = 0; i < x.size(); ++i) {
    if (!r[i])
      out.push_back(x[i]);
    else if (keep)
      out.push_back(1);
  }
  if (out.size() == 0) out = DDim{1};
  return out;
}

absl::Status ReduceInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, ReduceOutDims(ctx));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  return absl::OkStatus();
}

absl::Status ReduceGradInferShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, ReduceOutDims(ctx));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), out));
  return GradSameShapeAsX(ctx);
}

// Maps each input element to its output element: out index = the input
// index with reduced coordinates dropped. Walked like an odometer: each
// step adds the output stride of the coordinate that moved and takes back
// those of the coordinates that wrapped (a reduced coordinate's stride is 0).
std::vector<int64_t> OutIndex(const DDim& x, const std::vector<bool>& reduced) {
  const int rank = x.size();
  std::vector<int64_t> map(static_cast<size_t>(x.numel()));
  std::vector<int64_t> stride(static_cast<size_t>(rank), 0), coord(static_cast<size_t>(rank), 0);
  for (int64_t i = rank - 1, s = 1; i >= 0; --i) {
    if (!reduced[i]) stride[i] = s, s *= x[static_cast<int>(i)];
  }
  const int64_t inner = rank == 0 ? 1 : x[rank - 1], inner_stride = rank == 0 ? 0 : stride[rank - 1];
  int64_t o = 0;
  for (size_t e = 0; e < map.size(); e += static_cast<size_t>(inner)) {
    for (int64_t k = 0; k < inner; ++k) map[e + static_cast<size_t>(k)] = o + k * inner_stride;
    for (int i = rank - 2; i >= 0; --i) {  // carry into the outer coordinates
      o += stride[i];
      if (++coord[i] < x[i]) break;
      o -= stride[i] * x[i];
      coord[i] = 0;
    }
  }
  return map;
}

std::vector<bool> ReducedAtRuntime(const ExecutionContext& ctx, int rank) {
  std::vector<bool> r(rank, ReducesAll(ctx));
  for (int d : ctx.Attr<std::vector<int32_t>>("dim")) r[d < 0 ? d + rank : d] = true;
  return r;
}

enum Fold { kSum, kMean, kMax, kMin, kProd };

template <typename T, Fold kFold>
absl::Status ReduceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T* xp = x->data<T>();  // before Out's buffer: in place, that may be a fresh one
  const int64_t n = x->numel();
  Tensor* out = ctx.Output("Out");
  std::vector<T> copy;
  if (out == x) {  // in place (only over unit dims): Out is overwritten below, keep X's values
    copy.assign(xp, xp + n);
    xp = copy.data();
  }
  T* o = out->mutable_data<T>();
  const T init = kFold == kMax    ? -std::numeric_limits<T>::infinity()
                 : kFold == kMin  ? std::numeric_limits<T>::infinity()
                 : kFold == kProd ? T(1)
                                  : T(0);
  std::fill(o, o + out->numel(), init);
  const std::vector<int64_t> map = OutIndex(x->dims(), ReducedAtRuntime(ctx, x->dims().size()));
  for (size_t e = 0; e < map.size(); ++e) {
    T& acc = o[map[e]];
    if (kFold == kMax)
      acc = std::max(acc, xp[e]);
    else if (kFold == kMin)
      acc = std::min(acc, xp[e]);
    else if (kFold == kProd)
      acc *= xp[e];
    else
      acc += xp[e];
  }
  if (kFold == kMean && out->numel() > 0) {
    const T k = T(out->numel()) / T(n);
    for (int64_t i = 0; i < out->numel(); ++i) o[i] *= k;
  }
  return absl::OkStatus();
}

// reduce_all / reduce_any over bools (no gradient).
template <bool kAll>
absl::Status BoolReduceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_RETURN_IF_ERROR(RequireDtype<bool>(ctx, "X", *x));
  const std::vector<bool> xs(x->data<bool>(), x->data<bool>() + x->numel());
  Tensor* out = ctx.Output("Out");
  bool* o = out->mutable_data<bool>();
  std::fill(o, o + out->numel(), kAll);
  const std::vector<int64_t> map = OutIndex(x->dims(), ReducedAtRuntime(ctx, x->dims().size()));
  for (size_t e = 0; e < map.size(); ++e) o[map[e]] = kAll ? o[map[e]] && xs[e] : o[map[e]] || xs[e];
  return absl::OkStatus();
}

// sum and mean spread Out@GRAD evenly; max and min give it to every element
// equal to Out (ties all take it, as Paddle's kernel does); prod to each
// element times the product of the others.
template <typename T, Fold kFold>
absl::Status ReduceGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const std::vector<int64_t> map = OutIndex(x->dims(), ReducedAtRuntime(ctx, x->dims().size()));
  const T* gp = g->data<T>();
  const T* xp = x->data<T>();
  if (kFold == kMax || kFold == kMin) {
    OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
    const T* op = out->data<T>();
    T* d = dx->mutable_data<T>();
    for (size_t e = 0; e < map.size(); ++e) d[e] = xp[e] == op[map[e]] ? gp[map[e]] : T(0);
    return absl::OkStatus();
  }
  if (kFold == kProd) {  // the product of the others, without dividing (zeros are fine)
    std::vector<std::vector<size_t>> members(static_cast<size_t>(g->numel()));
    for (size_t e = 0; e < map.size(); ++e) members[static_cast<size_t>(map[e])].push_back(e);
    std::vector<T> d(map.size());
    for (const auto& m : members) {
      for (size_t a = 0; a < m.size(); ++a) {
        T others = T(1);
        for (size_t b = 0; b < m.size(); ++b) {
          if (b != a) others *= xp[m[b]];
        }
        d[m[a]] = gp[map[m[a]]] * others;
      }
    }
    std::copy(d.begin(), d.end(), dx->mutable_data<T>());
    return absl::OkStatus();
  }
  const T k = kFold == kMean ? T(g->numel()) / T(x->numel()) : T(1);
  T* d = dx->mutable_data<T>();
  for (size_t e = 0; e < map.size(); ++e) d[e] = gp[map[e]] * k;
  return absl::OkStatus();
}

// ---- clip ----

absl::Status ClipInferShape(InferShapeContext& ctx) {
  if (!(ctx.Attr<float>("min") <= ctx.Attr<float>("max"))) {
    return ctx.Error("min ", ctx.Attr<float>("min"), " > max ", ctx.Attr<float>("max"));
  }
  return SameShapeAsX(ctx);
}

template <typename T>
absl::Status ClipKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T lo = static_cast<T>(ctx.Attr<float>("min")), hi = static_cast<T>(ctx.Attr<float>("max"));
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>();
  for (int64_t i = 0, n = x->numel(); i < n; ++i) o[i] = std::min(std::max(xp[i], lo), hi);
  return absl::OkStatus();
}

template <typename T>
absl::Status ClipGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T lo = static_cast<T>(ctx.Attr<float>("min")), hi = static_cast<T>(ctx.Attr<float>("max"));
  const T* xp = x->data<T>();
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>();
  for (int64_t i = 0, n = x->numel(); i < n; ++i) d[i] = (xp[i] > lo && xp[i] < hi) ? gp[i] : T(0);
  return absl::OkStatus();
}

absl::Status ClipGradInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, GradVarName("Out"), "X"));
  return GradSameShapeAsX(ctx);
}

absl::Status ClipByNormInferShape(InferShapeContext& ctx) {
  if (!(ctx.Attr<float>("max_norm") > 0)) return ctx.Error("max_norm must be positive");
  return SameShapeAsX(ctx);
}

template <typename T>
absl::Status ClipByNormKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T max_norm = static_cast<T>(ctx.Attr<float>("max_norm"));
  const T* xp = x->data<T>();
  T sq = 0;
  for (int64_t i = 0, n = x->numel(); i < n; ++i) sq += xp[i] * xp[i];
  const T norm = std::sqrt(sq);
  const T k = norm > max_norm ? max_norm / norm : T(1);
  T* o = ctx.Output("Out")->mutable_data<T>();
  for (int64_t i = 0, n = x->numel(); i < n; ++i) o[i] = xp[i] * k;
  return absl::OkStatus();
}

}  // namespace

#define OAR_FLOAT_KERNELS(...) Kernel<float>(__VA_ARGS__<float>).Kernel<double>(__VA_ARGS__<double>)

void RegisterReduceClipOps(OpRegistry* r) {
  auto reduce = [r](const std::string& type, KernelFn f32, KernelFn f64, KernelFn g32, KernelFn g64,
                    bool grad_reads_out = false) {
    auto attrs = [](OpInfo& i) -> OpInfo& {
      return i.Attr("dim", std::vector<int32_t>{0})
          .Attr("keep_dim", false)
          .Attr("reduce_all", false)
          .Attr("in_dtype", int32_t{-1})
          .Attr("out_dtype", int32_t{-1})  // Paddle 2.x: -1 keeps X's dtype
          .Implements("in_dtype", {int32_t{-1}})
          .Implements("out_dtype", {int32_t{-1}});
    };
    attrs(r->Register(type).Input("X").Output("Out"))
        .SetInferShape(ReduceInferShape)
        .SetGradMaker(grad_reads_out ? GradOpMaker({"X"}, {"Out"}, {"Out"}, {"X"})
                                     : GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
        .AddKernel(Place::Kind::kCPU, DataType::kFloat32, f32)
        .AddKernel(Place::Kind::kCPU, DataType::kFloat64, f64);
    // Out: Fluid 1.0-1.5 passed the forward output too; unread.
    attrs(r->Register(type + "_grad")
              .Input("X")
              .Input("Out", kDispensable)
              .Input(GradVarName("Out"))
              .Output(GradVarName("X"), kDispensable))
        .SetInferShape(ReduceGradInferShape)
        .AddKernel(Place::Kind::kCPU, DataType::kFloat32, g32)
        .AddKernel(Place::Kind::kCPU, DataType::kFloat64, g64);
  };
  reduce("reduce_sum", ReduceKernel<float, kSum>, ReduceKernel<double, kSum>, ReduceGradKernel<float, kSum>,
         ReduceGradKernel<double, kSum>);
  reduce("reduce_mean", ReduceKernel<float, kMean>, ReduceKernel<double, kMean>, ReduceGradKernel<float, kMean>,
         ReduceGradKernel<double, kMean>);
  reduce("reduce_max", ReduceKernel<float, kMax>, ReduceKernel<double, kMax>, ReduceGradKernel<float, kMax>,
         ReduceGradKernel<double, kMax>, true);
  reduce("reduce_min", ReduceKernel<float, kMin>, ReduceKernel<double, kMin>, ReduceGradKernel<float, kMin>,
         ReduceGradKernel<double, kMin>, true);
  reduce("reduce_prod", ReduceKernel<float, kProd>, ReduceKernel<double, kProd>, ReduceGradKernel<float, kProd>,
         ReduceGradKernel<double, kProd>);
  for (const bool all : {true, false}) {
    auto& info = r->Register(all ? "reduce_all" : "reduce_any")
                     .Input("X")
                     .Output("Out")
                     .Attr("dim", std::vector<int32_t>{0})
                     .Attr("keep_dim", false)
                     .Attr("reduce_all", false)
                     .Attr("in_dtype", int32_t{-1})
                     .Attr("out_dtype", int32_t{-1})
                     .SetInferShape(ReduceInferShape)
                     .SetKernelDtype(+[](const ExecutionContext&) { return DataType::kBool; });
    info.AddKernel(Place::Kind::kCPU, DataType::kBool, all ? BoolReduceKernel<true> : BoolReduceKernel<false>);
  }
  r->Register("clip")
      .Input("X")
      .Output("Out")
      .Attr("min", 0.0f)
      .Attr("max", 0.0f)
      .SetInferShape(ClipInferShape)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .OAR_FLOAT_KERNELS(ClipKernel);
  r->Register("clip_grad")
      .Input("X")
      .Input("Out", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("min", 0.0f)
      .Attr("max", 0.0f)
      .SetInferShape(ClipGradInferShape)
      .OAR_FLOAT_KERNELS(ClipGradKernel);
  r->Register("clip_by_norm")
      .Input("X")
      .Output("Out")
      .Attr("max_norm", 1.0f)
      .SetInferShape(ClipByNormInferShape)
      .OAR_FLOAT_KERNELS(ClipByNormKernel);
}

#undef OAR_FLOAT_KERNELS

}  // namespace oar
