// Ops that index and make tensors, as Paddle 2.x writes them: shape (a
// tensor's dims as int32), range (paddle.arange: Start, End, Step tensors),
// slice and slice_grad (axes/starts/ends attributes with Python's negative
// and clamped bounds, decrease_axis), fill_any_like and fill_zeros_like.
// slice copies whole runs of memory, of any dtype. Its bounds come from the
// attributes or, where Paddle computed them (a loop's step), from
// StartsTensor/StartsTensorList and EndsTensor/EndsTensorList.
//
// Thread-safety: stateless kernels.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// ---- shape ----

absl::Status ShapeShape(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", DDim{ctx.InputDim("Input").size()});
  ctx.SetOutputDtype("Out", DataType::kInt32);
  return absl::OkStatus();
}

absl::Status ShapeKernel(const ExecutionContext& ctx) {
  const Variable* v = ctx.InputVar("Input");
  if (v == nullptr || !v->IsType<Tensor>() || !v->Get<Tensor>().initialized()) {
    return absl::InvalidArgumentError(absl::StrCat("shape: ", InputLabel(ctx.op(), "Input"), " has no value"));
  }
  const DDim& d = v->Get<Tensor>().dims();
  int32_t* out = ctx.Output("Out")->mutable_data<int32_t>(DDim{d.size()});
  for (int i = 0; i < d.size(); ++i) out[i] = static_cast<int32_t>(d[i]);
  return absl::OkStatus();
}

// ---- range ----

absl::Status RangeShape(InferShapeContext& ctx) {
  if (!ctx.IsRuntime()) ctx.SetOutputDim("Out", DDim{-1});  // from the values, at run time
  ctx.SetOutputDtype("Out", ctx.InputDtype("Start"));
  return absl::OkStatus();
}

template <typename T>
absl::Status RangeKernel(const ExecutionContext& ctx) {
  T v[3];
  const char* slots[3] = {"Start", "End", "Step"};
  for (int i = 0; i < 3; ++i) {
    OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, slots[i]));
    OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, slots[i], 0, *t));
    if (t->numel() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("range: ", InputLabel(ctx.op(), slots[i]), t->dims().ToString(), " must hold one value"));
    }
    v[i] = t->data<T>()[0];
  }
  if (v[2] == T(0)) return absl::InvalidArgumentError("range: Step is 0");
  const double span = (static_cast<double>(v[1]) - static_cast<double>(v[0])) / static_cast<double>(v[2]);
  const int64_t n = span > 0 ? static_cast<int64_t>(std::ceil(span)) : 0;
  T* out = ctx.Output("Out")->mutable_data<T>(DDim{n});
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(v[0] + static_cast<T>(i) * v[2]);
  return absl::OkStatus();
}

// ---- slice ----

struct SliceGeom {
  DDim in, out, out_kept;      // out: with decrease_axis applied; out_kept: without
  std::vector<int64_t> start;  // per dimension of `in`
};

// Where a slice starts and ends along its axes: the `starts`/`ends`
// attributes, or what StartsTensor (a 1-D int tensor) / StartsTensorList
// (one int per axis) and their Ends twins hold, as Paddle 2.x writes when
// the bounds are computed (a loop's step).
struct SliceBounds {
  std::vector<int64_t> starts, ends;
};

bool BoundBySlot(const OpDesc& op, const char* slot) {
  for (const std::string& a : op.Input(slot)) {
    if (!a.empty() && a != kEmptyVarName) return true;
  }
  return false;
}

bool HasBoundTensors(const OpDesc& op) {
  for (const char* s : {"StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"}) {
    if (BoundBySlot(op, s)) return true;
  }
  return false;
}

