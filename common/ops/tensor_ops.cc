// Tensor creation and plumbing: fill_constant, uniform_random,
// gaussian_random, scale, feed, fetch (sum is in sum_op.cc). An
// initializer whose output is a pserver's SparseTable sets the table's row
// initializer instead of filling a tensor.
#include <random>

#include "absl/strings/numbers.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

DDim ShapeAttr(const OpDesc& op) { return DDim(op.GetAttr<std::vector<int64_t>>("shape")); }

absl::Status ShapeFromAttr(InferShapeContext& ctx) {
  ctx.SetOutputDtype("Out", static_cast<DataType>(ctx.Attr<int32_t>("dtype")));
  if (HasShapeTensors(ctx.op())) {
    // The shape comes from tensors' values: the kernel sets it
    // (ResizeFromShapeTensors); before the run, only its rank is known.
    if (!ctx.IsRuntime() && ctx.InputSize("ShapeTensorList") > 0) {
      ctx.SetOutputDim("Out", DDim(std::vector<int64_t>(ctx.InputSize("ShapeTensorList"), -1)));
    }
    return absl::OkStatus();
  }
  DDim d = ShapeAttr(ctx.op());
  for (int64_t v : d) {
    if (v < 0 && ctx.IsRuntime()) return ctx.Error("shape attribute ", d.ToString(), " has a negative dimension");
  }
  ctx.SetOutputDim("Out", d);
  ctx.SetOutputDtype("Out", static_cast<DataType>(ctx.Attr<int32_t>("dtype")));
  return absl::OkStatus();
}

// Out is a pserver's SparseTable: the op becomes the table's row
// initializer (shape [rows, width]: rows are made on first use, not now).
absl::Status InitTable(const ExecutionContext& ctx, RowInitializer init) {
  SparseTable* table = ctx.OutputVar("Out")->GetMutable<SparseTable>();
  const DDim shape = ShapeAttr(ctx.op());
  if (shape.size() != 2 || static_cast<DataType>(ctx.Attr<int32_t>("dtype")) != DataType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": the sparse table '", ctx.op().Output("Out")[0],
                                                   "' is fp32 [rows, width], got shape ", shape.ToString()));
  }
  OAR_RETURN_IF_ERROR(Annotate(table->Configure(shape[1]), ctx.op().Output("Out")[0]));
  table->set_declared_height(shape[0]);
  const int32_t seed = ctx.op().HasAttr("seed") ? ctx.Attr<int32_t>("seed") : 0;
  init.seed = static_cast<uint64_t>(static_cast<uint32_t>(seed));
  table->SetInitializer(init);
  return absl::OkStatus();
}

bool OutIsTable(const ExecutionContext& ctx) {
  const Variable* v = ctx.OutputVar("Out");
  return v != nullptr && v->IsType<SparseTable>();
}

template <typename T>
absl::Status FillConstantKernel(const ExecutionContext& ctx) {
  if (OutIsTable(ctx)) return InitTable(ctx, {RowInitializer::Kind::kConstant, ctx.Attr<float>("value"), 0});
  Tensor* out = ctx.Output("Out");
  OAR_RETURN_IF_ERROR(ResizeFromShapeTensors(ctx, out));
  T* p = out->mutable_data<T>();
  OAR_ASSIGN_OR_RETURN(const T value, FillConstantValue<T>(ctx));
  std::fill(p, p + out->numel(), value);
  return absl::OkStatus();
}

// seed 0 means "a fresh random seed", as in Fluid.
std::mt19937_64 MakeEngine(const ExecutionContext& ctx) {
  int32_t seed = ctx.Attr<int32_t>("seed");
  return std::mt19937_64(seed != 0 ? static_cast<uint64_t>(seed) : std::random_device{}());
}

template <typename T>
absl::Status UniformRandomKernel(const ExecutionContext& ctx) {
  float lo = ctx.Attr<float>("min"), hi = ctx.Attr<float>("max");
  if (!(lo <= hi)) return absl::InvalidArgumentError(absl::StrCat("uniform_random: min ", lo, " > max ", hi));
  if (OutIsTable(ctx)) return InitTable(ctx, {RowInitializer::Kind::kUniform, lo, hi});
  auto engine = MakeEngine(ctx);
  std::uniform_real_distribution<T> dist(lo, hi);
  Tensor* out = ctx.Output("Out");
  OAR_RETURN_IF_ERROR(ResizeFromShapeTensors(ctx, out));
  T* p = out->mutable_data<T>();
  for (int64_t i = 0, n = out->numel(); i < n; ++i) p[i] = dist(engine);
  return absl::OkStatus();
}

