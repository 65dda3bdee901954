// Ops that pick, repeat and stack elements, as Paddle 2.x writes them:
// gather (along `axis`), stack, expand_v2 (to `shape`, -1 keeping a
// dimension), tile (`repeat_times`), Fluid's expand (`expand_times`),
// expand_as_v2 (`target_shape`), where, and their gradients (cumsum,
// arg_max, one_hot_v2, label_smooth: scan_encode_ops.cc). Tensor-valued
// attributes (Axis, Shape, RepeatTimes, ...) are declared, not implemented.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/numpy_broadcast.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

int Axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

// ---- gather ----

absl::Status GatherShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  const DDim idx = ctx.InputDim("Index");
  const int axis = Axis(ctx.Attr<int32_t>("axis"), x.size());
  if (axis < 0 || axis >= x.size()) return ctx.Error("axis ", ctx.Attr<int32_t>("axis"), " outside X", x.ToString());
  x[axis] = idx.size() == 0 ? 1 : idx[0];
  ctx.SetOutputDim("Out", x);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  return absl::OkStatus();
}

// Copies rows of X (the `axis` slices) to Out, or (backward) adds Out@GRAD's
// rows into X@GRAD.
template <typename T, bool kBackward>
absl::Status GatherKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const int axis = Axis(ctx.Attr<int32_t>("axis"), x->dims().size());
  if (axis < 0 || axis >= x->dims().size()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": axis outside X", x->dims().ToString()));
  }
  OAR_ASSIGN_OR_RETURN(std::vector<int64_t> idx, IndexValues(ctx, "Index", x->dims()[axis]));
  const int64_t outer = x->dims().Product(0, axis), inner = x->dims().Product(axis + 1, x->dims().size());
  const int64_t rows = x->dims()[axis], k = static_cast<int64_t>(idx.size());
  if (!kBackward) {
    DDim od = x->dims();
    od[axis] = k;
    T* o = ctx.Output("Out")->mutable_data<T>(od);
    const T* xp = x->data<T>();
    for (int64_t a = 0; a < outer; ++a) {
      for (int64_t j = 0; j < k; ++j) std::copy_n(xp + (a * rows + idx[j]) * inner, inner, o + (a * k + j) * inner);
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  T* d = dx->mutable_data<T>(x->dims());
  std::fill(d, d + x->numel(), T(0));
  const T* gp = g->data<T>();
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t i = 0; i < inner; ++i) d[(a * rows + idx[j]) * inner + i] += gp[(a * k + j) * inner + i];
    }
  }
  return absl::OkStatus();
}

// ---- stack ----

absl::Status StackShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X", 0);
  const int axis = Axis(ctx.Attr<int32_t>("axis"), x.size() + 1);
  std::vector<int64_t> out = x.ToVector();
  out.insert(out.begin() + std::clamp(axis, 0, x.size()), static_cast<int64_t>(ctx.InputSize("X")));
  ctx.SetOutputDim("Y", DDim(out));
  ctx.SetOutputDtype("Y", ctx.InputDtype("X"));
  return absl::OkStatus();
}

