// LoD sequence ops over windows and slices, as Fluid 1.x wrote them, with
// gradients: sequence_conv (each row's context window [t + contextStart,
// + contextLength) within its sequence, zeros outside, times Filter, one
// GEMM), sequence_enumerate (each row's next win_size ids), sequence_reshape
// (rows re-cut to new_dim), sequence_scatter (X row i plus Updates at Ids
// of sequence i), sequence_slice (per sequence, Length rows from Offset)
// and lod_reset (X with target_lod, or Y's LoD, or that level appended).
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/blas.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/sequence_util.h"

namespace oar {
namespace {

// ---- sequence_conv ----

// For each row t and window slot j, the row it reads (−1: zero padding).
absl::StatusOr<std::vector<int64_t>> ContextRows(const ExecutionContext& ctx, const std::vector<size_t>& off) {
  const int64_t len = ctx.Attr<int32_t>("contextLength"), start = ctx.Attr<int32_t>("contextStart");
  if (ctx.Attr<int32_t>("contextStride") != 1 || ctx.Attr<bool>("paddingTrainable")) {
    return absl::UnimplementedError("sequence_conv: contextStride 1 without trainable padding is what Oar implements");
  }
  std::vector<int64_t> rows;
  for (size_t s = 0; s + 1 < off.size(); ++s) {
    for (int64_t t = static_cast<int64_t>(off[s]); t < static_cast<int64_t>(off[s + 1]); ++t) {
      for (int64_t j = 0; j < len; ++j) {
        const int64_t r = t + start + j;
        rows.push_back(r >= static_cast<int64_t>(off[s]) && r < static_cast<int64_t>(off[s + 1]) ? r : -1);
      }
    }
  }
  return rows;
}

template <bool kGrad>
absl::Status SequenceConvKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* filter, RequireInput(ctx, "Filter"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "X", *x));
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> rows, ContextRows(ctx, off));
  const int64_t t = x->dims()[0], d = RowWidth(*x), len = ctx.Attr<int32_t>("contextLength");
  const int64_t m = filter->dims()[filter->dims().size() - 1];
  if (filter->numel() != len * d * m) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence_conv: Filter", filter->dims().ToString(), " is not [", len * d, ", M]"));
  }
  std::vector<float> col(static_cast<size_t>(t * len * d), 0.f);
  for (int64_t i = 0; i < t * len; ++i) {
    if (rows[static_cast<size_t>(i)] >= 0)
      std::copy_n(x->data<float>() + rows[static_cast<size_t>(i)] * d, d, col.data() + i * d);
  }
  if (!kGrad) {
    Tensor* out = ctx.Output("Out");
    Gemm<float>(false, false, t, m, len * d, 1, col.data(), filter->data<float>(), 0,
                out->mutable_data<float>(DDim{t, m}));
    out->set_lod(x->lod());
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  if (Tensor* df = ctx.Output(GradVarName("Filter"))) {
    Gemm<float>(true, false, len * d, m, t, 1, col.data(), g->data<float>(), 0,
                df->mutable_data<float>(filter->dims()));
  }
  if (Tensor* dx = ctx.Output(GradVarName("X"))) {
    std::vector<float> dcol(col.size());
    Gemm<float>(false, true, t, len * d, m, 1, g->data<float>(), filter->data<float>(), 0, dcol.data());
    float* dp = dx->mutable_data<float>(x->dims());
    std::fill(dp, dp + dx->numel(), 0.f);
    for (int64_t i = 0; i < t * len; ++i) {
      const int64_t r = rows[static_cast<size_t>(i)];
      for (int64_t k = 0; r >= 0 && k < d; ++k) dp[r * d + k] += dcol[static_cast<size_t>(i * d + k)];
    }
    dx->set_lod(x->lod());
  }
  return absl::OkStatus();
}

// ---- sequence_enumerate ----

template <typename T>
absl::Status SequenceEnumerateKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "X", *x));
  const int64_t win = ctx.Attr<int32_t>("win_size");
  const T pad = static_cast<T>(ctx.Attr<int32_t>("pad_value"));
  if (RowWidth(*x) != 1 || win < 1)
    return absl::InvalidArgumentError("sequence_enumerate: X must be [T, 1], win_size ≥ 1");
  Tensor* out = ctx.Output("Out");
  T* o = out->mutable_data<T>(DDim{x->dims()[0], win});
  for (size_t s = 0; s + 1 < off.size(); ++s) {
    for (size_t t = off[s]; t < off[s + 1]; ++t) {
      for (int64_t j = 0; j < win; ++j) {
        o[static_cast<int64_t>(t) * win + j] = t + j < off[s + 1] ? x->data<T>()[t + j] : pad;
      }
    }
  }
  out->set_lod(x->lod());
  return absl::OkStatus();
}

