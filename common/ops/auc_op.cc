// auc: Fluid 1.x's streaming ROC AUC over thresholded histograms. Inputs:
// Predict [N, W] probabilities (the last column is the positive class's),
// Label [N, 1] int64 (non-zero is positive), StatPos / StatNeg int64 counts
// of positives / negatives per bucket (bucket = floor(p * num_thresholds),
// num_thresholds + 1 buckets). Outputs: AUC (float64 [1]) and the updated
// counts in StatPosOut / StatNegOut (in place when they are the same
// variables, as layers::auc makes them).
//  - slide_steps == 0: the counts accumulate over every batch (the global
//    AUC); StatPos holds one row of buckets.
//  - slide_steps = k > 0: StatPos holds k rows, one per recent batch; each
//    batch drops the oldest row and adds its own, and the AUC is over the
//    k rows' sum (the batch AUC over a sliding window).
// The area is summed by the trapezoid rule from the highest bucket down and
// divided by positives × negatives (0 when either is 0). Only curve "ROC" is
// implemented; another is an error, not a silent ROC.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

int64_t Rows(int32_t slide_steps) { return slide_steps > 0 ? slide_steps : 1; }

absl::Status AucInferShape(InferShapeContext& ctx) {
  const int32_t thresholds = ctx.Attr<int32_t>("num_thresholds");
  const int32_t slide = ctx.Attr<int32_t>("slide_steps");
  if (ctx.Attr<std::string>("curve") != "ROC") {
    return ctx.Error("curve '", ctx.Attr<std::string>("curve"), "' is not implemented (only ROC)");
  }
  if (thresholds < 1 || slide < 0) {
    return ctx.Error("num_thresholds=", thresholds, " must be >= 1 and slide_steps=", slide, " >= 0");
  }
  const DDim p = ctx.InputDim("Predict"), l = ctx.InputDim("Label");
  if (p.size() != 2 || l.size() != 2 || (p[0] >= 0 && l[0] >= 0 && p[0] != l[0])) {
    return ctx.Error("expects Predict [N, W] and Label [N, 1], got Predict", p.ToString(), " and Label", l.ToString());
  }
  for (const char* slot : {"StatPos", "StatNeg"}) {
    const DDim s = ctx.InputDim(slot);
    int64_t n = 1;
    for (size_t k = 0; k < s.size(); ++k) n *= s[k];
    if (n != Rows(slide) * (thresholds + 1)) {
      return ctx.Error(slot, s.ToString(), " must hold ", Rows(slide), " x ", thresholds + 1,
                       " buckets for num_thresholds=", thresholds, ", slide_steps=", slide);
    }
  }
  ctx.SetOutputDim("AUC", DDim{1});
  ctx.SetOutputDtype("AUC", DataType::kFloat64);
  ctx.SetOutputDim("StatPosOut", ctx.InputDim("StatPos"));
  ctx.SetOutputDim("StatNegOut", ctx.InputDim("StatNeg"));
  ctx.SetOutputDtype("StatPosOut", DataType::kInt64);
  ctx.SetOutputDtype("StatNegOut", DataType::kInt64);
  return absl::OkStatus();
}

double RocArea(const int64_t* pos, const int64_t* neg, int64_t buckets) {
  double area = 0, tp = 0, fp = 0;
  for (int64_t b = buckets - 1; b >= 0; --b) {
    const double tp0 = tp, fp0 = fp;
    tp += static_cast<double>(pos[b]);
    fp += static_cast<double>(neg[b]);
    area += (fp - fp0) * (tp + tp0) / 2.0;
  }
  return tp > 0 && fp > 0 ? area / tp / fp : 0.0;
}