template <typename T>
absl::Status StackKernel(const ExecutionContext& ctx) {
  const std::vector<const Tensor*> xs = ctx.MultiInput("X");
  if (xs.empty() || xs[0] == nullptr) return absl::InvalidArgumentError("stack: no X");
  const DDim& d0 = xs[0]->dims();
  const int axis = Axis(ctx.Attr<int32_t>("axis"), d0.size() + 1);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i] == nullptr || xs[i]->dims() != d0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stack: ", InputLabel(ctx.op(), "X", i), " is not shaped as X[0]", d0.ToString()));
    }
  }
  const int64_t outer = d0.Product(0, axis), inner = d0.Product(axis, d0.size()), n = static_cast<int64_t>(xs.size());
  std::vector<int64_t> od = d0.ToVector();
  od.insert(od.begin() + axis, n);
  T* o = ctx.Output("Y")->mutable_data<T>(DDim(od));
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t j = 0; j < n; ++j) std::copy_n(xs[j]->data<T>() + a * inner, inner, o + (a * n + j) * inner);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status StackGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Y")));
  const std::vector<Tensor*> dxs = ctx.MultiOutput(GradVarName("X"));
  const int64_t n = static_cast<int64_t>(dxs.size());
  const int axis = Axis(ctx.Attr<int32_t>("axis"), g->dims().size());
  if (n == 0 || axis < 0 || axis >= g->dims().size() || g->dims()[axis] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("stack_grad: Y@GRAD", g->dims().ToString(), " does not stack ", n, " tensors at axis ", axis));
  }
  std::vector<int64_t> xd = g->dims().ToVector();
  xd.erase(xd.begin() + axis);
  const int64_t outer = g->dims().Product(0, axis), inner = g->dims().Product(axis + 1, g->dims().size());
  for (int64_t j = 0; j < n; ++j) {
    if (dxs[j] == nullptr) continue;
    T* d = dxs[j]->mutable_data<T>(DDim(xd));
    for (int64_t a = 0; a < outer; ++a) std::copy_n(g->data<T>() + (a * n + j) * inner, inner, d + a * inner);
  }
  return absl::OkStatus();
}

// ---- expand_v2, tile: X broadcast to a larger shape ----

// The shape X becomes: expand_v2's `shape` (-1 keeps X's size), or X's
// shape times tile's `repeat_times` (X aligned to the right, as Paddle).
absl::StatusOr<DDim> GrownShape(const OpDesc& op, const DDim& x) {
  std::vector<int64_t> want;
  const bool as = op.type.rfind("expand_as_v2", 0) == 0;
  if (op.type.rfind("expand_v2", 0) == 0 || as) {
    for (int32_t v : op.GetAttr<std::vector<int32_t>>(as ? "target_shape" : "shape")) want.push_back(v);
  } else {  // tile; Fluid's expand (expand_times)
    const auto rep = op.GetAttr<std::vector<int32_t>>(op.type.rfind("tile", 0) == 0 ? "repeat_times" : "expand_times");
    const int r = std::max<int>(static_cast<int>(rep.size()), x.size());
    for (int d = 0; d < r; ++d) {
      const int xd = d - (r - x.size()), rd = d - (r - static_cast<int>(rep.size()));
      want.push_back((xd >= 0 ? x[xd] : 1) * (rd >= 0 ? rep[static_cast<size_t>(rd)] : 1));
    }
  }
  if (static_cast<int>(want.size()) < x.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op.type, ": the target shape has fewer dimensions than X", x.ToString()));
  }
  for (int d = 0; d < static_cast<int>(want.size()); ++d) {
    const int xd = d - (static_cast<int>(want.size()) - x.size());
    if (want[d] == -1 && xd >= 0) want[d] = x[xd];
  }
  return DDim(want);
}

absl::Status GrowShape(InferShapeContext& ctx) {
  OAR_ASSIGN_OR_RETURN(DDim out, GrownShape(ctx.op(), ctx.InputDim("X")));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  return absl::OkStatus();
}

