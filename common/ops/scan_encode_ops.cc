// Ops that scan or encode along an axis, as Paddle 2.x writes them: cumsum
// (axis, exclusive, reverse; its gradient is a cumsum the other way: Fluid's
// maker writes a cumsum op, Paddle 2.x's a cumsum_grad), arg_max / arg_min (the first of equal
// values), one_hot_v2 and label_smooth.
//
// Thread-safety: stateless kernels.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

int Axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

// ---- cumsum ----

// out = the running sums of x along the op's axis (`flip` reverses the
// op's direction: the gradient's).
template <typename T>
absl::Status Cumsum(const ExecutionContext& ctx, const Tensor& x, bool flip, Tensor* out) {
  const bool flatten = ctx.Attr<bool>("flatten"), exclusive = ctx.Attr<bool>("exclusive");
  const bool reverse = ctx.Attr<bool>("reverse") != flip;
  const DDim dims = flatten ? DDim{x.numel()} : x.dims();
  const int axis = Axis(ctx.Attr<int32_t>("axis"), dims.size());
  if (axis < 0 || axis >= dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": axis outside X", x.dims().ToString()));
  }
  const int64_t outer = dims.Product(0, axis), len = dims[axis], inner = dims.Product(axis + 1, dims.size());
  const T* xp = x.data<T>();
  T* o = out->mutable_data<T>(flatten && !flip ? DDim{x.numel()} : x.dims());
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t i = 0; i < inner; ++i) {
      T run = T(0);
      for (int64_t s = 0; s < len; ++s) {
        const int64_t k = reverse ? len - 1 - s : s;
        const int64_t at = (a * len + k) * inner + i;
        if (exclusive) {
          o[at] = run;
          run += xp[at];
        } else {
          run += xp[at];
          o[at] = run;
        }
      }
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CumsumKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  return Cumsum<T>(ctx, *x, false, ctx.Output("Out"));
}

// Paddle 2.x's cumsum_grad (X, Out@GRAD): a cumsum of Out@GRAD the other way.
template <typename T>
absl::Status CumsumGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  OAR_RETURN_IF_ERROR(Cumsum<T>(ctx, *g, true, dx));
  const Tensor* x = ctx.Input("X");
  if (x != nullptr && x->numel() == dx->numel()) dx->Resize(x->dims());  // flatten: X's own shape
  return absl::OkStatus();
}

std::vector<OpDesc> CumsumGradMaker(const OpDesc& fwd) {  // a cumsum the other way, as Paddle's maker writes
  OpDesc g;
  g.type = "cumsum";
  g.SetInput("X", {GradVarName(fwd.Output("Out")[0])});
  g.SetOutput("Out", {GradVarName(fwd.Input("X")[0])});
  g.attrs = fwd.attrs;
  g.attrs["reverse"] = !fwd.GetAttr<bool>("reverse");
  return {g};
}

// ---- arg_max, arg_min ----

template <typename T, bool kMax>
absl::Status ArgKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const bool flatten = ctx.Attr<bool>("flatten"), keep = ctx.Attr<bool>("keepdims");
  const DDim dims = flatten ? DDim{x->numel()} : x->dims();
  const int axis = Axis(static_cast<int>(ctx.Attr<int64_t>("axis")), dims.size());
  if (axis < 0 || axis >= dims.size()) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": axis outside X", x->dims().ToString()));
  }
  const int64_t outer = dims.Product(0, axis), len = dims[axis], inner = dims.Product(axis + 1, dims.size());
  std::vector<int64_t> od;
  for (int d = 0; d < dims.size(); ++d) {
    if (d != axis)
      od.push_back(dims[d]);
    else if (keep)
      od.push_back(1);
  }
  Tensor* out = ctx.Output("Out");
  const bool i32 = ctx.Attr<int32_t>("dtype") == static_cast<int32_t>(DataType::kInt32);
  out->Resize(DDim(od));
  void* raw = out->mutable_data(i32 ? DataType::kInt32 : DataType::kInt64);
  const T* xp = x->data<T>();
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t s = 1; s < len; ++s) {  // the first of equal values, as Paddle
        const T v = xp[(a * len + s) * inner + i], b = xp[(a * len + best) * inner + i];
        if (kMax ? v > b : v < b) best = s;
      }
      if (i32)
        static_cast<int32_t*>(raw)[a * inner + i] = static_cast<int32_t>(best);
      else
        static_cast<int64_t*>(raw)[a * inner + i] = best;
    }
  }
  return absl::OkStatus();
}

absl::Status ArgShape(InferShapeContext& ctx) {
  ctx.SetOutputDtype("Out", ctx.Attr<int32_t>("dtype") == static_cast<int32_t>(DataType::kInt32) ? DataType::kInt32
                                                                                                 : DataType::kInt64);
  return absl::OkStatus();
}

// ---- one_hot_v2, label_smooth ----

