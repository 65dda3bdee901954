// Ops that learning-rate schedules and control flow emit: cast, increment,
// the comparisons (less_than, ...), logical_not/and/or and assign (tensors,
// SelectedRows and tensor arrays). Their GPU kernels are in
// control_ops_cuda.cc and tensor_ops_cuda.cc; conditional_block is in
// conditional_block_op.cc, while in while_op.cc.
#include <functional>

#include "common/framework/op_registry.h"
#include "common/ops/numpy_broadcast.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// ---- cast ----

template <typename In, typename Out>
void Convert(const Tensor& x, Tensor* out) {
  const In* src = x.data<In>();
  Out* dst = out->mutable_data<Out>(x.dims());
  for (int64_t i = 0, n = x.numel(); i < n; ++i) dst[i] = static_cast<Out>(src[i]);
}

template <typename In>
absl::Status CastKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "X"));
  Tensor* out = ctx.Output("Out");
  // Out bound to X: read from a second owner of X's buffer, so Out gets a
  // buffer of its own and X's values outlive it (a wider type would free
  // them; a narrower one would write over them while they are read).
  Tensor kept;
  if (out == in) kept = *in;
  const Tensor* x = out == in ? &kept : in;
  switch (static_cast<DataType>(ctx.Attr<int32_t>("out_dtype"))) {
    case DataType::kFloat32:
      Convert<In, float>(*x, out);
      break;
    case DataType::kFloat64:
      Convert<In, double>(*x, out);
      break;
    case DataType::kInt32:
      Convert<In, int32_t>(*x, out);
      break;
    case DataType::kInt64:
      Convert<In, int64_t>(*x, out);
      break;
    case DataType::kBool:
      Convert<In, bool>(*x, out);
      break;
    default:
      return absl::UnimplementedError(
          absl::StrCat("cast: out_dtype ", ctx.Attr<int32_t>("out_dtype"), " is not supported"));
  }
  out->set_lod(x->lod());
  return absl::OkStatus();
}

absl::Status CastInferShape(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", ctx.InputDim("X"));
  ctx.SetOutputDtype("Out", static_cast<DataType>(ctx.Attr<int32_t>("out_dtype")));
  return absl::OkStatus();
}

DataType InputDtype(const ExecutionContext& ctx) {
  const Tensor* x = ctx.Input("X");
  return x && x->initialized() ? x->dtype() : DataType::kFloat32;
}

std::vector<OpDesc> CastGradMaker(const OpDesc& fwd) {
  OpDesc g;
  g.type = "cast";
  g.SetInput("X", {GradVarName(fwd.Output("Out")[0])});
  g.SetOutput("Out", {GradVarName(fwd.Input("X")[0])});
  g.SetAttr("in_dtype", fwd.GetAttr<int32_t>("out_dtype"));
  g.SetAttr("out_dtype", fwd.GetAttr<int32_t>("in_dtype"));
  return {g};
}

// ---- increment ----

absl::Status IncrementInferShape(InferShapeContext& ctx) {
  if (ctx.InputDim("X").numel() != 1) return ctx.Error("X must hold one value, got ", ctx.InputDim("X").ToString());
  return SameShapeAsX(ctx);
}

template <typename T>
absl::Status IncrementKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T v = x->data<T>()[0];
  const DDim dims = x->dims();  // [1], or [] where Paddle 2.x made a 0-D counter
  ctx.Output("Out")->mutable_data<T>(dims)[0] = v + static_cast<T>(ctx.Attr<float>("step"));
  return absl::OkStatus();
}

// ---- comparisons and logic (Y equal in shape to X, a single value, or
// broadcast with X as numpy does: Paddle 2.x's comparisons) ----

absl::Status CompareInferShape(InferShapeContext& ctx) {
  DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
  DDim out = x;
  if (y.numel() != 1 && !x.HasUnknown() && !y.HasUnknown() && x != y) {
    auto b = NumpyBroadcast(ctx.op().type, x, y);
    if (!b.ok())
      return ctx.Error("Y", y.ToString(), " must match X", x.ToString(), ", hold one value or broadcast with it");
    out = b->out;
  }
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", DataType::kBool);
  return absl::OkStatus();
}

