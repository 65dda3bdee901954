// Ops that make or rearrange whole tensors, as Paddle 2.x writes them: eye,
// empty (zeros: its values are unspecified), linspace, size (the element
// count), tril_triu, diag_v2, flip (and Fluid's reverse), roll, unbind and
// unstack, with the gradients Paddle's grad makers write (tril_triu_grad,
// roll_grad, unstack_grad; flip's and unbind's are a flip and a stack).
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

DataType AttrDtype(const ExecutionContext& ctx) { return static_cast<DataType>(ctx.Attr<int32_t>("dtype")); }
DataType XDtype(const ExecutionContext& ctx) { return InputDtypeOf(ctx, "X"); }
int Axis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

// ---- eye, empty, linspace, size ----

template <typename T>
absl::Status EyeKernel(const ExecutionContext& ctx) {
  const int64_t rows = ctx.Attr<int64_t>("num_rows");
  int64_t cols = ctx.Attr<int64_t>("num_columns");
  if (cols < 0) cols = rows;
  T* o = ctx.Output("Out")->mutable_data<T>(DDim{rows, cols});
  std::fill(o, o + rows * cols, T(0));
  for (int64_t i = 0; i < std::min(rows, cols); ++i) o[i * cols + i] = T(1);
  return absl::OkStatus();
}

template <typename T>
absl::Status EmptyKernel(const ExecutionContext& ctx) {
  const std::vector<int64_t> shape = ctx.Attr<std::vector<int64_t>>("shape");
  Tensor* out = ctx.Output("Out");
  out->Resize(DDim(shape));
  OAR_RETURN_IF_ERROR(ResizeFromShapeTensors(ctx, out));
  T* o = out->mutable_data<T>();
  std::fill(o, o + out->numel(), T(0));
  return absl::OkStatus();
}

template <typename T>
absl::Status LinspaceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* start, RequireInput(ctx, "Start"));
  OAR_ASSIGN_OR_RETURN(const Tensor* stop, RequireInput(ctx, "Stop"));
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> num, IndexValues(ctx, "Num", int64_t{1} << 40));
  const auto value = [](const Tensor& t) {
    return t.dtype() == DataType::kFloat64 ? t.data<double>()[0] : static_cast<double>(t.data<float>()[0]);
  };
  const double a = value(*start), b = value(*stop);
  const int64_t n = num.at(0);
  T* o = ctx.Output("Out")->mutable_data<T>(DDim{n});
  const double step = n > 1 ? (b - a) / static_cast<double>(n - 1) : 0;
  const int64_t half = n / 2;  // as Paddle: the second half counted back from Stop
  for (int64_t i = 0; i < n; ++i) {
    o[i] = static_cast<T>(i < half ? a + step * static_cast<double>(i) : b - step * static_cast<double>(n - 1 - i));
  }
  return absl::OkStatus();
}

absl::Status SizeKernel(const ExecutionContext& ctx) {
  const Tensor* in = ctx.Input("Input");
  if (in == nullptr) return absl::InvalidArgumentError("size: input Input is missing");
  ctx.Output("Out")->mutable_data<int64_t>(DDim{})[0] = in->numel();
  return absl::OkStatus();
}

// ---- tril_triu ----

template <typename T, bool kGrad>
absl::Status TrilTriuKernel(const ExecutionContext& ctx) {
  const std::string in = kGrad ? GradVarName("Out") : "X";
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, in));
  Tensor* out = ctx.Output(kGrad ? GradVarName("X") : "Out");
  if (out == nullptr) return absl::OkStatus();
  const DDim& d = x->dims();
  if (d.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": X", d.ToString(), " is not a matrix"));
  const int64_t rows = d[d.size() - 2], cols = d[d.size() - 1];
  const int64_t diag = ctx.Attr<int32_t>("diagonal");
  const bool lower = ctx.Attr<bool>("lower");
  const T* xp = x->data<T>();
  T* o = out->mutable_data<T>(d);
  for (int64_t m = 0, n = x->numel(); m < n; ++m) {
    const int64_t j = m % cols, i = (m / cols) % rows;
    o[m] = (lower ? j - i <= diag : j - i >= diag) ? xp[m] : T(0);
  }
  return absl::OkStatus();
}

// ---- diag_v2 (a vector to a matrix at `offset`, or a matrix's diagonal) ----

