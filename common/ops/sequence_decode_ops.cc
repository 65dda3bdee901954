// What sequence models are scored and decoded with, as Fluid computes it:
// edit_distance (Levenshtein distance of each hypothesis to its reference,
// LoD or padded with HypsLength/RefsLength, optionally divided by the
// reference's length) and ctc_align (a CTC path to its labels: repeats
// merged, blanks dropped — what ctc_greedy_decoder ends with). Neither has
// a gradient.
//
// Thread-safety: stateless kernels.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/sequence_util.h"

namespace oar {
namespace {

// Offsets of each sequence of `slot`: from its LoD, or from the lengths in
// `length_slot` (padded rows of dims[1] each) where that is bound.
struct Spans {
  std::vector<size_t> begin, size;
};

absl::StatusOr<Spans> SequenceSpans(const ExecutionContext& ctx, const std::string& slot,
                                    const std::string& length_slot) {
  Spans s;
  const Tensor* len = ctx.Input(length_slot);
  if (len != nullptr && len->initialized()) {
    const Tensor* x = ctx.Input(slot);
    const int64_t width = x->dims().size() >= 2 ? x->dims()[1] : 1;
    for (int64_t i = 0; i < len->numel(); ++i) {
      const int64_t n = len->dtype() == DataType::kInt32 ? len->data<int32_t>()[i] : len->data<int64_t>()[i];
      if (n < 0 || n > width) {
        return absl::InvalidArgumentError(
            absl::StrCat(ctx.op().type, ": ", length_slot, "[", i, "] is ", n, ", outside [0, ", width, "]"));
      }
      s.begin.push_back(static_cast<size_t>(i * width));
      s.size.push_back(static_cast<size_t>(n));
    }
    return s;
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, slot));
  OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, LastLevel(ctx, slot, *x));
  for (size_t i = 0; i + 1 < off.size(); ++i) {
    s.begin.push_back(off[i]);
    s.size.push_back(off[i + 1] - off[i]);
  }
  return s;
}

int64_t Levenshtein(const int64_t* a, size_t m, const int64_t* b, size_t n) {
  if (m == 0) return static_cast<int64_t>(n);
  if (n == 0) return static_cast<int64_t>(m);
  std::vector<int64_t> prev(n + 1), cur(n + 1);
  for (size_t j = 0; j <= n; ++j) prev[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= m; ++i) {
    cur[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= n; ++j) {
      const int64_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[n];
}

absl::Status EditDistanceKernel(const ExecutionContext& ctx) {
  for (const char* slot : {"Hyps", "Refs"}) {
    OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, slot));
    OAR_RETURN_IF_ERROR(RequireDtype<int64_t>(ctx, slot, *t));
  }
  OAR_ASSIGN_OR_RETURN(Spans hyp, SequenceSpans(ctx, "Hyps", "HypsLength"));
  OAR_ASSIGN_OR_RETURN(Spans ref, SequenceSpans(ctx, "Refs", "RefsLength"));
  if (hyp.size.size() != ref.size.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("edit_distance: ", hyp.size.size(), " hypotheses but ", ref.size.size(), " references"));
  }
  const bool normalized = ctx.Attr<bool>("normalized");
  const int64_t n = static_cast<int64_t>(hyp.size.size());
  float* out = ctx.Output("Out")->mutable_data<float>(DDim{n, 1});
  const int64_t* h = ctx.Input("Hyps")->data<int64_t>();
  const int64_t* r = ctx.Input("Refs")->data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const size_t m = hyp.size[i], k = ref.size[i];
    float d = static_cast<float>(Levenshtein(h + hyp.begin[i], m, r + ref.begin[i], k));
    if (normalized) {
      if (k == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("edit_distance: reference ", i, " is empty, which normalized=true cannot divide by"));
      }
      d /= static_cast<float>(k);
    }
    out[i] = d;
  }
  if (Tensor* num = ctx.Output("SequenceNum")) num->mutable_data<int64_t>(DDim{1})[0] = n;
  return absl::OkStatus();
}

template <typename T>
absl::Status CtcAlignKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  const T blank = static_cast<T>(ctx.Attr<int32_t>("blank"));
  const bool merge = ctx.Attr<bool>("merge_repeated");
  const T* x = in->data<T>();
  Tensor* out = ctx.Output("Output");
  auto keep = [&](T token, T prev) { return token != blank && !(merge && token == prev); };
  if (in->lod().empty()) {  // padded: [batch, time] with InputLength
    OAR_ASSIGN_OR_RETURN(const Tensor* len, RequireInput(ctx, "InputLength"));
    const int64_t batch = in->dims()[0], time = in->dims().size() > 1 ? in->dims()[1] : 1;
    T* o = out->mutable_data<T>(in->dims());
    Tensor* out_len = ctx.Output("OutputLength");
    T* ol = out_len != nullptr ? out_len->mutable_data<T>(DDim{batch, 1}) : nullptr;
    const T pad = static_cast<T>(ctx.Attr<int32_t>("padding_value"));
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t n = std::min<int64_t>(static_cast<int64_t>(len->data<T>()[b]), time);
      int64_t w = 0;
      T prev = T(-1);
      for (int64_t t = 0; t < n; ++t) {
        const T token = x[b * time + t];
        if (keep(token, prev)) o[b * time + w++] = token;
        prev = token;
      }
      if (ol != nullptr) ol[b] = static_cast<T>(w);
      for (int64_t t = w; t < time; ++t) o[b * time + t] = pad;
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, LastLevel(ctx, "Input", *in));
  std::vector<T> kept;
  std::vector<size_t> lod{0};
  for (size_t s = 0; s + 1 < off.size(); ++s) {
    T prev = T(-1);
    for (size_t i = off[s]; i < off[s + 1]; ++i) {
      if (keep(x[i], prev)) kept.push_back(x[i]);
      prev = x[i];
    }
    lod.push_back(kept.size());
  }
  if (kept.empty()) {  // Fluid's marker for "nothing decoded": one -1
    out->mutable_data<T>(DDim{1, 1})[0] = T(-1);
  } else {
    std::copy(kept.begin(), kept.end(), out->mutable_data<T>(DDim{static_cast<int64_t>(kept.size()), 1}));
  }
  out->set_lod({lod});
  return absl::OkStatus();
}

}  // namespace

void RegisterSequenceDecodeOps(OpRegistry* r) {
  r->Register("edit_distance")
      .Input("Hyps")
      .Input("Refs")
      .Input("HypsLength", kDispensable)
      .Input("RefsLength", kDispensable)
      .Output("Out")
      .Output("SequenceNum")
      .Attr("normalized", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(+[](const ExecutionContext&) { return DataType::kInt64; })
      .Kernel<int64_t>(EditDistanceKernel);
  r->Register("ctc_align")
      .Input("Input")
      .Input("InputLength", kDispensable)
      .Output("Output")
      .Output("OutputLength", kDispensable)
      .Attr("blank", int32_t{0})
      .Attr("merge_repeated", true)
      .Attr("padding_value", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(+[](const ExecutionContext& ctx) { return InputDtypeOf(ctx, "Input"); })
      .Kernel<int32_t>(CtcAlignKernel<int32_t>)
      .Kernel<int64_t>(CtcAlignKernel<int64_t>);
}

}  // namespace oar
