// Shape ops: reshape2, flatten2, flatten_contiguous_range, squeeze2,
// unsqueeze2 (views of the same
// data with a new shape), transpose2, concat and split. The "2" ops also
// output XShape ([0, X.dims...], no data) that their grads read the input
// shape from, as in Fluid.
#include <cstring>
#include <numeric>

#include "absl/strings/str_join.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// Fluid's reshape rules: 0 copies the input dimension, one -1 is inferred.
absl::StatusOr<DDim> ReshapeDims(const DDim& x, const std::vector<int32_t>& shape, const std::string& op) {
  DDim out;
  int unknown = -1;
  int64_t known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t v = shape[i];
    if (v == 0) {
      if (static_cast<int>(i) >= x.size()) {
        return absl::InvalidArgumentError(absl::StrCat(op, ": shape[", i, "] = 0 but X has rank ", x.size()));
      }
      v = x[static_cast<int>(i)];
    }
    if (v == -1) {
      if (unknown >= 0) return absl::InvalidArgumentError(absl::StrCat(op, ": shape has more than one -1"));
      unknown = static_cast<int>(i);
    } else if (v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": shape[", i, "] = ", v, " is invalid"));
    } else {
      known *= v;
    }
    out.push_back(v);
  }
  int64_t total = x.numel();
  if (unknown >= 0) {
    if (total >= 0) {
      if (known == 0 || total % known != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(op, ": cannot reshape X", x.ToString(), " to [", absl::StrJoin(shape, ", "), "]"));
      }
      out[unknown] = total / known;
    }
  } else if (total >= 0 && total != known) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": X", x.ToString(), " has ", total, " elements, shape [",
                                                   absl::StrJoin(shape, ", "), "] has ", known));
  }
  return out;
}

absl::StatusOr<DDim> FlattenDims(const DDim& x, int axis, const std::string& op) {
  if (axis < 0 || axis > x.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", axis, " out of range for rank ", x.size()));
  }
  return DDim{x.Product(0, axis), x.Product(axis, x.size())};
}

// flatten_contiguous_range (Paddle 2.x's flatten): dimensions start..stop
// (negative: from the end) merged into one.
absl::StatusOr<DDim> FlattenRangeDims(const DDim& x, int start, int stop, const std::string& op) {
  const int rank = x.size();
  const int a = start < 0 ? start + rank : start, b = stop < 0 ? stop + rank : stop;
  if (rank == 0) return DDim{1};
  if (a < 0 || a >= rank || b < 0 || b >= rank || a > b) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": start_axis ", start, " and stop_axis ", stop,
                                                   " do not name a range of X's ", rank, " dimensions"));
  }
  DDim out;
  for (int i = 0; i < a; ++i) out.push_back(x[i]);
  out.push_back(x.Product(a, b + 1));
  for (int i = b + 1; i < rank; ++i) out.push_back(x[i]);
  return out;
}

std::vector<int> NormalizeAxes(const std::vector<int32_t>& axes, int rank) {
  std::vector<int> out;
  for (int a : axes) out.push_back(a < 0 ? a + rank : a);
  return out;
}

absl::StatusOr<DDim> SqueezeDims(const DDim& x, const std::vector<int32_t>& axes, const std::string& op) {
  std::vector<bool> drop(x.size(), false);
  if (axes.empty()) {
    for (int i = 0; i < x.size(); ++i) drop[i] = x[i] == 1;
  }
  for (int a : NormalizeAxes(axes, x.size())) {
    if (a < 0 || a >= x.size()) return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", a, " out of range"));
    if (x[a] != 1 && x[a] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(op, ": dimension ", a, " of X", x.ToString(), " is not 1"));
    }
    drop[a] = true;
  }
  DDim out;
  for (int i = 0; i < x.size(); ++i)
    if (!drop[i]) out.push_back(x[i]);
  return out;
}

absl::StatusOr<DDim> UnsqueezeDims(const DDim& x, const std::vector<int32_t>& axes, const std::string& op) {
  std::vector<int64_t> out(x.begin(), x.end());
  for (int a : axes) {
    int rank = static_cast<int>(out.size()) + 1;
    int pos = a < 0 ? a + rank : a;
    if (pos < 0 || pos >= rank) return absl::InvalidArgumentError(absl::StrCat(op, ": axis ", a, " out of range"));
    out.insert(out.begin() + pos, 1);
  }
  return DDim(out);
}