// tile is X repeated: output index maps to X's by each coordinate modulo
// X's size; expand_v2 is the same map (a size-1 dimension repeats).
template <typename Fn>
void ForEachGrown(const DDim& x, const DDim& out, Fn fn) {
  const int r = out.size();
  std::vector<int64_t> idx(static_cast<size_t>(r), 0);
  for (int64_t o = 0, n = out.numel(); o < n; ++o) {
    int64_t xi = 0;
    for (int d = 0; d < r; ++d) {
      const int xd = d - (r - x.size());
      if (xd >= 0) xi = xi * x[xd] + idx[static_cast<size_t>(d)] % x[xd];
    }
    fn(o, xi);
    for (int d = r - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < out[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

template <typename T>
absl::Status GrowKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(DDim out, GrownShape(ctx.op(), x->dims()));
  const int r = out.size();
  for (int d = 0; d < x->dims().size(); ++d) {
    const int64_t xs = x->dims()[d], os = out[d + r - x->dims().size()];
    const bool repeats = ctx.op().type.rfind("tile", 0) == 0 || ctx.op().type == "expand";
    if (xs != os && xs != 1 && (!repeats || os % xs != 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat(ctx.op().type, ": X", x->dims().ToString(), " cannot grow to ", out.ToString()));
    }
  }
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(out);
  ForEachGrown(x->dims(), out, [&](int64_t e, int64_t xi) { o[e] = xp[xi]; });
  return absl::OkStatus();
}

template <typename T>
absl::Status GrowGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  std::vector<double> acc(static_cast<size_t>(x->numel()), 0.0);
  const T* gp = g->data<T>();
  ForEachGrown(x->dims(), g->dims(), [&](int64_t e, int64_t xi) { acc[static_cast<size_t>(xi)] += gp[e]; });
  T* d = dx->mutable_data<T>(x->dims());
  for (size_t i = 0; i < acc.size(); ++i) d[i] = static_cast<T>(acc[i]);
  return absl::OkStatus();
}

absl::Status GrowGradShape(InferShapeContext& ctx) { return GradSameShapeAsX(ctx); }

// ---- where ----

absl::Status WhereShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ExpectLikeInput(ctx, "Y", "X"));
  return SameShapeAsX(ctx);
}

template <typename T>
absl::Status WhereKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* c, RequireInput(ctx, "Condition"));
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  if (c->numel() != x->numel() || y->numel() != x->numel() || c->dtype() != DataType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat("where: Condition", c->dims().ToString(), " (bool), X",
                                                   x->dims().ToString(), " and Y", y->dims().ToString(),
                                                   " must be one shape"));
  }
  const bool* cp = c->data<bool>();
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  for (int64_t i = 0; i < x->numel(); ++i) o[i] = cp[i] ? x->data<T>()[i] : y->data<T>()[i];
  return absl::OkStatus();
}

template <typename T>
absl::Status WhereGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* c, RequireInput(ctx, "Condition"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  if (c->numel() != g->numel()) return absl::InvalidArgumentError("where_grad: Condition is not Out@GRAD's shape");
  const bool* cp = c->data<bool>();
  for (const char* slot : {"X", "Y"}) {
    Tensor* d = ctx.Output(GradVarName(slot));
    if (d == nullptr) continue;
    T* dp = d->mutable_data<T>(g->dims());
    const bool want = std::string(slot) == "X";
    for (int64_t i = 0; i < g->numel(); ++i) dp[i] = cp[i] == want ? g->data<T>()[i] : T(0);
  }
  return absl::OkStatus();
}

absl::Status WhereGradShape(InferShapeContext& ctx) {
  ctx.SetOutputDim(GradVarName("X"), ctx.InputDim("X"));
  ctx.SetOutputDim(GradVarName("Y"), ctx.InputDim("Y"));
  return absl::OkStatus();
}

}  // namespace