absl::Status TensorBounds(const ExecutionContext& ctx, const std::string& which, std::vector<int64_t>* out) {
  const std::string whole = which + "Tensor", list = which + "TensorList";
  const bool is_whole = BoundBySlot(ctx.op(), whole.c_str());
  if (!is_whole && !BoundBySlot(ctx.op(), list.c_str())) return absl::OkStatus();
  const std::string& slot = is_whole ? whole : list;
  std::vector<int64_t> v;
  for (size_t i = 0; i < (is_whole ? 1 : ctx.InputSize(slot)); ++i) {
    OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, slot, i));
    if ((in->dtype() != DataType::kInt32 && in->dtype() != DataType::kInt64) || (!is_whole && in->numel() != 1)) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), slot, i),
                                                     in->dims().ToString(), " is not ",
                                                     is_whole ? "a 1-D int tensor" : "one int value"));
    }
    Tensor host;
    OAR_ASSIGN_OR_RETURN(const Tensor* t, OnHost(*in, &host));
    for (int64_t k = 0; k < t->numel(); ++k) {
      v.push_back(t->dtype() == DataType::kInt32 ? t->data<int32_t>()[k] : t->data<int64_t>()[k]);
    }
  }
  if (v.size() != out->size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": ", slot, " gives ", v.size(), " values for ", out->size(), " axes"));
  }
  *out = std::move(v);
  return absl::OkStatus();
}

SliceBounds AttrBounds(const OpDesc& op) {
  const auto s = op.GetAttr<std::vector<int32_t>>("starts");
  const auto e = op.GetAttr<std::vector<int32_t>>("ends");
  return {{s.begin(), s.end()}, {e.begin(), e.end()}};
}

absl::StatusOr<SliceBounds> RuntimeBounds(const ExecutionContext& ctx) {
  SliceBounds b = AttrBounds(ctx.op());
  OAR_RETURN_IF_ERROR(TensorBounds(ctx, "Starts", &b.starts));
  OAR_RETURN_IF_ERROR(TensorBounds(ctx, "Ends", &b.ends));
  return b;
}

absl::StatusOr<SliceGeom> SliceGeometry(const OpDesc& op, const DDim& in, const SliceBounds& b) {
  const auto axes = op.GetAttr<std::vector<int32_t>>("axes");
  const std::vector<int64_t>& starts = b.starts;
  const std::vector<int64_t>& ends = b.ends;
  if (axes.size() != starts.size() || axes.size() != ends.size()) {
    return absl::InvalidArgumentError(absl::StrCat(op.type, ": axes [", absl::StrJoin(axes, ", "), "], starts [",
                                                   absl::StrJoin(starts, ", "), "] and ends [",
                                                   absl::StrJoin(ends, ", "), "] differ in length"));
  }
  SliceGeom g{in, in, in, std::vector<int64_t>(static_cast<size_t>(in.size()), 0)};
  for (size_t k = 0; k < axes.size(); ++k) {
    int axis = axes[k];
    if (axis < 0) axis += in.size();
    if (axis < 0 || axis >= in.size()) {
      return absl::InvalidArgumentError(absl::StrCat(op.type, ": axis ", axes[k], " is outside Input", in.ToString()));
    }
    const int64_t dim = in[axis];
    if (dim < 0) {
      g.out_kept[axis] = -1;
      continue;
    }
    int64_t s = starts[k], e = ends[k];  // Python's rules: negative from the end, clamped
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    s = std::clamp<int64_t>(s, 0, dim);
    e = std::clamp<int64_t>(e, 0, dim);
    g.start[static_cast<size_t>(axis)] = s;
    g.out_kept[axis] = std::max<int64_t>(e - s, 0);
  }
  std::vector<int64_t> out;
  const auto decrease = op.GetAttr<std::vector<int32_t>>("decrease_axis");
  for (int i = 0; i < in.size(); ++i) {
    const bool drop = std::find(decrease.begin(), decrease.end(), i) != decrease.end();
    if (drop && g.out_kept[i] != 1 && g.out_kept[i] != -1) {
      return absl::InvalidArgumentError(
          absl::StrCat(op.type, ": decrease_axis ", i, " keeps ", g.out_kept[i], " entries, not 1"));
    }
    if (!drop) out.push_back(g.out_kept[i]);
  }
  g.out = DDim(out);
  return g;
}