// One shape function per view op, selected by type.
absl::StatusOr<DDim> ViewDims(const InferShapeContext& ctx, const DDim& x) {
  const std::string& t = ctx.op().type;
  if (t == "reshape2") return ReshapeDims(x, ctx.Attr<std::vector<int32_t>>("shape"), t);
  if (t == "flatten2") return FlattenDims(x, ctx.Attr<int32_t>("axis"), t);
  if (t == "flatten_contiguous_range") {
    return FlattenRangeDims(x, ctx.Attr<int32_t>("start_axis"), ctx.Attr<int32_t>("stop_axis"), t);
  }
  if (t == "squeeze2") return SqueezeDims(x, ctx.Attr<std::vector<int32_t>>("axes"), t);
  return UnsqueezeDims(x, ctx.Attr<std::vector<int32_t>>("axes"), t);
}

absl::Status ViewInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  OAR_ASSIGN_OR_RETURN(DDim out, ViewDims(ctx, x));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.SetOutputDim("XShape", XShapeOf(x));
  ctx.SetOutputDtype("XShape", ctx.InputDtype("X"));
  ctx.ShareLoD("X", "Out");
  return absl::OkStatus();
}

// The view ops share X's buffer: no copy.
absl::Status ViewKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  Tensor* out = ctx.Output("Out");
  DDim d = out->dims();
  out->ShareDataWith(*x);
  out->Resize(d);
  if (Tensor* xs = ctx.Output("XShape")) xs->mutable_data(x->dtype());
  return absl::OkStatus();
}

absl::Status ViewGradInferShape(InferShapeContext& ctx) {
  const DDim x = FromXShape(ctx.InputDim("XShape"));
  const std::string gout = GradVarName("Out");
  // X@GRAD is a view of Out@GRAD's buffer with X's shape: same element count.
  if (ctx.IsRuntime() && ctx.InputDim(gout).numel() != x.numel()) {
    return ctx.Error("input ", InputLabel(ctx.op(), gout), " has ", ctx.InputDim(gout).numel(), " elements, expected ",
                     x.numel(), " (X", x.ToString(), " from XShape ", InputLabel(ctx.op(), "XShape"), ")");
  }
  ctx.SetOutputDim(GradVarName("X"), x);
  return absl::OkStatus();
}

absl::Status ViewGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  DDim d = dx->dims();
  dx->ShareDataWith(*g);
  dx->Resize(d);
  return absl::OkStatus();
}

DataType ViewGradDtype(const ExecutionContext& ctx) {
  const Tensor* g = ctx.Input(GradVarName("Out"));
  return g && g->initialized() ? g->dtype() : DataType::kFloat32;
}

// ---- transpose2 ----

// X's dimensions permuted by the `axis` attribute, which must be a
// permutation of X's dimensions.
absl::StatusOr<DDim> TransposedDims(const InferShapeContext& ctx, const DDim& x) {
  auto axis = ctx.Attr<std::vector<int32_t>>("axis");
  std::vector<int32_t> sorted = axis;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> iota(x.size());
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota) {
    return ctx.Error("axis [", absl::StrJoin(axis, ", "), "] is not a permutation of X's ", x.size(), " dimensions");
  }
  DDim out;
  for (int a : axis) out.push_back(x[a]);
  return out;
}

absl::Status TransposeInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X");
  OAR_ASSIGN_OR_RETURN(DDim out, TransposedDims(ctx, x));
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.SetOutputDim("XShape", XShapeOf(x));
  return absl::OkStatus();
}

// out[idx] = x[permuted idx], by walking output indices with a counter.
template <typename T>
void Permute(const T* x, const DDim& xd, const std::vector<int32_t>& axis, T* out) {
  const int r = xd.size();
  std::vector<int64_t> xstride(r, 1), odim(r), count(r, 0);
  for (int i = r - 2; i >= 0; --i) xstride[i] = xstride[i + 1] * xd[i + 1];
  for (int i = 0; i < r; ++i) odim[i] = xd[axis[i]];
  const int64_t n = xd.numel();
  int64_t src = 0;
  for (int64_t o = 0; o < n; ++o) {
    out[o] = x[src];
    for (int i = r - 1; i >= 0; --i) {  // increment the output counter
      src += xstride[axis[i]];
      if (++count[i] < odim[i]) break;
      src -= xstride[axis[i]] * odim[i];
      count[i] = 0;
    }
  }
}

template <typename T>
absl::Status TransposeKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  Permute(x->data<T>(), x->dims(), ctx.Attr<std::vector<int32_t>>("axis"), ctx.Output("Out")->mutable_data<T>());
  if (Tensor* xs = ctx.Output("XShape")) xs->mutable_data<T>();
  return absl::OkStatus();
}