template <typename T>
absl::Status DiagKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const int64_t off = ctx.Attr<int32_t>("offset");
  const T pad = static_cast<T>(ctx.Attr<float>("padding_value"));
  const T* xp = x->data<T>();
  if (x->dims().size() <= 1) {
    const int64_t n = x->numel(), size = n + std::abs(off);
    T* o = ctx.Output("Out")->mutable_data<T>(DDim{size, size});
    std::fill(o, o + size * size, pad);
    for (int64_t i = 0; i < n; ++i) o[(i + std::max<int64_t>(0, -off)) * size + i + std::max<int64_t>(0, off)] = xp[i];
    return absl::OkStatus();
  }
  const int64_t rows = x->dims()[0], cols = x->dims()[1];
  const int64_t r0 = std::max<int64_t>(0, -off), c0 = std::max<int64_t>(0, off);
  const int64_t n = std::max<int64_t>(0, std::min(rows - r0, cols - c0));
  T* o = ctx.Output("Out")->mutable_data<T>(DDim{n});
  for (int64_t i = 0; i < n; ++i) o[i] = xp[(r0 + i) * cols + c0 + i];
  return absl::OkStatus();
}

// ---- flip, roll ----

template <typename T>
absl::Status FlipKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const DDim& d = x->dims();
  std::vector<bool> flip(static_cast<size_t>(d.size()), false);
  for (int a : ctx.Attr<std::vector<int32_t>>("axis")) {
    a = Axis(a, d.size());
    if (a < 0 || a >= d.size()) return absl::InvalidArgumentError(absl::StrCat("flip: axis outside X", d.ToString()));
    flip[static_cast<size_t>(a)] = !flip[static_cast<size_t>(a)];
  }
  const T* xp = x->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(d);
  for (int64_t m = 0, n = x->numel(); m < n; ++m) {
    int64_t rest = m, src = 0, stride = 1;
    for (int k = d.size() - 1; k >= 0; --k) {
      const int64_t i = rest % d[k];
      rest /= d[k];
      src += (flip[static_cast<size_t>(k)] ? d[k] - 1 - i : i) * stride;
      stride *= d[k];
    }
    o[m] = xp[src];
  }
  return absl::OkStatus();
}

// Out[i] = X[i - shift] along each axis (cyclic); no axes: the flat tensor.
template <typename T, bool kGrad>
absl::Status RollKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, kGrad ? GradVarName("Out") : "X"));
  Tensor* out = ctx.Output(kGrad ? GradVarName("X") : "Out");
  if (out == nullptr) return absl::OkStatus();
  const std::vector<int64_t> shifts = ctx.Attr<std::vector<int64_t>>("shifts");
  const std::vector<int64_t> axes = ctx.Attr<std::vector<int64_t>>("axis");
  const DDim d = axes.empty() ? DDim{x->numel()} : x->dims();
  std::vector<int64_t> shift(static_cast<size_t>(d.size()), 0);
  for (size_t k = 0; k < shifts.size(); ++k) {
    const int a = axes.empty() ? 0 : Axis(static_cast<int>(axes[k]), d.size());
    if (a < 0 || a >= d.size()) return absl::InvalidArgumentError(absl::StrCat("roll: axis outside X", d.ToString()));
    shift[static_cast<size_t>(a)] += kGrad ? -shifts[k] : shifts[k];
  }
  const T* xp = x->data<T>();
  T* o = out->mutable_data<T>(x->dims());
  for (int64_t m = 0, n = x->numel(); m < n; ++m) {
    int64_t rest = m, src = 0, stride = 1;
    for (int k = d.size() - 1; k >= 0; --k) {
      const int64_t i = rest % d[k];
      rest /= d[k];
      src += (((i - shift[static_cast<size_t>(k)]) % d[k] + d[k]) % d[k]) * stride;
      stride *= d[k];
    }
    o[m] = xp[src];
  }
  return absl::OkStatus();
}

// ---- unbind: X split along `axis` into its slices, that axis dropped ----

