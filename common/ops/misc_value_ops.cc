// Small ops of paddle.* and fluid.layers, with Paddle's slots: histogram,
// shard_index, equal_all, allclose (rtol/atol as Paddle writes them,
// strings), conj (of a real tensor: a copy), is_empty, diag_embed (into the
// last two axes), gather_tree (beam-search back-tracking), crop and
// crop_tensor (attribute shapes and offsets), cvm (show/click features,
// fluid.layers.continuous_value_model) and add_position_encoding, with the
// gradients Paddle has.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

absl::Status HistogramKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const int64_t bins = ctx.Attr<int64_t>("bins");
  double lo = ctx.Attr<int32_t>("min"), hi = ctx.Attr<int32_t>("max");
  std::vector<double> v(static_cast<size_t>(x->numel()));
  for (int64_t i = 0; i < x->numel(); ++i) {
    v[static_cast<size_t>(i)] = x->dtype() == DataType::kFloat32   ? x->data<float>()[i]
                                : x->dtype() == DataType::kFloat64 ? x->data<double>()[i]
                                : x->dtype() == DataType::kInt32   ? x->data<int32_t>()[i]
                                                                   : x->data<int64_t>()[i];
  }
  if (lo == 0 && hi == 0 && !v.empty())
    lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  if (lo == hi) lo -= 1, hi += 1;
  if (bins < 1) return absl::InvalidArgumentError("histogram: bins must be positive");
  int64_t* o = ctx.Output("Out")->mutable_data<int64_t>(DDim{bins});
  std::fill(o, o + bins, 0);
  for (double e : v) {
    if (e < lo || e > hi) continue;
    o[std::min<int64_t>(static_cast<int64_t>((e - lo) * static_cast<double>(bins) / (hi - lo)), bins - 1)]++;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ShardIndexKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const int64_t num = ctx.Attr<int32_t>("index_num"), shards = ctx.Attr<int32_t>("nshards");
  const int64_t id = ctx.Attr<int32_t>("shard_id"), ignore = ctx.Attr<int32_t>("ignore_value");
  if (shards < 1 || id < 0 || id >= shards)
    return absl::InvalidArgumentError("shard_index: shard_id outside [0, nshards)");
  const int64_t size = (num + shards - 1) / shards;
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  for (int64_t i = 0; i < x->numel(); ++i) {
    const int64_t v = x->data<T>()[i];
    if (v < 0 || v >= num)
      return absl::InvalidArgumentError(absl::StrCat("shard_index: ", v, " outside [0, index_num)"));
    o[i] = static_cast<T>(v / size == id ? v % size : ignore);
  }
  return absl::OkStatus();
}

std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DataType::kFloat32:
        v[static_cast<size_t>(i)] = t.data<float>()[i];
        break;
      case DataType::kFloat64:
        v[static_cast<size_t>(i)] = t.data<double>()[i];
        break;
      case DataType::kInt32:
        v[static_cast<size_t>(i)] = t.data<int32_t>()[i];
        break;
      case DataType::kInt64:
        v[static_cast<size_t>(i)] = static_cast<double>(t.data<int64_t>()[i]);
        break;
      case DataType::kBool:
        v[static_cast<size_t>(i)] = t.data<bool>()[i];
        break;
      default:
        break;
    }
  }
  return v;
}

absl::Status EqualAllKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  ctx.Output("Out")->mutable_data<bool>(DDim{})[0] = x->dims() == y->dims() && AsDoubles(*x) == AsDoubles(*y);
  return absl::OkStatus();
}

absl::Status AllcloseKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, "Other"));
  double rtol = 0, atol = 0;
  if (!absl::SimpleAtod(ctx.Attr<std::string>("rtol"), &rtol) ||
      !absl::SimpleAtod(ctx.Attr<std::string>("atol"), &atol)) {
    return absl::InvalidArgumentError("allclose: rtol and atol must be numbers");
  }
  if (a->numel() != b->numel()) return absl::UnimplementedError("allclose: Input and Other differ in shape");
  const bool nan_equal = ctx.Attr<bool>("equal_nan");
  const std::vector<double> x = AsDoubles(*a), y = AsDoubles(*b);
  bool all = true;
  for (size_t i = 0; i < x.size() && all; ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i]))
      all = nan_equal && std::isnan(x[i]) && std::isnan(y[i]);
    else
      all = std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]);
  }
  ctx.Output("Out")->mutable_data<bool>(DDim{})[0] = all;
  return absl::OkStatus();
}