template <typename T, template <typename> class Cmp>
absl::Status CompareKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_RETURN_IF_ERROR(RequireDtype<T>(ctx, "Y", *y));
  const T* xp = x->data<T>();
  const T* yp = y->data<T>();
  if (y->numel() != 1 && x->dims() != y->dims()) {
    OAR_ASSIGN_OR_RETURN(const NumpyBcast b, NumpyBroadcast(ctx.op().type, x->dims(), y->dims()));
    bool* o = ctx.Output("Out")->mutable_data<bool>(b.out);
    b.ForEach([&](int64_t i, int64_t xi, int64_t yi) { o[i] = Cmp<T>()(xp[xi], yp[yi]); });
    return absl::OkStatus();
  }
  const bool scalar = y->numel() == 1;
  bool* o = ctx.Output("Out")->mutable_data<bool>(x->dims());
  for (int64_t i = 0, n = x->numel(); i < n; ++i) o[i] = Cmp<T>()(xp[i], yp[scalar ? 0 : i]);
  return absl::OkStatus();
}

template <typename F>
absl::Status LogicKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_RETURN_IF_ERROR(RequireDtype<bool>(ctx, "X", *x));
  const Tensor* y = ctx.Input("Y");
  if (y != nullptr) OAR_RETURN_IF_ERROR(RequireDtype<bool>(ctx, "Y", *y));
  const bool* xp = x->data<bool>();
  const bool* yp = y ? y->data<bool>() : nullptr;
  bool* o = ctx.Output("Out")->mutable_data<bool>(x->dims());
  for (int64_t i = 0, n = x->numel(); i < n; ++i) o[i] = F()(xp[i], yp ? yp[y->numel() == 1 ? 0 : i] : false);
  return absl::OkStatus();
}

struct Not {
  bool operator()(bool a, bool) const { return !a; }
};
struct And {
  bool operator()(bool a, bool b) const { return a && b; }
};
struct Or {
  bool operator()(bool a, bool b) const { return a || b; }
};
struct Xor {
  bool operator()(bool a, bool b) const { return a != b; }
};

absl::Status LogicInferShape(InferShapeContext& ctx) {
  if (ctx.HasInput("Y")) {  // logical_not has no Y
    const DDim x = ctx.InputDim("X"), y = ctx.InputDim("Y");
    const bool known = !x.HasUnknown() && !y.HasUnknown();
    // As Fluid: the element counts must agree (or Y holds one value).
    if ((ctx.IsRuntime() || known) && x.numel() != y.numel() && y.numel() != 1) {
      return ctx.Error("Y ('", ctx.op().Input("Y")[0], "')", y.ToString(), " must match X ('", ctx.op().Input("X")[0],
                       "')", x.ToString(), " or hold one value");
    }
  }
  ctx.SetOutputDim("Out", ctx.InputDim("X"));
  ctx.SetOutputDtype("Out", DataType::kBool);
  return absl::OkStatus();
}

// ---- assign ----

absl::Status AssignKernel(const ExecutionContext& ctx) {
  const Variable* x = ctx.InputVar("X");
  Variable* out = ctx.OutputVar("Out");
  if (x == nullptr || !x->IsInitialized()) {
    return absl::InvalidArgumentError(absl::StrCat("assign: input X ('", ctx.op().Input("X")[0], "') has no value"));
  }
  if (x->IsType<SelectedRows>()) {
    const SelectedRows& s = x->Get<SelectedRows>();
    SelectedRows* o = out->GetMutable<SelectedRows>();
    o->rows = s.rows;
    o->height = s.height;
    o->value.CopyFrom(s.value);
    return absl::OkStatus();
  }
  if (x->IsType<TensorList>()) {  // a tensor array, element by element
    const TensorList& xs = x->Get<TensorList>();
    TensorList copy(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      if (xs[i].initialized()) copy[i].CopyFrom(xs[i]);
    }
    *out->GetMutable<TensorList>() = std::move(copy);
    return absl::OkStatus();
  }
  out->GetMutable<Tensor>()->CopyFrom(x->Get<Tensor>());
  return absl::OkStatus();
}