void RegisterGatherStackOps(OpRegistry* r) {
  auto any = +[](const ExecutionContext& c) { return InputDtypeOf(c, "X"); };
  NumericCpuKernels(r->Register("gather")
                        .NotInPlace()
                        .Input("X")
                        .Input("Index", kReadAnywhere)
                        .Input("Axis", kDispensable | kUnimplemented)
                        .Output("Out")
                        .Attr("axis", int32_t{0})
                        .Attr("overwrite", true)
                        .SetInferShape(GatherShape)
                        .SetKernelDtype(any)
                        .SetGradMaker(GradOpMaker({"X", "Index", "Axis"}, {}, {"Out"}, {"X"})),
                    GatherKernel<float, false>, GatherKernel<double, false>, GatherKernel<int32_t, false>,
                    GatherKernel<int64_t, false>);
  NumericCpuKernels(r->Register("gather_grad")
                        .NotInPlace()
                        .Input("X")
                        .Input("Index", kReadAnywhere)
                        .Input("Axis", kDispensable | kUnimplemented)
                        .Input(GradVarName("Out"))
                        .Output(GradVarName("X"), kDispensable)
                        .Attr("axis", int32_t{0})
                        .Attr("overwrite", true)
                        .SetInferShape(GradSameShapeAsX)
                        .SetKernelDtype(any),
                    GatherKernel<float, true>, GatherKernel<double, true>, GatherKernel<int32_t, true>,
                    GatherKernel<int64_t, true>);
  NumericCpuKernels(r->Register("stack")
                        .NotInPlace()
                        .Input("X", kDuplicable)
                        .Output("Y")
                        .Attr("axis", int32_t{0})
                        .SetInferShape(StackShape)
                        .SetKernelDtype(any)
                        .SetGradMaker(GradOpMaker({}, {}, {"Y"}, {"X"})),
                    StackKernel<float>, StackKernel<double>, StackKernel<int32_t>, StackKernel<int64_t>);
  // Paddle 2.x's grad maker passes X as well; only Y@GRAD is read.
  r->Register("stack_grad")
      .Input("X", kDuplicable | kDispensable)
      .Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDuplicable | kDispensable)
      .Attr("axis", int32_t{0})
      .SetInferShape(NoShapeInference)
      .Kernel<float>(StackGradKernel<float>)
      .Kernel<double>(StackGradKernel<double>);
  for (const std::string type : {"expand_v2", "tile", "expand", "expand_as_v2"}) {
    auto& fwd = r->Register(type).NotInPlace().Input("X").Output("Out").SetInferShape(GrowShape).SetKernelDtype(any);
    auto& grad = r->Register(type + "_grad")
                     .NotInPlace()
                     .Input("X")
                     .Input(GradVarName("Out"))
                     .Output(GradVarName("X"), kDispensable)
                     .SetInferShape(GrowGradShape);
    const std::vector<std::string> tensors =
        type == "tile"           ? std::vector<std::string>{"RepeatTimes", "repeat_times_tensor"}
        : type == "expand"       ? std::vector<std::string>{"ExpandTimes", "expand_times_tensor"}
        : type == "expand_as_v2" ? std::vector<std::string>{}
                                 : std::vector<std::string>{"Shape", "expand_shapes_tensor"};
    for (OpInfo* info : {&fwd, &grad}) {
      for (const std::string& t : tensors) info->Input(t, kDispensable | kDuplicable | kUnimplemented);
      const char* attr = type == "tile"           ? "repeat_times"
                         : type == "expand"       ? "expand_times"
                         : type == "expand_as_v2" ? "target_shape"
                                                  : "shape";
      info->Attr(attr, std::vector<int32_t>{});
    }
    if (type == "expand_as_v2") fwd.Input("Y", kDispensable);  // its shape is target_shape
    fwd.SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}));
    NumericCpuKernels(fwd, GrowKernel<float>, GrowKernel<double>, GrowKernel<int32_t>, GrowKernel<int64_t>);
    grad.Kernel<float>(GrowGradKernel<float>).Kernel<double>(GrowGradKernel<double>);
  }
  NumericCpuKernels(r->Register("where")
                        .NotInPlace()
                        .Input("Condition")
                        .Input("X")
                        .Input("Y")
                        .Output("Out")
                        .SetInferShape(WhereShape)
                        .SetKernelDtype(any)
                        .SetGradMaker(GradOpMaker({"Condition", "X", "Y"}, {}, {"Out"}, {"X", "Y"})),
                    WhereKernel<float>, WhereKernel<double>, WhereKernel<int32_t>, WhereKernel<int64_t>);
  r->Register("where_grad")
      .Input("Condition")
      .Input("X")
      .Input("Y")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .SetInferShape(WhereGradShape)
      .Kernel<float>(WhereGradKernel<float>)
      .Kernel<double>(WhereGradKernel<double>);
}

}  // namespace oar
