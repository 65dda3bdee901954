// sequence_pool over the last LoD level of X [total_rows, width...]: each
// sequence becomes one row — SUM, AVERAGE, SQRT (sum / √len), MAX (with
// MaxIndex for the gradient), FIRST, LAST; empty sequences give pad_value.
#include <cmath>
#include <limits>

#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/sequence_pool.h"

namespace oar {
namespace {

absl::Status SequencePoolInferShape(InferShapeContext& ctx) {
  OAR_RETURN_IF_ERROR(ParseSequencePool(ctx.Attr<std::string>("pooltype")).status());
  DDim x = ctx.InputDim("X");
  if (x.size() < 1) return ctx.Error("X must have rank >= 1");
  if (ctx.IsRuntime()) return absl::OkStatus();  // the kernel sizes Out from the LoD
  DDim out = x;
  out[0] = -1;  // one row per sequence
  ctx.SetOutputDim("Out", out);
  ctx.SetOutputDtype("Out", ctx.InputDtype("X"));
  ctx.SetOutputDim("MaxIndex", out);
  ctx.SetOutputDtype("MaxIndex", DataType::kInt32);
  return absl::OkStatus();
}

template <typename T>
absl::Status SequencePoolKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(SequencePool pool, ParseSequencePool(ctx.Attr<std::string>("pooltype")));
  OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, SequenceOffsets(ctx, *x));
  const int64_t seqs = static_cast<int64_t>(off.size()) - 1;
  const int64_t width = x->dims()[0] ? x->numel() / x->dims()[0] : x->dims().Product(1, x->dims().size());
  DDim od = x->dims();
  od[0] = seqs;
  Tensor* out = ctx.Output("Out");
  T* o = out->mutable_data<T>(od);
  LoD rest(x->lod().begin(), x->lod().end() - 1);
  out->set_lod(rest);
  int32_t* idx = nullptr;
  if (pool == SequencePool::kMax) {
    if (Tensor* mi = ctx.Output("MaxIndex")) idx = mi->mutable_data<int32_t>(od);
  }
  const T* xp = x->data<T>();
  const T pad = static_cast<T>(ctx.Attr<float>("pad_value"));
  for (int64_t s = 0; s < seqs; ++s) {
    const int64_t b = static_cast<int64_t>(off[s]), e = static_cast<int64_t>(off[s + 1]), len = e - b;
    T* row = o + s * width;
    for (int64_t k = 0; k < width; ++k) {
      if (len == 0) {
        row[k] = pad;
        if (idx) idx[s * width + k] = -1;
        continue;
      }
      switch (pool) {
        case SequencePool::kFirst:
          row[k] = xp[b * width + k];
          break;
        case SequencePool::kLast:
          row[k] = xp[(e - 1) * width + k];
          break;
        case SequencePool::kMax: {
          int64_t best = b;
          for (int64_t r = b + 1; r < e; ++r)
            if (xp[r * width + k] > xp[best * width + k]) best = r;
          row[k] = xp[best * width + k];
          if (idx) idx[s * width + k] = static_cast<int32_t>(best);
          break;
        }
        default: {
          T sum = 0;
          for (int64_t r = b; r < e; ++r) sum += xp[r * width + k];
          row[k] = pool == SequencePool::kSum       ? sum
                   : pool == SequencePool::kAverage ? sum / T(len)
                                                    : sum / std::sqrt(T(len));
        }
      }
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status SequencePoolGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  OAR_ASSIGN_OR_RETURN(SequencePool pool, ParseSequencePool(ctx.Attr<std::string>("pooltype")));
  OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, SequenceOffsets(ctx, *x));
  const Tensor* mi = pool == SequencePool::kMax ? ctx.Input("MaxIndex") : nullptr;
  if (pool == SequencePool::kMax && (mi == nullptr || !mi->initialized())) {
    return absl::InvalidArgumentError("sequence_pool_grad: MAX pooling needs MaxIndex");
  }
  // Out@GRAD (and MaxIndex) have one row per sequence.
  DDim od = x->dims();
  od[0] = static_cast<int64_t>(off.size()) - 1;
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, GradVarName("Out"), 0, *g));
  for (const auto& [slot, t] : {std::pair<std::string, const Tensor*>{GradVarName("Out"), g}, {"MaxIndex", mi}}) {
    if (t != nullptr && t->dims() != od) {
      return absl::InvalidArgumentError(absl::StrCat("sequence_pool_grad: input ", InputLabel(ctx.op(), slot),
                                                     " has shape ", t->dims().ToString(), ", expected ",
                                                     od.ToString()));
    }
  }
  if (mi != nullptr) OAR_RETURN_IF_ERROR(RequireInputDtype<int32_t>(ctx, "MaxIndex", 0, *mi));
  const int64_t width = x->dims()[0] ? x->numel() / x->dims()[0] : 0;
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  std::fill(d, d + dx->numel(), T(0));
  dx->set_lod(x->lod());
  for (size_t s = 0; s + 1 < off.size(); ++s) {
    const int64_t b = static_cast<int64_t>(off[s]), e = static_cast<int64_t>(off[s + 1]), len = e - b;
    if (len == 0) continue;
    for (int64_t k = 0; k < width; ++k) {
      const T gv = gp[s * width + k];
      switch (pool) {
        case SequencePool::kFirst:
          d[b * width + k] = gv;
          break;
        case SequencePool::kLast:
          d[(e - 1) * width + k] = gv;
          break;
        case SequencePool::kMax: {
          const int64_t r = mi->data<int32_t>()[s * width + k];  // a row of this sequence
          if (r < b || r >= e) {
            return absl::InvalidArgumentError(absl::StrCat("sequence_pool_grad: MaxIndex ", r, " at [", s, ", ", k,
                                                           "] is outside sequence ", s, "'s rows [", b, ", ", e, ")"));
          }
          d[r * width + k] = gv;
          break;
        }
        default: {
          const T share = pool == SequencePool::kSum       ? gv
                          : pool == SequencePool::kAverage ? gv / T(len)
                                                           : gv / std::sqrt(T(len));
          for (int64_t r = b; r < e; ++r) d[r * width + k] = share;
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SequencePool> ParseSequencePool(const std::string& s) {
  if (s == "SUM") return SequencePool::kSum;
  if (s == "AVERAGE") return SequencePool::kAverage;
  if (s == "SQRT") return SequencePool::kSqrt;
  if (s == "MAX") return SequencePool::kMax;
  if (s == "FIRST") return SequencePool::kFirst;
  if (s == "LAST") return SequencePool::kLast;
  return absl::InvalidArgumentError(
      absl::StrCat("sequence_pool: pooltype '", s, "' is not SUM, AVERAGE, SQRT, MAX, FIRST or LAST"));
}

absl::StatusOr<std::vector<size_t>> SequenceOffsets(const ExecutionContext& ctx, const Tensor& x) {
  if (x.lod().empty() || x.dims().size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": input X ('", ctx.op().Input("X")[0], "')", x.dims().ToString(), " has no LoD"));
  }
  const std::vector<size_t>& off = x.lod().back();
  if (off.empty() || off.front() != 0 || off.back() != static_cast<size_t>(x.dims()[0]) ||
      !std::is_sorted(off.begin(), off.end())) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": LoD of X ('", ctx.op().Input("X")[0],
                                                   "') does not partition its ", x.dims()[0], " rows"));
  }
  return off;
}

void RegisterSequenceOps(OpRegistry* r) {
  auto attrs = [](OpInfo& i) -> OpInfo& {
    return i.Attr("pooltype", std::string("AVERAGE")).Attr("is_test", false).Attr("pad_value", 0.0f);
  };
  attrs(r->Register("sequence_pool").NotInPlace().Input("X").Output("Out").Output("MaxIndex", kDispensable))
      .SetInferShape(SequencePoolInferShape)
      .SetGradMaker(GradOpMaker({"X"}, {"MaxIndex"}, {"Out"}, {"X"}))
      .Kernel<float>(SequencePoolKernel<float>)
      .Kernel<double>(SequencePoolKernel<double>);
  // The gradient reads X's shape and LoD alone: it need not move to a GPU.
  attrs(r->Register("sequence_pool_grad")
            .Input("X", kReadAnywhere)
            .Input("MaxIndex", kDispensable)
            .Input(GradVarName("Out"))
            .Output(GradVarName("X"), kDispensable))
      .SetInferShape(GradSameShapeAsX)
      .Kernel<float>(SequencePoolGradKernel<float>)
      .Kernel<double>(SequencePoolGradKernel<double>);
}

}  // namespace oar