absl::Status SliceShape(InferShapeContext& ctx) {
  ctx.SetOutputDtype("Out", ctx.InputDtype("Input"));
  if (HasBoundTensors(ctx.op())) return absl::OkStatus();  // known when the kernel reads them
  OAR_ASSIGN_OR_RETURN(SliceGeom g, SliceGeometry(ctx.op(), ctx.InputDim("Input"), AttrBounds(ctx.op())));
  ctx.SetOutputDim("Out", g.out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("Input"));
  return absl::OkStatus();
}

// Copies between `big` (dims g.in) and `small` (dims g.out_kept) at g.start,
// whole innermost runs at a time; to_small: big -> small, else small -> big.
void SliceCopy(const SliceGeom& g, size_t elem, const char* big_src, char* big_dst, const char* small_src,
               char* small_dst, bool to_small) {
  const int r = g.in.size();
  int inner = r - 1;  // the trailing dimensions taken whole form one run
  while (inner > 0 && g.out_kept[inner] == g.in[inner]) --inner;
  const int64_t run = g.out_kept.Product(inner, r) * static_cast<int64_t>(elem);
  const int64_t outer = g.out_kept.Product(0, inner);
  std::vector<int64_t> idx(static_cast<size_t>(inner), 0);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t off = 0;  // the big tensor's offset, in elements, of this run
    for (int d = 0; d < r; ++d) {
      const int64_t i = d < inner ? idx[static_cast<size_t>(d)] + g.start[static_cast<size_t>(d)]
                                  : (d == inner ? g.start[static_cast<size_t>(d)] : 0);
      off = off * g.in[d] + i;
    }
    if (to_small) {
      std::memcpy(small_dst + o * run, big_src + off * static_cast<int64_t>(elem), static_cast<size_t>(run));
    } else {
      std::memcpy(big_dst + off * static_cast<int64_t>(elem), small_src + o * run, static_cast<size_t>(run));
    }
    for (int d = inner - 1; d >= 0; --d) {  // the next outer index
      if (++idx[static_cast<size_t>(d)] < g.out_kept[d]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

absl::Status SliceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(SliceBounds b, RuntimeBounds(ctx));
  OAR_ASSIGN_OR_RETURN(SliceGeom g, SliceGeometry(ctx.op(), in->dims(), b));
  Tensor* out = ctx.Output("Out");
  out->Resize(g.out);
  char* dst = static_cast<char*>(out->mutable_data(in->dtype()));
  if (g.out.numel() == 0) return absl::OkStatus();
  SliceCopy(g, SizeOf(in->dtype()), static_cast<const char*>(in->raw_data()), nullptr, nullptr, dst, true);
  return absl::OkStatus();
}

absl::Status SliceGradShape(InferShapeContext& ctx) {
  ctx.SetOutputDim(GradVarName("Input"), ctx.InputDim("Input"));
  ctx.SetOutputDtype(GradVarName("Input"), ctx.InputDtype("Input"));
  return absl::OkStatus();
}

absl::Status SliceGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dout, RequireInput(ctx, GradVarName("Out")));
  Tensor* din = ctx.Output(GradVarName("Input"));
  if (din == nullptr) return absl::OkStatus();
  OAR_ASSIGN_OR_RETURN(SliceBounds b, RuntimeBounds(ctx));
  OAR_ASSIGN_OR_RETURN(SliceGeom g, SliceGeometry(ctx.op(), in->dims(), b));
  if (dout->numel() != g.out.numel() || dout->dtype() != in->dtype()) {
    return absl::InvalidArgumentError(absl::StrCat("slice_grad: ", InputLabel(ctx.op(), GradVarName("Out")),
                                                   dout->dims().ToString(), " is not the slice's ", g.out.ToString()));
  }
  din->Resize(in->dims());
  char* dst = static_cast<char*>(din->mutable_data(in->dtype()));
  std::memset(dst, 0, din->nbytes());
  if (g.out.numel() == 0) return absl::OkStatus();
  SliceCopy(g, SizeOf(in->dtype()), nullptr, dst, static_cast<const char*>(dout->raw_data()), nullptr, false);
  return absl::OkStatus();
}

// ---- fill_any_like, fill_zeros_like ----

