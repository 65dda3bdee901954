// LoD sequence ops that move rows, as Fluid 1.x wrote them, with their
// gradients: sequence_softmax (within each sequence), sequence_expand (each
// sequence of X — or row, without LoD — repeated as often as Y's sequences
// at ref_level say), sequence_expand_as (row i of X repeated over Y's i-th
// sequence), sequence_mask, sequence_pad / sequence_unpad, sequence_reverse
// and sequence_concat (the i-th sequences of each input joined).
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/sequence_util.h"

namespace oar {
namespace {

LoD Level(std::vector<size_t> off) { return LoD{std::move(off)}; }

// ---- sequence_softmax ----

template <typename T, bool kGrad>
absl::Status SequenceSoftmaxKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "X", *x));
  if (RowWidth(*x) != 1) return absl::InvalidArgumentError("sequence_softmax: X must have one value per row");
  if (!kGrad) {
    Tensor* out = ctx.Output("Out");
    T* o = out->mutable_data<T>(x->dims());
    for (size_t s = 0; s + 1 < off.size(); ++s) {
      T top = -std::numeric_limits<T>::infinity(), sum = 0;
      for (size_t i = off[s]; i < off[s + 1]; ++i) top = std::max(top, x->data<T>()[i]);
      for (size_t i = off[s]; i < off[s + 1]; ++i) sum += o[i] = std::exp(x->data<T>()[i] - top);
      for (size_t i = off[s]; i < off[s + 1]; ++i) o[i] /= sum;
    }
    out->set_lod(x->lod());
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* out, RequireInput(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  T* d = dx->mutable_data<T>(x->dims());
  for (size_t s = 0; s + 1 < off.size(); ++s) {
    T dot = 0;
    for (size_t i = off[s]; i < off[s + 1]; ++i) dot += out->data<T>()[i] * g->data<T>()[i];
    for (size_t i = off[s]; i < off[s + 1]; ++i) d[i] = out->data<T>()[i] * (g->data<T>()[i] - dot);
  }
  dx->set_lod(x->lod());
  return absl::OkStatus();
}

// ---- sequence_expand, sequence_expand_as: which X row each output row copies ----

absl::StatusOr<std::vector<int64_t>> ExpandRows(const ExecutionContext& ctx, const Tensor& x, const Tensor& y,
                                                LoD* out_lod) {
  const bool as = ctx.op().type.rfind("sequence_expand_as", 0) == 0;
  std::vector<size_t> yoff;
  if (as) {
    OAR_ASSIGN_OR_RETURN(yoff, LastLevel(ctx, "Y", y));
  } else {
    int level = ctx.Attr<int32_t>("ref_level");
    if (level == -1) level = static_cast<int>(y.lod().size()) - 1;
    if (level < 0 || level >= static_cast<int>(y.lod().size())) {
      return absl::InvalidArgumentError(absl::StrCat("sequence_expand: ref_level ", level, " outside Y's LoD"));
    }
    yoff = y.lod()[static_cast<size_t>(level)];
  }
  std::vector<size_t> xoff;
  if (!as && !x.lod().empty()) {
    xoff = x.lod().back();
  } else {
    for (int64_t i = 0; i <= x.dims()[0]; ++i) xoff.push_back(static_cast<size_t>(i));
  }
  if (yoff.size() != xoff.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": X has ", xoff.size() - 1, " sequences, Y ", yoff.size() - 1));
  }
  std::vector<int64_t> rows;
  std::vector<size_t> lod{0};
  for (size_t s = 0; s + 1 < xoff.size(); ++s) {
    const size_t repeat = as ? 1 : yoff[s + 1] - yoff[s];
    const size_t copies = as ? yoff[s + 1] - yoff[s] : 1;
    for (size_t k = 0; k < repeat; ++k) {
      for (size_t c = 0; c < copies; ++c) {
        for (size_t i = xoff[s]; i < xoff[s + 1]; ++i) rows.push_back(static_cast<int64_t>(i));
      }
      lod.push_back(rows.size());
    }
  }
  *out_lod = as ? y.lod() : Level(lod);
  return rows;
}