// ---- sequence_reshape ----

template <typename T, bool kGrad>
absl::Status SequenceReshapeKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "X", *x));
  const int64_t d = RowWidth(*x), nd = ctx.Attr<int32_t>("new_dim");
  std::vector<size_t> noff;
  for (size_t o : off) {
    if ((static_cast<int64_t>(o) * d) % nd != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence_reshape: a sequence of X does not re-cut into rows of ", nd));
    }
    noff.push_back(static_cast<size_t>(static_cast<int64_t>(o) * d / nd));
  }
  if (!kGrad) {
    Tensor* out = ctx.Output("Out");
    std::copy_n(x->data<T>(), x->numel(), out->mutable_data<T>(DDim{x->numel() / nd, nd}));
    out->set_lod(LoD{noff});
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  std::copy_n(g->data<T>(), g->numel(), dx->mutable_data<T>(x->dims()));
  dx->set_lod(x->lod());
  return absl::OkStatus();
}

// ---- sequence_scatter ----

template <typename T, bool kGrad>
absl::Status SequenceScatterKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* ids, RequireInput(ctx, "Ids"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "Ids", *ids));
  const Tensor* x = kGrad ? nullptr : ctx.Input("X");
  const Tensor* g = kGrad ? ctx.Input(GradVarName("Out")) : nullptr;
  const Tensor* base = kGrad ? g : x;
  if (base == nullptr) return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": an input is missing"));
  const int64_t w = RowWidth(*base);
  if (static_cast<int64_t>(off.size()) - 1 != base->dims()[0]) {
    return absl::InvalidArgumentError("sequence_scatter: Ids must hold one sequence per row of X");
  }
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> idx, IndexValues(ctx, "Ids", w));
  if (!kGrad) {
    OAR_ASSIGN_OR_RETURN(const Tensor* upd, RequireInput(ctx, "Updates"));
    T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
    std::copy_n(x->data<T>(), x->numel(), o);
    for (size_t s = 0; s + 1 < off.size(); ++s) {
      for (size_t j = off[s]; j < off[s + 1]; ++j) o[static_cast<int64_t>(s) * w + idx[j]] += upd->data<T>()[j];
    }
    return absl::OkStatus();
  }
  if (Tensor* dx = ctx.Output(GradVarName("X"))) std::copy_n(g->data<T>(), g->numel(), dx->mutable_data<T>(g->dims()));
  if (Tensor* du = ctx.Output(GradVarName("Updates"))) {
    T* d = du->mutable_data<T>(DDim{static_cast<int64_t>(idx.size()), 1});
    for (size_t s = 0; s + 1 < off.size(); ++s) {
      for (size_t j = off[s]; j < off[s + 1]; ++j) d[j] = g->data<T>()[static_cast<int64_t>(s) * w + idx[j]];
    }
    du->set_lod(ids->lod());
  }
  return absl::OkStatus();
}

// ---- sequence_slice ----

template <typename T, bool kGrad>
absl::Status SequenceSliceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "X", *x));
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> start, IndexValues(ctx, "Offset", x->dims()[0] + 1));
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> count, IndexValues(ctx, "Length", x->dims()[0] + 1));
  const size_t seqs = off.size() - 1;
  if (start.size() != seqs || count.size() != seqs)
    return absl::InvalidArgumentError("sequence_slice: one Offset and Length per sequence");
  const int64_t w = RowWidth(*x);
  std::vector<size_t> out_off{0};
  for (size_t s = 0; s < seqs; ++s) {
    if (start[s] + count[s] > static_cast<int64_t>(off[s + 1] - off[s])) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence_slice: sequence ", s, " is shorter than Offset + Length"));
    }
    out_off.push_back(out_off.back() + static_cast<size_t>(count[s]));
  }
  if (!kGrad) {
    DDim od = x->dims();
    od[0] = static_cast<int64_t>(out_off.back());
    Tensor* out = ctx.Output("Out");
    T* o = out->mutable_data<T>(od);
    for (size_t s = 0; s < seqs; ++s)
      std::copy_n(x->data<T>() + (static_cast<int64_t>(off[s]) + start[s]) * w, count[s] * w, o + out_off[s] * w);
    out->set_lod(LoD{out_off});
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  T* d = ZeroedGradOutput<T>(ctx, "X", x->dims());
  if (d == nullptr) return absl::OkStatus();
  for (size_t s = 0; s < seqs; ++s)
    std::copy_n(g->data<T>() + out_off[s] * w, count[s] * w, d + (static_cast<int64_t>(off[s]) + start[s]) * w);
  ctx.Output(GradVarName("X"))->set_lod(x->lod());
  return absl::OkStatus();
}