template <typename T>
absl::Status ConjKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  std::copy_n(x->data<T>(), x->numel(), ctx.Output("Out")->mutable_data<T>(x->dims()));
  return absl::OkStatus();
}

absl::Status IsEmptyKernel(const ExecutionContext& ctx) {
  const Tensor* x = ctx.Input("X");
  ctx.Output("Out")->mutable_data<bool>(DDim{})[0] = x == nullptr || x->numel() == 0;
  return absl::OkStatus();
}

template <typename T>
absl::Status DiagEmbedKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Input"));
  const DDim& d = x->dims();
  const int r = d.size() + 1;
  const int d1 = ctx.Attr<int32_t>("dim1"), d2 = ctx.Attr<int32_t>("dim2");
  if ((d1 != -2 && d1 != r - 2) || (d2 != -1 && d2 != r - 1) || d.size() < 1) {
    return absl::UnimplementedError(
        absl::StrCat("diag_embed: dim1=", d1, ", dim2=", d2, " is not implemented (Oar implements the last two axes)"));
  }
  const int64_t off = ctx.Attr<int32_t>("offset"), n = d[d.size() - 1], m = n + std::abs(off);
  const int64_t batch = d.numel() / std::max<int64_t>(n, 1);
  std::vector<int64_t> od(d.begin(), d.end() - 1);
  od.push_back(m), od.push_back(m);
  T* o = ctx.Output("Out")->mutable_data<T>(DDim(od));
  std::fill(o, o + batch * m * m, T(0));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < n; ++i) {
      o[b * m * m + (i + std::max<int64_t>(0, -off)) * m + i + std::max<int64_t>(0, off)] = x->data<T>()[b * n + i];
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status GatherTreeKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* ids, RequireInput(ctx, "Ids"));
  OAR_ASSIGN_OR_RETURN(const Tensor* parents, RequireInput(ctx, "Parents"));
  const DDim& d = ids->dims();
  if (d.size() != 3 || parents->dims() != d) {
    return absl::InvalidArgumentError(absl::StrCat("gather_tree: Ids", d.ToString(), " and Parents",
                                                   parents->dims().ToString(),
                                                   " must be one [time, batch, beam] shape"));
  }
  const int64_t t_len = d[0], batch = d[1], beam = d[2];
  const T* ip = ids->data<T>();
  const T* pp = parents->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(d);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < beam; ++k) {
      int64_t parent = k;
      for (int64_t t = t_len - 1; t >= 0; --t) {
        const int64_t at = (t * batch + b) * beam + parent;
        o[(t * batch + b) * beam + k] = ip[at];
        parent = pp[at];
        if (parent < 0 || parent >= beam) return absl::InvalidArgumentError("gather_tree: a parent outside the beam");
      }
    }
  }
  return absl::OkStatus();
}

// ---- crop, crop_tensor: X[offsets : offsets + shape] ----

absl::StatusOr<std::pair<DDim, std::vector<int64_t>>> CropBox(const ExecutionContext& ctx, const DDim& x) {
  const auto shape = ctx.Attr<std::vector<int32_t>>("shape");
  const auto offsets = ctx.Attr<std::vector<int32_t>>("offsets");
  if (static_cast<int>(shape.size()) != x.size() || static_cast<int>(offsets.size()) != x.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": shape and offsets must give each dimension of X", x.ToString()));
  }
  DDim out = x;
  std::vector<int64_t> off;
  for (int d = 0; d < x.size(); ++d) {
    out[d] = shape[static_cast<size_t>(d)] < 0 ? x[d] - offsets[static_cast<size_t>(d)] : shape[static_cast<size_t>(d)];
    off.push_back(offsets[static_cast<size_t>(d)]);
    if (off.back() < 0 || off.back() + out[d] > x[d]) {
      return absl::InvalidArgumentError(
          absl::StrCat(ctx.op().type, ": the crop leaves X", x.ToString(), " in dimension ", d));
    }
  }
  return std::make_pair(out, off);
}

int64_t CropSource(const DDim& x, const DDim& out, const std::vector<int64_t>& off, int64_t o) {
  int64_t src = 0, stride = 1;
  for (int d = out.size() - 1; d >= 0; --d) {
    src += (o % out[d] + off[static_cast<size_t>(d)]) * stride;
    o /= out[d], stride *= x[d];
  }
  return src;
}