std::vector<OpDesc> AssignGradMaker(const OpDesc& fwd) {
  OpDesc g;
  g.type = "assign";
  g.SetInput("X", {GradVarName(fwd.Output("Out")[0])});
  g.SetOutput("Out", {GradVarName(fwd.Input("X")[0])});
  return {g};
}

DataType AnyDtype(const ExecutionContext&) { return DataType::kFloat32; }

template <template <typename> class Cmp>
void RegisterCompare(OpRegistry* r, const std::string& type) {
  r->Register(type)
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Attr("axis", int32_t{-1})
      .Attr("force_cpu", false)
      .SetInferShape(CompareInferShape)
      .SetKernelDtype(InputDtype)
      .AddKernel(Place::Kind::kCPU, DataType::kFloat32, CompareKernel<float, Cmp>)
      .AddKernel(Place::Kind::kCPU, DataType::kFloat64, CompareKernel<double, Cmp>)
      .AddKernel(Place::Kind::kCPU, DataType::kInt32, CompareKernel<int32_t, Cmp>)
      .AddKernel(Place::Kind::kCPU, DataType::kInt64, CompareKernel<int64_t, Cmp>);
}

}  // namespace

void RegisterControlOps(OpRegistry* r) {
  r->Register("cast")
      .Input("X")
      .Output("Out")
      .Attr("in_dtype", int32_t{5})
      .Attr("out_dtype", int32_t{5})
      .SetInferShape(CastInferShape)
      .SetKernelDtype(InputDtype)
      .SetGradMaker(CastGradMaker)
      .Kernel<float>(CastKernel<float>)
      .Kernel<double>(CastKernel<double>)
      .Kernel<int32_t>(CastKernel<int32_t>)
      .Kernel<int64_t>(CastKernel<int64_t>)
      .Kernel<bool>(CastKernel<bool>);
  r->Register("increment")
      .Input("X")
      .Output("Out")
      .Attr("step", 1.0f)
      .SetInferShape(IncrementInferShape)
      .SetKernelDtype(InputDtype)
      .Kernel<float>(IncrementKernel<float>)
      .Kernel<double>(IncrementKernel<double>)
      .Kernel<int32_t>(IncrementKernel<int32_t>)
      .Kernel<int64_t>(IncrementKernel<int64_t>);
  RegisterCompare<std::less>(r, "less_than");
  RegisterCompare<std::less_equal>(r, "less_equal");
  RegisterCompare<std::greater>(r, "greater_than");
  RegisterCompare<std::greater_equal>(r, "greater_equal");
  RegisterCompare<std::equal_to>(r, "equal");
  RegisterCompare<std::not_equal_to>(r, "not_equal");
  r->Register("logical_not")
      .Input("X")
      .Output("Out")
      .SetInferShape(LogicInferShape)
      .SetKernelDtype(InputDtype)
      .Kernel<bool>(LogicKernel<Not>);
  r->Register("logical_and")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(LogicInferShape)
      .SetKernelDtype(InputDtype)
      .Kernel<bool>(LogicKernel<And>);
  r->Register("logical_or")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(LogicInferShape)
      .SetKernelDtype(InputDtype)
      .Kernel<bool>(LogicKernel<Or>);
  r->Register("logical_xor")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(LogicInferShape)
      .SetKernelDtype(InputDtype)
      .Kernel<bool>(LogicKernel<Xor>);
  r->Register("assign")
      .Input("X")
      .Output("Out")
      .SetInferShape(SameShapeAsX)
      .SetKernelDtype(AnyDtype)
      .SetGradMaker(AssignGradMaker)
      .Kernel<float>(AssignKernel);
}

}  // namespace oar