absl::Status OneHotKernel(const ExecutionContext& ctx) {
  const int64_t depth = ctx.Attr<int32_t>("depth");
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const bool tolerant = ctx.Attr<bool>("allow_out_of_range");
  OAR_ASSIGN_OR_RETURN(std::vector<int64_t> ids, tolerant ? absl::StatusOr<std::vector<int64_t>>(std::vector<int64_t>{})
                                                          : IndexValues(ctx, "X", depth));
  std::vector<int64_t> od = x->dims().ToVector();
  od.push_back(depth);
  float* o = ctx.Output("Out")->mutable_data<float>(DDim(od));
  std::fill(o, o + x->numel() * depth, 0.f);
  for (int64_t i = 0; i < x->numel(); ++i) {
    const int64_t v = tolerant ? (x->dtype() == DataType::kInt32 ? x->data<int32_t>()[i] : x->data<int64_t>()[i])
                               : ids[static_cast<size_t>(i)];
    if (v >= 0 && v < depth) o[i * depth + v] = 1.f;
  }
  return absl::OkStatus();
}

absl::Status OneHotShape(InferShapeContext& ctx) {
  std::vector<int64_t> od = ctx.InputDim("X").ToVector();
  od.push_back(ctx.Attr<int32_t>("depth"));
  ctx.SetOutputDim("Out", DDim(od));
  ctx.SetOutputDtype("Out", DataType::kFloat32);
  return absl::OkStatus();
}

template <typename T, bool kBackward>
absl::Status LabelSmoothKernel(const ExecutionContext& ctx) {
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const char* in = kBackward ? "Out@GRAD" : "X";
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, in));
  Tensor* out = ctx.Output(kBackward ? GradVarName("X") : "Out");
  if (out == nullptr) return absl::OkStatus();
  T* o = out->mutable_data<T>(x->dims());
  const T* xp = x->data<T>();
  const int64_t k = x->dims()[x->dims().size() - 1];
  const Tensor* prior = kBackward ? nullptr : ctx.Input("PriorDist");
  for (int64_t i = 0; i < x->numel(); ++i) {
    if (kBackward) {
      o[i] = (T(1) - eps) * xp[i];
    } else {
      const T mix = prior != nullptr && prior->initialized() ? eps * prior->data<T>()[i % k] : eps / T(k);
      o[i] = (T(1) - eps) * xp[i] + mix;
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterScanEncodeOps(OpRegistry* r) {
  auto any = +[](const ExecutionContext& c) { return InputDtypeOf(c, "X"); };
  NumericCpuKernels(r->Register("cumsum")
                        .NotInPlace()
                        .Input("X")
                        .Output("Out")
                        .Attr("axis", int32_t{-1})
                        .Attr("flatten", false)
                        .Attr("exclusive", false)
                        .Attr("reverse", false)
                        .SetInferShape(SameShapeAsX)
                        .SetKernelDtype(any)
                        .SetGradMaker(CumsumGradMaker),
                    CumsumKernel<float>, CumsumKernel<double>, CumsumKernel<int32_t>, CumsumKernel<int64_t>);
  r->Register("cumsum_grad")
      .Input("X", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("axis", int32_t{-1})
      .Attr("flatten", false)
      .Attr("exclusive", false)
      .Attr("reverse", false)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(CumsumGradKernel<float>)
      .Kernel<double>(CumsumGradKernel<double>);
  for (const bool is_max : {true, false}) {
    auto& info = r->Register(is_max ? "arg_max" : "arg_min")
                     .Input("X")
                     .Output("Out")
                     .Attr("axis", int64_t{0})
                     .Attr("keepdims", false)
                     .Attr("flatten", false)
                     .Attr("dtype", int32_t{3})
                     .SetInferShape(ArgShape)
                     .SetKernelDtype(any);
    if (is_max) {
      NumericCpuKernels(info, ArgKernel<float, true>, ArgKernel<double, true>, ArgKernel<int32_t, true>,
                        ArgKernel<int64_t, true>);
    } else {
      NumericCpuKernels(info, ArgKernel<float, false>, ArgKernel<double, false>, ArgKernel<int32_t, false>,
                        ArgKernel<int64_t, false>);
    }
  }
  r->Register("one_hot_v2")
      .Input("X", kReadAnywhere)
      .Input("depth_tensor", kDispensable | kUnimplemented)
      .Output("Out")
      .Attr("depth", int32_t{-1})
      .Attr("dtype", int32_t{5})
      .Attr("allow_out_of_range", false)
      .Implements("dtype", {int32_t{5}})
      .SetInferShape(OneHotShape)
      .SetKernelDtype(+[](const ExecutionContext&) { return DataType::kFloat32; })
      .Kernel<float>(OneHotKernel);
  r->Register("label_smooth")
      .Input("X")
      .Input("PriorDist", kDispensable)
      .Output("Out")
      .Attr("epsilon", 0.0f)
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({}, {}, {"Out"}, {"X"}))
      .Kernel<float>(LabelSmoothKernel<float, false>)
      .Kernel<double>(LabelSmoothKernel<double, false>);
  r->Register("label_smooth_grad")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("epsilon", 0.0f)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(LabelSmoothKernel<float, true>)
      .Kernel<double>(LabelSmoothKernel<double, true>);
}

}  // namespace oar