absl::Status FillLikeShape(InferShapeContext& ctx) {
  ctx.SetOutputDim("Out", ctx.InputDim("X"));
  const int32_t dtype = ctx.op().attrs.count("dtype") ? ctx.Attr<int32_t>("dtype") : -1;
  ctx.SetOutputDtype("Out", dtype < 0 ? ctx.InputDtype("X") : static_cast<DataType>(dtype));
  return absl::OkStatus();
}

template <typename T>
absl::Status FillLikeKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const T value = ctx.op().attrs.count("value") ? static_cast<T>(ctx.Attr<float>("value")) : T(0);
  T* out = ctx.Output("Out")->mutable_data<T>(x->dims());
  std::fill(out, out + x->numel(), value);
  return absl::OkStatus();
}

DataType FillLikeDtype(const ExecutionContext& ctx) {
  const int32_t dtype = ctx.op().attrs.count("dtype") ? ctx.Attr<int32_t>("dtype") : -1;
  return dtype < 0 ? InputDtypeOf(ctx, "X") : static_cast<DataType>(dtype);
}

}  // namespace

void RegisterSliceOps(OpRegistry* r) {
  r->Register("shape")
      .Input("Input", kReadAnywhere)
      .Output("Out")
      .Attr("use_mkldnn", false)
      .Attr("mkldnn_data_type", std::string("float32"))
      .SetInferShape(ShapeShape)
      .SetKernelDtype(+[](const ExecutionContext&) { return DataType::kInt32; })
      .Kernel<int32_t>(ShapeKernel);
  NumericCpuKernels(r->Register("range")
                        .Input("Start")
                        .Input("End")
                        .Input("Step")
                        .Output("Out")
                        .SetInferShape(RangeShape)
                        .SetKernelDtype(+[](const ExecutionContext& ctx) { return InputDtypeOf(ctx, "Start"); }),
                    RangeKernel<float>, RangeKernel<double>, RangeKernel<int32_t>, RangeKernel<int64_t>);
  auto slice_attrs = [](OpInfo& info) -> OpInfo& {
    for (const char* s : {"StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"}) {
      info.Input(s, kDispensable | kDuplicable | kReadAnywhere);
    }
    return info.Attr("axes", std::vector<int32_t>{})
        .Attr("starts", std::vector<int32_t>{})
        .Attr("ends", std::vector<int32_t>{})
        .Attr("decrease_axis", std::vector<int32_t>{})
        .Attr("infer_flags", std::vector<int32_t>{})
        .Attr("use_mkldnn", false)
        .Attr("mkldnn_data_type", std::string("float32"));
  };
  auto any = +[](const ExecutionContext& ctx) { return InputDtypeOf(ctx, "Input"); };
  NumericCpuKernels(
      slice_attrs(r->Register("slice").NotInPlace().Input("Input").Output("Out"))
          .SetInferShape(SliceShape)
          .SetKernelDtype(any)
          .SetGradMaker(GradOpMaker({"Input", "StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"}, {},
                                    {"Out"}, {"Input"})),
      SliceKernel, SliceKernel, SliceKernel, SliceKernel);
  NumericCpuKernels(slice_attrs(r->Register("slice_grad")
                                    .NotInPlace()
                                    .Input("Input")
                                    .Input(GradVarName("Out"))
                                    .Output(GradVarName("Input"), kDispensable))
                        .SetInferShape(SliceGradShape)
                        .SetKernelDtype(any),
                    SliceGradKernel, SliceGradKernel, SliceGradKernel, SliceGradKernel);
  for (const std::string type : {"fill_any_like", "fill_zeros_like"}) {
    auto& info = r->Register(type)
                     .Input("X", kReadAnywhere)
                     .Output("Out")
                     .SetInferShape(FillLikeShape)
                     .SetKernelDtype(FillLikeDtype);
    if (type == "fill_any_like") info.Attr("value", 0.0f).Attr("dtype", int32_t{-1});
    NumericCpuKernels(info, FillLikeKernel<float>, FillLikeKernel<double>, FillLikeKernel<int32_t>,
                      FillLikeKernel<int64_t>);
  }
}

}  // namespace oar