template <typename T>
absl::Status GaussianRandomKernel(const ExecutionContext& ctx) {
  float stddev = ctx.Attr<float>("std");
  if (!(stddev >= 0)) return absl::InvalidArgumentError(absl::StrCat("gaussian_random: std ", stddev, " < 0"));
  if (OutIsTable(ctx)) return InitTable(ctx, {RowInitializer::Kind::kGaussian, ctx.Attr<float>("mean"), stddev});
  auto engine = MakeEngine(ctx);
  std::normal_distribution<T> dist(ctx.Attr<float>("mean"), stddev);
  Tensor* out = ctx.Output("Out");
  OAR_RETURN_IF_ERROR(ResizeFromShapeTensors(ctx, out));
  T* p = out->mutable_data<T>();
  for (int64_t i = 0, n = out->numel(); i < n; ++i) p[i] = dist(engine);
  return absl::OkStatus();
}

// ---- scale: Out = scale * X + bias (or scale * (X + bias)) ----

template <typename T>
absl::Status ScaleKernel(const ExecutionContext& ctx) {
  const T s = static_cast<T>(ctx.Attr<float>("scale"));
  const T b = static_cast<T>(ctx.Attr<float>("bias"));
  const bool after = ctx.Attr<bool>("bias_after_scale");
  const Tensor* x = nullptr;
  const T* xp = nullptr;
  int64_t n = 0;
  T* op = nullptr;
  const Variable* xv = ctx.InputVar("X", 0);
  if (xv != nullptr && xv->IsType<SelectedRows>()) {  // a sparse gradient: same rows, values scaled (Fluid's too)
    const SelectedRows& in = xv->Get<SelectedRows>();
    SelectedRows* out = ctx.OutputVar("Out", 0)->GetMutable<SelectedRows>();
    if (out != &in) {
      out->rows = in.rows;
      out->height = in.height;
      out->value.Resize(in.value.dims());
    }
    x = &in.value;
    xp = x->data<T>();  // before Out's buffer: in place, that may be a fresh one
    n = x->numel();
    op = out->value.mutable_data<T>();
  } else {
    OAR_ASSIGN_OR_RETURN(x, RequireInput(ctx, "X"));
    xp = x->data<T>();
    n = x->numel();
    op = ctx.Output("Out")->mutable_data<T>();
  }
  if (after) {
    for (int64_t i = 0; i < n; ++i) op[i] = s * xp[i] + b;
  } else {
    for (int64_t i = 0; i < n; ++i) op[i] = s * (xp[i] + b);
  }
  return absl::OkStatus();
}

std::vector<OpDesc> ScaleGradMaker(const OpDesc& fwd) {
  OpDesc g;
  g.type = "scale";
  g.SetInput("X", {GradVarName(fwd.Output("Out")[0])});
  g.SetOutput("Out", {GradVarName(fwd.Input("X")[0])});
  g.SetAttr("scale", fwd.GetAttr<float>("scale", 1.0f));
  g.SetAttr("bias", 0.0f);
  return {g};
}

// ---- feed / fetch: move tensors between the feed/fetch lists and variables ----

absl::Status FeedKernel(const ExecutionContext& ctx) {
  const Variable* list = ctx.InputVar("X");
  const int col = ctx.Attr<int32_t>("col");
  const std::string& target = ctx.op().Output("Out")[0];
  if (list == nullptr || !list->IsType<TensorList>() || col >= static_cast<int>(list->Get<TensorList>().size()) ||
      col < 0) {
    return absl::InvalidArgumentError(absl::StrCat("feed: no value was fed for '", target, "' (column ", col, ")"));
  }
  ctx.Output("Out")->ShareDataWith(list->Get<TensorList>()[col]);
  return absl::OkStatus();
}