// The counts as the op's output, starting from its input's values. In
// place (layers::auc's binding) the buffer is reused unless another owner
// shares it (a fetched value, a send in flight): then mutable_data gives a
// fresh one, and the counts so far are copied into it from the old buffer,
// which the executor keeps alive until the kernel returns.
absl::StatusOr<int64_t*> StatsOut(const ExecutionContext& ctx, const char* in, const char* out) {
  OAR_ASSIGN_OR_RETURN(const Tensor* src, RequireInput(ctx, in));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, in, *src));
  const int64_t* old = src->data<int64_t>();
  const size_t bytes = src->nbytes();
  // Counts in pinned memory would move to a plain host buffer, and nothing
  // else may hold the old one.
  std::shared_ptr<const void> keep = src->place().is_cpu() ? nullptr : src->KeepAlive();
  Tensor* dst = ctx.Output(out);
  int64_t* d = dst->mutable_data<int64_t>(src->dims());
  if (d != old) std::memcpy(d, old, bytes);
  return d;
}

template <typename T>
absl::Status AucKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* predict, RequireInput(ctx, "Predict"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, "Label", *label));
  const int64_t thresholds = ctx.Attr<int32_t>("num_thresholds"), buckets = thresholds + 1;
  const int32_t slide = ctx.Attr<int32_t>("slide_steps");
  OAR_ASSIGN_OR_RETURN(int64_t * pos, StatsOut(ctx, "StatPos", "StatPosOut"));
  OAR_ASSIGN_OR_RETURN(int64_t * neg, StatsOut(ctx, "StatNeg", "StatNegOut"));
  const int64_t n = predict->dims()[0], width = predict->dims()[1];
  if (label->numel() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("auc: Label has ", label->numel(), " values for ", n, " predictions"));
  }
  const T* p = predict->data<T>();
  const int64_t* l = label->data<int64_t>();
  int64_t* row_pos = pos;  // where this batch counts
  int64_t* row_neg = neg;
  if (slide > 0) {  // drop the oldest batch, count this one in the last row
    const size_t keep = static_cast<size_t>((slide - 1) * buckets) * sizeof(int64_t);
    std::memmove(pos, pos + buckets, keep);
    std::memmove(neg, neg + buckets, keep);
    row_pos = pos + (slide - 1) * buckets;
    row_neg = neg + (slide - 1) * buckets;
    std::memset(row_pos, 0, buckets * sizeof(int64_t));
    std::memset(row_neg, 0, buckets * sizeof(int64_t));
  }
  for (int64_t i = 0; i < n; ++i) {
    const T v = p[i * width + width - 1];
    if (!(v >= T(0) && v <= T(1))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "auc: Predict[", i, "][", width - 1, "] = ", static_cast<double>(v), " is not a probability in [0, 1]"));
    }
    const int64_t b = static_cast<int64_t>(static_cast<double>(v) * static_cast<double>(thresholds));
    (l[i] != 0 ? row_pos : row_neg)[b] += 1;
  }
  double* auc = ctx.Output("AUC")->mutable_data<double>();
  if (slide <= 1) {
    auc[0] = RocArea(pos, neg, buckets);
    return absl::OkStatus();
  }
  std::vector<int64_t> sum_pos(buckets, 0), sum_neg(buckets, 0);
  for (int32_t r = 0; r < slide; ++r) {
    for (int64_t b = 0; b < buckets; ++b) {
      sum_pos[b] += pos[r * buckets + b];
      sum_neg[b] += neg[r * buckets + b];
    }
  }
  auc[0] = RocArea(sum_pos.data(), sum_neg.data(), buckets);
  return absl::OkStatus();
}

}  // namespace

// Host-side: on a GPU place the kernel runs on the host, Predict and Label
// copied there ([batch, 2] and [batch, 1] a step); the histograms stay on
// the host between steps, where the metric is read.
void RegisterAucOp(OpRegistry* r) {
  r->Register("auc")
      .HostSide()
      .Input("Predict")
      .Input("Label")
      .Input("StatPos")
      .Input("StatNeg")
      .Output("AUC")
      .Output("StatPosOut")
      .Output("StatNegOut")
      .Attr("curve", std::string("ROC"))
      .Attr("num_thresholds", int32_t{4095})
      .Attr("slide_steps", int32_t{1})
      .SetInferShape(AucInferShape)
      .Kernel<float>(AucKernel<float>)
      .Kernel<double>(AucKernel<double>);
}

}  // namespace oar