// ---- lod_reset ----

template <typename T, bool kGrad>
absl::Status LodResetKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, kGrad ? GradVarName("Out") : "X"));
  Tensor* out = ctx.Output(kGrad ? GradVarName("X") : "Out");
  if (out == nullptr) return absl::OkStatus();
  std::copy_n(x->data<T>(), x->numel(), out->mutable_data<T>(x->dims()));
  if (kGrad) {
    if (const Tensor* orig = ctx.Input("X")) out->set_lod(orig->lod());
    return absl::OkStatus();
  }
  std::vector<size_t> level;
  if (const Tensor* y = ctx.Input("Y")) {
    if (!y->lod().empty()) {
      level = y->lod().back();
    } else {
      for (int64_t i = 0; i < y->numel(); ++i) level.push_back(static_cast<size_t>(y->data<int32_t>()[i]));
    }
  } else {
    for (int32_t v : ctx.Attr<std::vector<int32_t>>("target_lod")) level.push_back(static_cast<size_t>(v));
  }
  if (level.empty() || level.front() != 0 || level.back() != static_cast<size_t>(x->dims()[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat("lod_reset: the target LoD does not partition X's ", x->dims()[0], " rows"));
  }
  LoD lod = ctx.Attr<bool>("append") ? x->lod() : LoD{};
  lod.push_back(level);
  out->set_lod(lod);
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)
#define OAR_FLOATS2(K, B) Kernel<float>(K<float, B>).Kernel<double>(K<double, B>)

}  // namespace

void RegisterSequenceWindowOps(OpRegistry* r) {
  auto conv = [](OpInfo& i) -> OpInfo& {
    return i.Attr("contextLength", int32_t{3})
        .Attr("contextStart", int32_t{0})
        .Attr("contextStride", int32_t{1})
        .Attr("paddingTrainable", false)
        .Input("PaddingData", kDispensable | kUnimplemented);
  };
  conv(r->Register("sequence_conv").NotInPlace().Input("X").Input("Filter").Output("Out"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Filter"}, {}, {"Out"}, {"X", "Filter"}))
      .Kernel<float>(SequenceConvKernel<false>);
  conv(r->Register("sequence_conv_grad")
           .NotInPlace()
           .Input("X")
           .Input("Filter")
           .Input(GradVarName("Out"))
           .Output(GradVarName("X"), kDispensable)
           .Output(GradVarName("Filter"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(SequenceConvKernel<true>);
  r->Register("sequence_enumerate")
      .Input("X")
      .Output("Out")
      .Attr("win_size", int32_t{2})
      .Attr("pad_value", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(+[](const ExecutionContext& c) { return InputDtypeOf(c, "X"); })
      .Kernel<int32_t>(SequenceEnumerateKernel<int32_t>)
      .Kernel<int64_t>(SequenceEnumerateKernel<int64_t>);
  r->Register("sequence_reshape")
      .Input("X")
      .Output("Out")
      .Attr("new_dim", int32_t{1})
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(SequenceReshapeKernel, false);
  r->Register("sequence_reshape_grad")
      .Input("X")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("new_dim", int32_t{1})
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(SequenceReshapeKernel, true);
  r->Register("sequence_scatter")
      .NotInPlace()
      .Input("X")
      .Input("Ids", kReadAnywhere)
      .Input("Updates")
      .Output("Out")
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({"Ids", "Updates"}, {}, {"Out"}, {"X", "Updates"}))
      .OAR_FLOATS2(SequenceScatterKernel, false);
  r->Register("sequence_scatter_grad")
      .Input("Ids", kReadAnywhere)
      .Input("Updates", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Updates"), kDispensable)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(SequenceScatterKernel, true);
  r->Register("sequence_slice")
      .Input("X")
      .Input("Offset", kReadAnywhere)
      .Input("Length", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Offset", "Length"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(SequenceSliceKernel, false);
  r->Register("sequence_slice_grad")
      .Input("X")
      .Input("Offset", kReadAnywhere)
      .Input("Length", kReadAnywhere)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(SequenceSliceKernel, true);
  auto lod = [](OpInfo& i) -> OpInfo& { return i.Attr("target_lod", std::vector<int32_t>{}).Attr("append", false); };
  lod(r->Register("lod_reset").Input("X").Input("Y", kDispensable | kReadAnywhere).Output("Out"))
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({"X"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS2(LodResetKernel, false);
  lod(r->Register("lod_reset_grad")
          .Input("X", kDispensable)
          .Input(GradVarName("Out"))
          .Output(GradVarName("X"), kDispensable))
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(LodResetKernel, true);
}

#undef OAR_FLOATS
#undef OAR_FLOATS2

}  // namespace oar