template <typename T, bool kGrad>
absl::Status CropKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const auto box, CropBox(ctx, x->dims()));
  const auto& [out, off] = box;
  if (!kGrad) {
    T* o = ctx.Output("Out")->mutable_data<T>(out);
    for (int64_t i = 0; i < out.numel(); ++i) o[i] = x->data<T>()[CropSource(x->dims(), out, off, i)];
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  T* d = ZeroedGradOutput<T>(ctx, "X", x->dims());
  if (d == nullptr) return absl::OkStatus();
  for (int64_t i = 0; i < out.numel(); ++i) d[CropSource(x->dims(), out, off, i)] = g->data<T>()[i];
  return absl::OkStatus();
}

// ---- cvm: the first two columns are show and click ----

template <typename T, bool kGrad>
absl::Status CvmKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* cvm, RequireInput(ctx, "CVM"));
  const int64_t n = x->dims()[0], w = x->numel() / std::max<int64_t>(n, 1);
  const bool use = ctx.Attr<bool>("use_cvm");
  if (w < 2 || cvm->numel() != 2 * n)
    return absl::InvalidArgumentError("cvm: X needs two leading columns and CVM [N, 2]");
  const T* xp = x->data<T>();
  if (!kGrad) {
    const int64_t ow = use ? w : w - 2;
    T* y = ctx.Output("Y")->mutable_data<T>(DDim{n, ow});
    for (int64_t i = 0; i < n; ++i) {
      const T* row = xp + i * w;
      T* out = y + i * ow;
      if (use) {
        out[0] = std::log(row[0] + T(1));
        out[1] = std::log(row[1] + T(1)) - out[0];
        std::copy(row + 2, row + w, out + 2);
      } else {
        std::copy(row + 2, row + w, out);
      }
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Y")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  T* d = dx->mutable_data<T>(x->dims());
  const int64_t gw = use ? w : w - 2;
  for (int64_t i = 0; i < n; ++i) {  // as Paddle: the show/click columns' gradient is CVM itself
    d[i * w] = cvm->data<T>()[2 * i], d[i * w + 1] = cvm->data<T>()[2 * i + 1];
    std::copy_n(g->data<T>() + i * gw + (use ? 2 : 0), w - 2, d + i * w + 2);
  }
  return absl::OkStatus();
}

// ---- add_position_encoding: alpha·X + beta·(sin | cos) of the position ----

template <typename T, bool kGrad>
absl::Status PositionEncodingKernel(const ExecutionContext& ctx) {
  const T alpha = static_cast<T>(ctx.Attr<float>("alpha")), beta = static_cast<T>(ctx.Attr<float>("beta"));
  if (kGrad) {
    OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
    Tensor* dx = ctx.Output(GradVarName("X"));
    if (dx == nullptr) return absl::OkStatus();
    T* d = dx->mutable_data<T>(g->dims());
    for (int64_t i = 0; i < g->numel(); ++i) d[i] = alpha * g->data<T>()[i];
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const DDim& dims = x->dims();
  if (dims.size() != 3 || dims[2] % 2 != 0) {
    return absl::UnimplementedError(absl::StrCat("add_position_encoding: X", dims.ToString(),
                                                 " (Oar implements [batch, length, even size] without LoD)"));
  }
  const int64_t len = dims[1], size = dims[2], half = size / 2;
  T* o = ctx.Output("Out")->mutable_data<T>(dims);
  for (int64_t b = 0; b < dims[0]; ++b) {
    for (int64_t j = 0; j < len; ++j) {
      for (int64_t k = 0; k < half; ++k) {
        const double v = half > 1 ? static_cast<double>(j) /
                                        std::pow(10000.0, static_cast<double>(k) / static_cast<double>(half - 1))
                                  : static_cast<double>(j) / 10000.0;
        const int64_t at = (b * len + j) * size;
        o[at + k] = x->data<T>()[at + k] * alpha + static_cast<T>(std::sin(v)) * beta;
        o[at + half + k] = x->data<T>()[at + half + k] * alpha + static_cast<T>(std::cos(v)) * beta;
      }
    }
  }
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)
#define OAR_FLOATS2(K, B) Kernel<float>(K<float, B>).Kernel<double>(K<double, B>)

}  // namespace

void RegisterMiscValueOps(OpRegistry* r) {
  auto x_dtype = +[](const ExecutionContext& c) { return InputDtypeOf(c, "X"); };
  r->Register("histogram")
      .Input("X")
      .Output("Out")
      .Attr("bins", int64_t{100})
      .Attr("min", int32_t{0})
      .Attr("max", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(HistogramKernel);
  r->Register("shard_index")
      .Input("X")
      .Output("Out")
      .Attr("index_num", int32_t{0})
      .Attr("nshards", int32_t{1})
      .Attr("shard_id", int32_t{0})
      .Attr("ignore_value", int32_t{-1})
      .SetInferShape(SameShapeAsX)
      .SetKernelDtype(x_dtype)
      .Kernel<int32_t>(ShardIndexKernel<int32_t>)
      .Kernel<int64_t>(ShardIndexKernel<int64_t>);
  r->Register("equal_all")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(EqualAllKernel);
  r->Register("allclose")
      .Input("Input")
      .Input("Other")
      .Input("Rtol", kUnimplemented)
      .Input("Atol", kUnimplemented)
      .Output("Out")
      .Attr("rtol", std::string("1e-05"))
      .Attr("atol", std::string("1e-08"))
      .Attr("equal_nan", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(AllcloseKernel);
  r->Register("conj")
      .Input("X")
      .Output("Out")
      .SetInferShape(SameShapeAsX)
      .SetKernelDtype(x_dtype)
      .SetGradMaker(+[](const OpDesc& fwd) {
        OpDesc g = MakeGradOp(fwd, "conj", {}, {}, {}, {});
        g.SetInput("X", {GradVarName(fwd.Output("Out")[0])});
        g.SetOutput("Out", {GradVarName(fwd.Input("X")[0])});
        return std::vector<OpDesc>{g};
      })
      .OAR_FLOATS(ConjKernel);
  r->Register("is_empty")
      .Input("X", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(IsEmptyKernel);
  r->Register("diag_embed")
      .Input("Input")
      .Output("Out")
      .Attr("offset", int32_t{0})
      .Attr("dim1", int32_t{-2})
      .Attr("dim2", int32_t{-1})
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(DiagEmbedKernel);
  r->Register("gather_tree")
      .Input("Ids")
      .Input("Parents")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(+[](const ExecutionContext& c) { return InputDtypeOf(c, "Ids"); })
      .Kernel<int32_t>(GatherTreeKernel<int32_t>)
      .Kernel<int64_t>(GatherTreeKernel<int64_t>);
  for (const std::string type : {"crop", "crop_tensor"}) {
    auto attrs = [&](OpInfo& i) -> OpInfo& {
      i.Attr("shape", std::vector<int32_t>{}).Attr("offsets", std::vector<int32_t>{}).Input("Offsets", kUnimplemented);
      return type == "crop" ? i.Input("Y", kUnimplemented)
                            : i.Input("Shape", kUnimplemented)
                                  .Input("ShapeTensor", kDuplicable | kUnimplemented)
                                  .Input("OffsetsTensor", kDuplicable | kUnimplemented);
    };
    attrs(r->Register(type).Input("X").Output("Out"))
        .SetInferShape(NoShapeInference)
        .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
        .OAR_FLOATS2(CropKernel, false);
    attrs(r->Register(type + "_grad").Input("X").Input(GradVarName("Out")).Output(GradVarName("X"), kDispensable))
        .SetInferShape(GradSameShapeAsX)
        .OAR_FLOATS2(CropKernel, true);
  }
  r->Register("cvm")
      .Input("X")
      .Input("CVM")
      .Output("Y")
      .Attr("use_cvm", true)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "CVM"}, {}, {"Y"}, {"X"}))
      .OAR_FLOATS2(CvmKernel, false);
  r->Register("cvm_grad")
      .Input("X")
      .Input("CVM")
      .Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("use_cvm", true)
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(CvmKernel, true);
  r->Register("add_position_encoding")
      .Input("X")
      .Output("Out")
      .Attr("alpha", 1.0f)
      .Attr("beta", 1.0f)
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(PositionEncodingKernel, false);
  r->Register("add_position_encoding_grad")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("alpha", 1.0f)
      .Attr("beta", 1.0f)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(PositionEncodingKernel, true);
}

#undef OAR_FLOATS
#undef OAR_FLOATS2

}  // namespace oar