template <typename T>
absl::Status UnbindKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const DDim& d = x->dims();
  const int axis = Axis(ctx.Attr<int32_t>("axis"), d.size());
  const std::vector<Tensor*> outs = ctx.MultiOutput(ctx.op().type == "unstack" ? "Y" : "Out");
  if (axis < 0 || axis >= d.size() || static_cast<int64_t>(outs.size()) != d[axis]) {
    return absl::InvalidArgumentError(
        absl::StrCat("unbind: ", outs.size(), " outputs for axis ", axis, " of X", d.ToString()));
  }
  std::vector<int64_t> od;
  for (int k = 0; k < d.size(); ++k) {
    if (k != axis) od.push_back(d[k]);
  }
  const int64_t outer = d.Product(0, axis), inner = d.Product(axis + 1, d.size());
  const T* xp = x->data<T>();
  for (int64_t s = 0; s < d[axis]; ++s) {
    T* o = outs[static_cast<size_t>(s)]->mutable_data<T>(DDim(od));
    for (int64_t a = 0; a < outer; ++a) std::copy_n(xp + (a * d[axis] + s) * inner, inner, o + a * inner);
  }
  return absl::OkStatus();
}

// unstack_grad: the slices' gradients stacked back along `axis`.
template <typename T>
absl::Status UnstackGradKernel(const ExecutionContext& ctx) {
  const std::vector<const Tensor*> gs = ctx.MultiInput(GradVarName("Y"));
  if (gs.empty() || gs[0] == nullptr) return absl::InvalidArgumentError("unstack_grad: Y@GRAD is missing");
  const DDim& d = gs[0]->dims();
  const int axis = Axis(ctx.Attr<int32_t>("axis"), d.size() + 1);
  std::vector<int64_t> od(d.begin(), d.end());
  od.insert(od.begin() + axis, static_cast<int64_t>(gs.size()));
  const int64_t outer = d.Product(0, axis), inner = d.Product(axis, d.size()), n = static_cast<int64_t>(gs.size());
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  T* o = dx->mutable_data<T>(DDim(od));
  for (int64_t s = 0; s < n; ++s) {
    if (gs[static_cast<size_t>(s)] == nullptr || gs[static_cast<size_t>(s)]->dims() != d) {
      return absl::InvalidArgumentError("unstack_grad: the slices' gradients differ in shape");
    }
    for (int64_t a = 0; a < outer; ++a)
      std::copy_n(gs[static_cast<size_t>(s)]->data<T>() + a * inner, inner, o + (a * n + s) * inner);
  }
  return absl::OkStatus();
}

// A stack of the slices' gradients (unbind); unstack's grad op, as Paddle's.
std::vector<OpDesc> UnbindGradMaker(const OpDesc& fwd) {
  OpDesc g;
  const bool unstack = fwd.type == "unstack";
  g.type = unstack ? "unstack_grad" : "stack";
  std::vector<std::string> grads;
  for (const std::string& o : fwd.Output(unstack ? "Y" : "Out")) grads.push_back(GradVarName(o));
  if (unstack) {
    g.SetInput(GradVarName("Y"), grads);
    g.SetOutput(GradVarName("X"), {GradVarName(fwd.Input("X")[0])});
    g.attrs = fwd.attrs;
    return {g};
  }
  g.SetInput("X", grads);
  g.SetOutput("Y", {GradVarName(fwd.Input("X")[0])});
  g.SetAttr("axis", fwd.GetAttr<int32_t>("axis"));
  return {g};
}

}  // namespace