template <typename T, bool kGrad>
absl::Status SequenceExpandKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  LoD lod;
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> rows, ExpandRows(ctx, *x, *y, &lod));
  const int64_t w = RowWidth(*x);
  if (!kGrad) {
    DDim od = x->dims();
    od[0] = static_cast<int64_t>(rows.size());
    Tensor* out = ctx.Output("Out");
    T* o = out->mutable_data<T>(od);
    for (size_t r = 0; r < rows.size(); ++r) std::copy_n(x->data<T>() + rows[r] * w, w, o + r * w);
    out->set_lod(lod);
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  T* d = ZeroedGradOutput<T>(ctx, "X", x->dims());
  if (d == nullptr) return absl::OkStatus();
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int64_t k = 0; k < w; ++k) d[rows[r] * w + k] += g->data<T>()[r * w + k];
  }
  ctx.Output(GradVarName("X"))->set_lod(x->lod());
  return absl::OkStatus();
}

// ---- sequence_mask ----

template <typename T>
absl::Status SequenceMaskKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  std::vector<int64_t> len(static_cast<size_t>(x->numel()));
  for (int64_t i = 0; i < x->numel(); ++i) {
    len[static_cast<size_t>(i)] = x->dtype() == DataType::kInt32 ? x->data<int32_t>()[i] : x->data<int64_t>()[i];
  }
  int64_t maxlen = ctx.Attr<int32_t>("maxlen");
  if (maxlen < 0) maxlen = len.empty() ? 0 : *std::max_element(len.begin(), len.end());
  std::vector<int64_t> od(x->dims().begin(), x->dims().end());
  od.push_back(maxlen);
  Tensor* y = ctx.Output("Y");
  const DataType dt = static_cast<DataType>(ctx.Attr<int32_t>("out_dtype"));
  for (size_t i = 0; i < len.size(); ++i) {
    for (int64_t j = 0; j < maxlen; ++j) {
      const bool on = j < len[i];
      const int64_t at = static_cast<int64_t>(i) * maxlen + j;
      switch (dt) {
        case DataType::kFloat32:
          y->mutable_data<float>(DDim(od))[at] = on;
          break;
        case DataType::kFloat64:
          y->mutable_data<double>(DDim(od))[at] = on;
          break;
        case DataType::kInt32:
          y->mutable_data<int32_t>(DDim(od))[at] = on;
          break;
        case DataType::kInt64:
          y->mutable_data<int64_t>(DDim(od))[at] = on;
          break;
        case DataType::kBool:
          y->mutable_data<bool>(DDim(od))[at] = on;
          break;
        default:
          return absl::UnimplementedError("sequence_mask: out_dtype must be float32/64, int32/64 or bool");
      }
    }
  }
  if (len.empty() || maxlen == 0) y->mutable_data<float>(DDim(od));
  return absl::OkStatus();
}

// ---- sequence_pad, sequence_unpad ----

template <typename T, bool kGrad>
absl::Status SequencePadKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "X", *x));
  const int64_t seqs = static_cast<int64_t>(off.size()) - 1, w = RowWidth(*x);
  int64_t len = ctx.Attr<int32_t>("padded_length");
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t n = static_cast<int64_t>(off[s + 1] - off[s]);
    if (ctx.Attr<int32_t>("padded_length") < 0)
      len = std::max(len, n);
    else if (n > len)
      return absl::InvalidArgumentError(absl::StrCat("sequence_pad: sequence ", s, " is longer than padded_length"));
  }
  std::vector<int64_t> od = {seqs, len};
  for (int d = 1; d < x->dims().size(); ++d) od.push_back(x->dims()[d]);
  if (!kGrad) {
    OAR_ASSIGN_OR_RETURN(const Tensor* pad, RequireInput(ctx, "PadValue"));
    T* o = ctx.Output("Out")->mutable_data<T>(DDim(od));
    int64_t* lens = ctx.Output("Length") ? ctx.Output("Length")->mutable_data<int64_t>(DDim{seqs}) : nullptr;
    for (int64_t s = 0; s < seqs; ++s) {
      const int64_t n = static_cast<int64_t>(off[s + 1] - off[s]);
      if (lens) lens[s] = n;
      for (int64_t j = 0; j < len; ++j) {
        for (int64_t k = 0; k < w; ++k) {
          o[(s * len + j) * w + k] = j < n ? x->data<T>()[(static_cast<int64_t>(off[s]) + j) * w + k]
                                           : pad->data<T>()[pad->numel() == 1 ? 0 : k];
        }
      }
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t n = static_cast<int64_t>(off[s + 1] - off[s]);
    std::copy_n(g->data<T>() + s * len * w, n * w, d + static_cast<int64_t>(off[s]) * w);
  }
  dx->set_lod(x->lod());
  return absl::OkStatus();
}