absl::Status TransposeGradInferShape(InferShapeContext& ctx) {
  const DDim x = FromXShape(ctx.InputDim("XShape"));
  OAR_ASSIGN_OR_RETURN(DDim out, TransposedDims(ctx, x));
  OAR_RETURN_IF_ERROR(ExpectInputDims(ctx, GradVarName("Out"), out));
  ctx.SetOutputDim(GradVarName("X"), x);
  return absl::OkStatus();
}

template <typename T>
absl::Status TransposeGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  auto axis = ctx.Attr<std::vector<int32_t>>("axis");
  std::vector<int32_t> inverse(axis.size());
  for (size_t i = 0; i < axis.size(); ++i) inverse[axis[i]] = static_cast<int32_t>(i);
  Permute(g->data<T>(), g->dims(), inverse, dx->mutable_data<T>());
  return absl::OkStatus();
}

}  // namespace

void RegisterShapeOps(OpRegistry* r) {
  using Attrs = std::vector<std::pair<std::string, Attribute>>;
  // `shape_inputs`: Paddle's tensor forms of the shape/axes attribute, which
  // Oar does not implement (they must be empty).
  auto view = [r](const std::string& type, const Attrs& attrs, std::vector<std::string> shape_inputs = {}) {
    OpInfo& fwd = r->Register(type)
                      .Input("X")
                      .Output("Out")
                      .Output("XShape", kDispensable)
                      .SetInferShape(ViewInferShape)
                      .InPlaceMayReshape()
                      .SetGradMaker(GradOpMaker({}, {"XShape"}, {"Out"}, {"X"}))
                      .SetKernelDtype(nullptr)
                      .Kernel<float>(ViewKernel)
                      .Kernel<double>(ViewKernel)
                      .Kernel<int64_t>(ViewKernel)
                      .Kernel<int32_t>(ViewKernel);
    OpInfo& grad = r->Register(type + "_grad")
                       .Input("XShape")
                       .Input(GradVarName("Out"))
                       .Output(GradVarName("X"), kDispensable)
                       .SetInferShape(ViewGradInferShape)
                       .InPlaceMayReshape()
                       .SetKernelDtype(ViewGradDtype)
                       .Kernel<float>(ViewGradKernel)
                       .Kernel<double>(ViewGradKernel);
    // A view shares its input's buffer wherever it lives: the same kernels
    // serve a GPU (XShape carries only a shape; no kernel reads its data).
    const auto gpu = Place::Kind::kCUDA;
    fwd.Kernel<float>(ViewKernel, gpu)
        .Kernel<double>(ViewKernel, gpu)
        .Kernel<int64_t>(ViewKernel, gpu)
        .Kernel<int32_t>(ViewKernel, gpu);
    grad.Kernel<float>(ViewGradKernel, gpu).Kernel<double>(ViewGradKernel, gpu);
    for (const auto& [name, def] : attrs) {
      fwd.Attr(name, def);
      grad.Attr(name, def);
    }
    for (const auto& slot : shape_inputs) fwd.Input(slot, kDuplicable | kUnimplemented);
  };
  view("reshape2", {{"shape", std::vector<int32_t>{}}}, {"Shape", "ShapeTensor"});
  view("flatten2", {{"axis", int32_t{1}}});
  view("flatten_contiguous_range", {{"start_axis", int32_t{1}}, {"stop_axis", int32_t{1}}});
  view("squeeze2", {{"axes", std::vector<int32_t>{}}});
  view("unsqueeze2", {{"axes", std::vector<int32_t>{}}}, {"AxesTensor", "AxesTensorList"});

  r->Register("transpose2")
      .NotInPlace()
      .Input("X")
      .Output("Out")
      .Output("XShape", kDispensable)
      .Attr("axis", std::vector<int32_t>{})
      .Attr("data_format", std::string("AnyLayout"))
      .SetInferShape(TransposeInferShape)
      .SetGradMaker(GradOpMaker({}, {"XShape"}, {"Out"}, {"X"}))
      .Kernel<float>(TransposeKernel<float>)
      .Kernel<double>(TransposeKernel<double>);
  r->Register("transpose2_grad")
      .NotInPlace()
      .Input("XShape")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("axis", std::vector<int32_t>{})
      .Attr("data_format", std::string("AnyLayout"))
      .SetInferShape(TransposeGradInferShape)
      .SetKernelDtype(ViewGradDtype)
      .Kernel<float>(TransposeGradKernel<float>)
      .Kernel<double>(TransposeGradKernel<double>);
}

}  // namespace oar