void RegisterMatrixShapeOps(OpRegistry* r) {
  const int32_t fp32 = static_cast<int32_t>(DataType::kFloat32);
  NumericCpuKernels(r->Register("eye")
                        .Output("Out")
                        .Attr("num_rows", int64_t{0})
                        .Attr("num_columns", int64_t{-1})
                        .Attr("dtype", fp32)
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(AttrDtype),
                    EyeKernel<float>, EyeKernel<double>, EyeKernel<int32_t>, EyeKernel<int64_t>);
  NumericCpuKernels(r->Register("empty")
                        .Input("ShapeTensor", kDispensable | kReadAnywhere)
                        .Input("ShapeTensorList", kDuplicable | kDispensable | kReadAnywhere)
                        .Output("Out")
                        .Attr("shape", std::vector<int64_t>{})
                        .Attr("dtype", fp32)
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(AttrDtype),
                    EmptyKernel<float>, EmptyKernel<double>, EmptyKernel<int32_t>, EmptyKernel<int64_t>);
  r->Register("linspace")
      .Input("Start", kReadAnywhere)
      .Input("Stop", kReadAnywhere)
      .Input("Num", kReadAnywhere)
      .Output("Out")
      .Attr("dtype", fp32)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AttrDtype)
      .Kernel<float>(LinspaceKernel<float>)
      .Kernel<double>(LinspaceKernel<double>);
  r->Register("size")
      .HostSide()
      .Input("Input", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(SizeKernel);
  NumericCpuKernels(r->Register("tril_triu")
                        .Input("X")
                        .Output("Out")
                        .Attr("diagonal", int32_t{0})
                        .Attr("lower", true)
                        .SetInferShape(SameShapeAsX)
                        .SetKernelDtype(XDtype)
                        .SetGradMaker(GradOpMaker({}, {}, {"Out"}, {"X"})),
                    TrilTriuKernel<float, false>, TrilTriuKernel<double, false>, TrilTriuKernel<int32_t, false>,
                    TrilTriuKernel<int64_t, false>);
  r->Register("tril_triu_grad")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("diagonal", int32_t{0})
      .Attr("lower", true)
      .SetInferShape(NoShapeInference)
      .Kernel<float>(TrilTriuKernel<float, true>)
      .Kernel<double>(TrilTriuKernel<double, true>);
  NumericCpuKernels(r->Register("diag_v2")
                        .Input("X")
                        .Output("Out")
                        .Attr("offset", int32_t{0})
                        .Attr("padding_value", 0.0f)
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(XDtype),
                    DiagKernel<float>, DiagKernel<double>, DiagKernel<int32_t>, DiagKernel<int64_t>);
  for (const std::string type : {"flip", "reverse"}) {  // Fluid's reverse is the same map
    NumericCpuKernels(r->Register(type)
                          .NotInPlace()
                          .Input("X")
                          .Output("Out")
                          .Attr("axis", std::vector<int32_t>{})
                          .SetInferShape(SameShapeAsX)
                          .SetKernelDtype(XDtype)
                          .SetGradMaker(+[](const OpDesc& fwd) {
                            OpDesc g = MakeGradOp(fwd, fwd.type, {}, {}, {}, {});
                            g.SetInput("X", {GradVarName(fwd.Output("Out")[0])});
                            g.SetOutput("Out", {GradVarName(fwd.Input("X")[0])});
                            return std::vector<OpDesc>{g};
                          }),
                      FlipKernel<float>, FlipKernel<double>, FlipKernel<int32_t>, FlipKernel<int64_t>);
  }
  NumericCpuKernels(r->Register("roll")
                        .NotInPlace()
                        .Input("X")
                        .Input("ShiftsTensor", kUnimplemented)
                        .Output("Out")
                        .Attr("shifts", std::vector<int64_t>{})
                        .Attr("axis", std::vector<int64_t>{})
                        .SetInferShape(SameShapeAsX)
                        .SetKernelDtype(XDtype)
                        .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"})),
                    RollKernel<float, false>, RollKernel<double, false>, RollKernel<int32_t, false>,
                    RollKernel<int64_t, false>);
  r->Register("roll_grad")
      .NotInPlace()
      .Input("X", kDispensable)
      .Input("ShiftsTensor", kUnimplemented)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("shifts", std::vector<int64_t>{})
      .Attr("axis", std::vector<int64_t>{})
      .SetInferShape(NoShapeInference)
      .Kernel<float>(RollKernel<float, true>)
      .Kernel<double>(RollKernel<double, true>);
  NumericCpuKernels(r->Register("unstack")
                        .NotInPlace()
                        .Input("X")
                        .Output("Y", kDuplicable)
                        .Attr("axis", int32_t{0})
                        .Attr("num", int32_t{0})
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(XDtype)
                        .SetGradMaker(UnbindGradMaker),
                    UnbindKernel<float>, UnbindKernel<double>, UnbindKernel<int32_t>, UnbindKernel<int64_t>);
  r->Register("unstack_grad")
      .Input(GradVarName("Y"), kDuplicable)
      .Output(GradVarName("X"), kDispensable)
      .Attr("axis", int32_t{0})
      .Attr("num", int32_t{0})
      .SetInferShape(NoShapeInference)
      .Kernel<float>(UnstackGradKernel<float>)
      .Kernel<double>(UnstackGradKernel<double>);
  NumericCpuKernels(r->Register("unbind")
                        .NotInPlace()
                        .Input("X")
                        .Output("Out", kDuplicable)
                        .Attr("axis", int32_t{0})
                        .SetInferShape(NoShapeInference)
                        .SetKernelDtype(XDtype)
                        .SetGradMaker(UnbindGradMaker),
                    UnbindKernel<float>, UnbindKernel<double>, UnbindKernel<int32_t>, UnbindKernel<int64_t>);
}

}  // namespace oar