absl::Status FetchKernel(const ExecutionContext& ctx) {
  const Variable* src = ctx.InputVar("X");
  const std::string& name = ctx.op().Input("X")[0];
  if (src == nullptr || !src->IsType<Tensor>() || !src->Get<Tensor>().initialized()) {
    return absl::InvalidArgumentError(absl::StrCat("fetch: variable '", name, "' holds no tensor"));
  }
  const int col = ctx.Attr<int32_t>("col");
  TensorList* list = ctx.OutputVar("Out")->GetMutable<TensorList>();
  if (static_cast<int>(list->size()) <= col) list->resize(col + 1);
  (*list)[col].CopyFrom(src->Get<Tensor>());
  return absl::OkStatus();
}

DataType PlumbingDtype(const ExecutionContext&) { return DataType::kFloat32; }
absl::Status NoInferShape(InferShapeContext&) { return absl::OkStatus(); }

}  // namespace

void RegisterTensorOps(OpRegistry* r) {
  const int32_t fp32 = static_cast<int32_t>(DataType::kFloat32);
  r->Register("fill_constant")
      .Input("ShapeTensor", kDispensable | kReadAnywhere)
      .Input("ShapeTensorList", kDuplicable | kDispensable | kReadAnywhere)
      .Input("ValueTensor", kUnimplemented)
      .Output("Out")
      .Attr("shape", std::vector<int64_t>{})
      .Attr("dtype", fp32)
      .Attr("value", 0.0f)
      .Attr("str_value", std::string())
      .Attr("force_cpu", false)
      .SetInferShape(ShapeFromAttr)
      .Kernel<float>(FillConstantKernel<float>)
      .Kernel<double>(FillConstantKernel<double>)
      .Kernel<int32_t>(FillConstantKernel<int32_t>)
      .Kernel<int64_t>(FillConstantKernel<int64_t>)
      .Kernel<bool>(FillConstantKernel<bool>);
  r->Register("uniform_random")
      .Input("ShapeTensor", kDispensable | kReadAnywhere)
      .Input("ShapeTensorList", kDuplicable | kDispensable | kReadAnywhere)
      .Output("Out")
      .Attr("shape", std::vector<int64_t>{})
      .Attr("dtype", fp32)
      .Attr("min", -1.0f)
      .Attr("max", 1.0f)
      .Attr("seed", int32_t{0})
      .Attr("diag_num", int32_t{0})
      .Implements("diag_num", {int32_t{0}})
      .SetInferShape(ShapeFromAttr)
      .Kernel<float>(UniformRandomKernel<float>)
      .Kernel<double>(UniformRandomKernel<double>);
  r->Register("gaussian_random")
      .Input("ShapeTensor", kDispensable | kReadAnywhere)
      .Input("ShapeTensorList", kDuplicable | kDispensable | kReadAnywhere)
      .Output("Out")
      .Attr("shape", std::vector<int64_t>{})
      .Attr("dtype", fp32)
      .Attr("mean", 0.0f)
      .Attr("std", 1.0f)
      .Attr("seed", int32_t{0})
      .SetInferShape(ShapeFromAttr)
      .Kernel<float>(GaussianRandomKernel<float>)
      .Kernel<double>(GaussianRandomKernel<double>);

  r->Register("scale")
      .Input("X")
      .Input("ScaleTensor", kUnimplemented)
      .Output("Out")
      .Attr("scale", 1.0f)
      .Attr("bias", 0.0f)
      .Attr("bias_after_scale", true)
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(ScaleGradMaker)
      .Kernel<float>(ScaleKernel<float>)
      .Kernel<double>(ScaleKernel<double>)
      .Kernel<int64_t>(ScaleKernel<int64_t>);

  r->Register("feed")
      .HostSide()
      .Input("X")
      .Output("Out")
      .Attr("col", int32_t{0})
      .SetInferShape(NoInferShape)
      .SetKernelDtype(PlumbingDtype)
      .Kernel<float>(FeedKernel);
  r->Register("fetch")
      .HostSide()
      .Input("X")
      .Output("Out")
      .Attr("col", int32_t{0})
      .SetInferShape(NoInferShape)
      .SetKernelDtype(PlumbingDtype)
      .Kernel<float>(FetchKernel);
}

}  // namespace oar