template <typename T, bool kGrad>
absl::Status SequenceUnpadKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const DDim& d = x->dims();
  if (d.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat("sequence_unpad: X", d.ToString(), " is not [N, L, ...]"));
  const int64_t len = d[1], w = d.Product(2, d.size());
  std::vector<size_t> off{0};
  const Tensor* length = ctx.Input("Length");
  if (length == nullptr && kGrad) {  // Paddle's grad has no Length: Out@GRAD's sequences
    OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
    OAR_ASSIGN_OR_RETURN(off, LastLevel(ctx, GradVarName("Out"), *g));
  } else {
    OAR_ASSIGN_OR_RETURN(length, RequireInput(ctx, "Length"));
    for (int64_t s = 0; s < length->numel(); ++s) {
      const int64_t n = length->dtype() == DataType::kInt32 ? length->data<int32_t>()[s] : length->data<int64_t>()[s];
      off.push_back(off.back() + static_cast<size_t>(std::max<int64_t>(n, 0)));
    }
  }
  if (static_cast<int64_t>(off.size()) - 1 != d[0]) {
    return absl::InvalidArgumentError(absl::StrCat("sequence_unpad: ", off.size() - 1, " lengths for X", d.ToString()));
  }
  for (int64_t s = 0; s < d[0]; ++s) {
    if (off[s + 1] - off[s] > static_cast<size_t>(len)) {
      return absl::InvalidArgumentError(absl::StrCat("sequence_unpad: sequence ", s, " is longer than X's ", len));
    }
  }
  if (!kGrad) {
    std::vector<int64_t> od = {static_cast<int64_t>(off.back())};
    for (int k = 2; k < d.size(); ++k) od.push_back(d[k]);
    Tensor* out = ctx.Output("Out");
    T* o = out->mutable_data<T>(DDim(od));
    for (int64_t s = 0; s < d[0]; ++s)
      std::copy_n(x->data<T>() + s * len * w, (off[s + 1] - off[s]) * w, o + off[s] * w);
    out->set_lod(Level(off));
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  T* dp = ZeroedGradOutput<T>(ctx, "X", d);
  if (dp == nullptr) return absl::OkStatus();
  for (int64_t s = 0; s < d[0]; ++s)
    std::copy_n(g->data<T>() + off[s] * w, (off[s + 1] - off[s]) * w, dp + s * len * w);
  return absl::OkStatus();
}

// ---- sequence_reverse, sequence_concat ----

template <typename T>
absl::Status SequenceReverseKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "X", *x));
  const int64_t w = RowWidth(*x);
  Tensor* y = ctx.Output("Y");
  T* o = y->mutable_data<T>(x->dims());
  for (size_t s = 0; s + 1 < off.size(); ++s) {
    for (size_t i = off[s]; i < off[s + 1]; ++i)
      std::copy_n(x->data<T>() + (off[s + 1] - 1 - (i - off[s])) * w, w, o + i * w);
  }
  y->set_lod(x->lod());
  return absl::OkStatus();
}

template <typename T, bool kGrad>
absl::Status SequenceConcatKernel(const ExecutionContext& ctx) {
  const std::vector<const Tensor*> xs = ctx.MultiInput("X");
  std::vector<std::vector<size_t>> offs;
  for (const Tensor* x : xs) {
    if (x == nullptr) return absl::InvalidArgumentError("sequence_concat: an input is missing");
    OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, LastLevel(ctx, "X", *x));
    if (!offs.empty() && (off.size() != offs[0].size() || RowWidth(*x) != RowWidth(*xs[0]))) {
      return absl::InvalidArgumentError("sequence_concat: inputs differ in sequence count or row width");
    }
    offs.push_back(std::move(off));
  }
  if (xs.empty()) return absl::InvalidArgumentError("sequence_concat: no input");
  const int64_t w = RowWidth(*xs[0]);
  std::vector<size_t> out_off{0};
  int64_t rows = 0;
  for (size_t s = 0; s + 1 < offs[0].size(); ++s) {
    for (const auto& off : offs) rows += static_cast<int64_t>(off[s + 1] - off[s]);
    out_off.push_back(static_cast<size_t>(rows));
  }
  const Tensor* g = nullptr;
  T* o = nullptr;
  std::vector<Tensor*> dxs;
  if (!kGrad) {
    DDim od = xs[0]->dims();
    od[0] = rows;
    Tensor* out = ctx.Output("Out");
    o = out->mutable_data<T>(od);
    out->set_lod(Level(out_off));
  } else {
    OAR_ASSIGN_OR_RETURN(g, RequireInput(ctx, GradVarName("Out")));
    dxs = ctx.MultiOutput(GradVarName("X"));
  }
  int64_t at = 0;
  for (size_t s = 0; s + 1 < offs[0].size(); ++s) {
    for (size_t k = 0; k < xs.size(); ++k) {
      const int64_t n = static_cast<int64_t>(offs[k][s + 1] - offs[k][s]) * w,
                    from = static_cast<int64_t>(offs[k][s]) * w;
      if (!kGrad) {
        std::copy_n(xs[k]->data<T>() + from, n, o + at);
      } else if (k < dxs.size() && dxs[k] != nullptr) {
        std::copy_n(g->data<T>() + at, n, dxs[k]->mutable_data<T>(xs[k]->dims()) + from);
        dxs[k]->set_lod(xs[k]->lod());
      }
      at += n;
    }
  }
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)
#define OAR_FLOATS2(K, B) Kernel<float>(K<float, B>).Kernel<double>(K<double, B>)

}  // namespace

void RegisterSequenceShapeOps(OpRegistry* r) {
  r->Register("sequence_softmax")
      .Input("X")
      .Output("Out")
      .Attr("use_cudnn", false)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {"Out"}, {"Out"}, {"X"}))
      .OAR_FLOATS2(SequenceSoftmaxKernel, false);
  r->Register("sequence_softmax_grad")
      .Input("X")
      .Input("Out")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("use_cudnn", false)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(SequenceSoftmaxKernel, true);
  for (const std::string type : {"sequence_expand", "sequence_expand_as"}) {
    auto& f = r->Register(type)
                  .Input("X")
                  .Input("Y", kReadAnywhere)
                  .Output("Out")
                  .SetInferShape(NoShapeInference)
                  .SetGradMaker(GradOpMaker({"X", "Y"}, {}, {"Out"}, {"X"}))
                  .OAR_FLOATS2(SequenceExpandKernel, false);
    auto& g = r->Register(type + "_grad")
                  .Input("X")
                  .Input("Y", kReadAnywhere)
                  .Input(GradVarName("Out"))
                  .Output(GradVarName("X"), kDispensable)
                  .SetInferShape(NoShapeInference)
                  .OAR_FLOATS2(SequenceExpandKernel, true);
    if (type == "sequence_expand") f.Attr("ref_level", int32_t{-1}), g.Attr("ref_level", int32_t{-1});
  }
  r->Register("sequence_mask")
      .Input("X")
      .Input("MaxLenTensor", kUnimplemented)
      .Output("Y")
      .Attr("maxlen", int32_t{-1})
      .Attr("out_dtype", int32_t{3})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(SequenceMaskKernel<float>);
  r->Register("sequence_pad")
      .Input("X")
      .Input("PadValue")
      .Output("Out")
      .Output("Length", kDispensable)
      .Attr("padded_length", int32_t{-1})
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(SequencePadKernel, false);
  r->Register("sequence_pad_grad")
      .Input("X")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("padded_length", int32_t{-1})
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(SequencePadKernel, true);
  r->Register("sequence_unpad")
      .Input("X")
      .Input("Length", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Length"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(SequenceUnpadKernel, false);
  r->Register("sequence_unpad_grad")
      .Input("X")
      .Input("Length", kReadAnywhere | kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(SequenceUnpadKernel, true);
  r->Register("sequence_reverse")
      .Input("X")
      .Output("Y")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(+[](const OpDesc& fwd) {
        OpDesc g = MakeGradOp(fwd, "sequence_reverse", {}, {}, {}, {});
        g.SetInput("X", {GradVarName(fwd.Output("Y")[0])});
        g.SetOutput("Y", {GradVarName(fwd.Input("X")[0])});
        return std::vector<OpDesc>{g};
      })
      .OAR_FLOATS(SequenceReverseKernel)
      .Kernel<int64_t>(SequenceReverseKernel<int64_t>);
  r->Register("sequence_concat")
      .Input("X", kDuplicable)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(SequenceConcatKernel, false);
  r->Register("sequence_concat_grad")
      .Input("X", kDuplicable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDuplicable | kDispensable)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(SequenceConcatKernel, true);
}

#undef OAR_FLOATS
#undef OAR_FLOATS2

}  // namespace oar
