// warpctc and warpctc_grad: the CTC loss of Fluid's layers.warpctc and
// Paddle 2.x's nn.CTCLoss / F.ctc_loss, computed as Baidu's warp-ctc does —
// softmax over the classes of each frame, then the forward-backward sums
// over every alignment of the label with blanks between and repeats — here
// in log space, in double precision.
//
// Layouts, as Paddle reads them: with LoD, Logits [frames, classes] and
// Label [label tokens, 1] (int32), one sequence per LoD span; padded,
// Logits [max frames, batch, classes] with LogitsLength [batch] and Label
// [batch, max label] with LabelLength [batch] (int64). Loss is [batch, 1].
// WarpCTCGrad keeps d loss / d logits in the padded layout, [max frames,
// batch, classes]; warpctc_grad scales it by Loss@GRAD (and 1/frames with
// norm_by_times) into the Logits' own layout.
//
// Thread-safety: stateless kernels.
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/sequence_util.h"

namespace oar {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double LogAdd(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
}

// One sequence: `frames` rows of `classes` logits, `stride` elements apart.
// Writes d(-log p)/d logits into `grad` (rows packed) and returns -log p
// (+inf where no alignment fits the frames; the gradient is then zero).
template <typename T>
double SequenceCtc(const T* x, int64_t frames, int64_t classes, int64_t stride, const int32_t* label, int64_t len,
                   int32_t blank, T* grad) {
  std::vector<double> logp(static_cast<size_t>(frames * classes));
  for (int64_t t = 0; t < frames; ++t) {
    const T* row = x + t * stride;
    double mx = row[0];
    for (int64_t k = 1; k < classes; ++k) mx = std::max<double>(mx, row[k]);
    double sum = 0;
    for (int64_t k = 0; k < classes; ++k) sum += std::exp(row[k] - mx);
    const double lse = mx + std::log(sum);
    for (int64_t k = 0; k < classes; ++k) logp[t * classes + k] = row[k] - lse;
  }
  const int64_t states = 2 * len + 1;
  auto sym = [&](int64_t s) { return s % 2 == 0 ? blank : label[s / 2]; };
  auto skip_ok = [&](int64_t s) { return s >= 2 && sym(s) != blank && sym(s) != sym(s - 2); };
  std::vector<double> alpha(static_cast<size_t>(frames * states), kNegInf), beta(alpha.size(), kNegInf);
  for (int64_t s = 0; s < std::min<int64_t>(2, states); ++s) alpha[s] = logp[sym(s)];
  for (int64_t t = 1; t < frames; ++t) {
    for (int64_t s = 0; s < states; ++s) {
      double a = alpha[(t - 1) * states + s];
      if (s >= 1) a = LogAdd(a, alpha[(t - 1) * states + s - 1]);
      if (skip_ok(s)) a = LogAdd(a, alpha[(t - 1) * states + s - 2]);
      alpha[t * states + s] = a == kNegInf ? kNegInf : a + logp[t * classes + sym(s)];
    }
  }
  const int64_t last = (frames - 1) * states;
  for (int64_t s = std::max<int64_t>(0, states - 2); s < states; ++s)
    beta[last + s] = logp[(frames - 1) * classes + sym(s)];
  for (int64_t t = frames - 2; t >= 0; --t) {
    for (int64_t s = 0; s < states; ++s) {
      double b = beta[(t + 1) * states + s];
      if (s + 1 < states) b = LogAdd(b, beta[(t + 1) * states + s + 1]);
      if (s + 2 < states && sym(s + 2) != blank && sym(s + 2) != sym(s)) b = LogAdd(b, beta[(t + 1) * states + s + 2]);
      beta[t * states + s] = b == kNegInf ? kNegInf : b + logp[t * classes + sym(s)];
    }
  }
  double total = alpha[last + states - 1];
  if (states >= 2) total = LogAdd(total, alpha[last + states - 2]);
  if (total == kNegInf) {
    std::fill_n(grad, frames * classes, T(0));
    return std::numeric_limits<double>::infinity();
  }
  std::vector<double> occupied(static_cast<size_t>(classes));
  for (int64_t t = 0; t < frames; ++t) {
    std::fill(occupied.begin(), occupied.end(), kNegInf);
    for (int64_t s = 0; s < states; ++s) {
      const double ab = alpha[t * states + s] + beta[t * states + s];
      if (ab != kNegInf) occupied[sym(s)] = LogAdd(occupied[sym(s)], ab);
    }
    for (int64_t k = 0; k < classes; ++k) {
      const double lp = logp[t * classes + k];
      const double through = occupied[k] == kNegInf ? 0.0 : std::exp(occupied[k] - lp - total);
      grad[t * classes + k] = static_cast<T>(std::exp(lp) - through);
    }
  }
  return -total;
}

int64_t LengthAt(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kInt32 ? t.data<int32_t>()[i] : t.data<int64_t>()[i];
}

template <typename T>
absl::Status WarpCtcKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* logits, RequireInput(ctx, "Logits"));
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_RETURN_IF_ERROR(RequireDtype<int32_t>(ctx, "Label", *label));
  const int32_t blank = ctx.Attr<int32_t>("blank");
  const Tensor* logits_len = ctx.Input("LogitsLength");
  const bool padded = logits_len != nullptr && logits_len->initialized();
  int64_t batch, max_frames, classes;
  std::vector<int64_t> frame_begin, frames, label_begin, label_len;
  if (padded) {
    OAR_ASSIGN_OR_RETURN(const Tensor* label_len_t, RequireInput(ctx, "LabelLength"));
    if (logits->dims().size() != 3 || label->dims().size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat("warpctc: padded Logits", logits->dims().ToString(),
                                                     " must be [frames, batch, classes] and Label",
                                                     label->dims().ToString(), " [batch, labels]"));
    }
    max_frames = logits->dims()[0], batch = logits->dims()[1], classes = logits->dims()[2];
    for (int64_t b = 0; b < batch; ++b) {
      frames.push_back(LengthAt(*logits_len, b));
      label_len.push_back(LengthAt(*label_len_t, b));
      label_begin.push_back(b * label->dims()[1]);
      if (frames.back() < 0 || frames.back() > max_frames || label_len.back() < 0 ||
          label_len.back() > label->dims()[1]) {
        return absl::InvalidArgumentError(absl::StrCat("warpctc: sequence ", b, " has ", frames.back(), " frames and ",
                                                       label_len.back(), " labels, outside the padded shapes"));
      }
    }
  } else {
    OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, LastLevel(ctx, "Logits", *logits));
    OAR_ASSIGN_OR_RETURN(std::vector<size_t> loff, LastLevel(ctx, "Label", *label));
    if (off.size() != loff.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("warpctc: ", off.size() - 1, " logit sequences but ", loff.size() - 1, " label sequences"));
    }
    batch = static_cast<int64_t>(off.size()) - 1;
    classes = logits->dims()[1];
    max_frames = 0;
    for (int64_t b = 0; b < batch; ++b) {
      frame_begin.push_back(static_cast<int64_t>(off[b]));
      frames.push_back(static_cast<int64_t>(off[b + 1] - off[b]));
      label_begin.push_back(static_cast<int64_t>(loff[b]));
      label_len.push_back(static_cast<int64_t>(loff[b + 1] - loff[b]));
      max_frames = std::max(max_frames, frames.back());
    }
  }
  if (blank < 0 || blank >= classes) {
    return absl::InvalidArgumentError(absl::StrCat("warpctc: blank ", blank, " is not a class of ", classes));
  }
  const int32_t* lab = label->data<int32_t>();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < label_len[b]; ++i) {
      const int32_t v = lab[label_begin[b] + i];
      if (v < 0 || v >= classes) {
        return absl::InvalidArgumentError(
            absl::StrCat("warpctc: label ", v, " of sequence ", b, " is not a class in [0, ", classes, ")"));
      }
    }
  }
  T* loss = ctx.Output("Loss")->mutable_data<T>(DDim{batch, 1});
  Tensor* g = ctx.Output("WarpCTCGrad");
  Tensor scratch;
  if (g == nullptr) g = &scratch;
  T* grad = g->mutable_data<T>(DDim{max_frames, batch, classes});
  std::fill_n(grad, g->numel(), T(0));
  for (int64_t b = 0; b < batch; ++b) {
    // Padded: frame t of sequence b at (t * batch + b) * classes; LoD: row begin + t.
    const T* x = padded ? logits->data<T>() + b * classes : logits->data<T>() + frame_begin[b] * classes;
    const int64_t in_stride = padded ? batch * classes : classes;
    std::vector<T> seq_grad(static_cast<size_t>(std::max<int64_t>(frames[b], 1) * classes));
    const double l = frames[b] == 0 ? std::numeric_limits<double>::infinity()
                                    : SequenceCtc(x, frames[b], classes, in_stride, lab + label_begin[b], label_len[b],
                                                  blank, seq_grad.data());
    loss[b] = static_cast<T>(l);
    for (int64_t t = 0; t < frames[b]; ++t) {
      std::copy_n(seq_grad.data() + t * classes, classes, grad + (t * batch + b) * classes);
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status WarpCtcGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* logits, RequireInput(ctx, "Logits"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, "WarpCTCGrad"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dloss, RequireInput(ctx, GradVarName("Loss")));
  Tensor* dx_t = ctx.Output(GradVarName("Logits"));
  if (dx_t == nullptr) return absl::OkStatus();
  if (g->dims().size() != 3)
    return absl::InvalidArgumentError("warpctc_grad: WarpCTCGrad must be [frames, batch, classes]");
  const int64_t max_frames = g->dims()[0], batch = g->dims()[1], classes = g->dims()[2];
  if (dloss->numel() != batch)
    return absl::InvalidArgumentError("warpctc_grad: Loss@GRAD must hold one value per sequence");
  const bool norm = ctx.Attr<bool>("norm_by_times");
  T* dx = dx_t->mutable_data<T>(logits->dims());
  const T* gd = g->data<T>();
  const Tensor* logits_len = ctx.Input("LogitsLength");
  if (logits_len != nullptr && logits_len->initialized()) {
    if (logits->numel() != g->numel())
      return absl::InvalidArgumentError("warpctc_grad: Logits and WarpCTCGrad differ in size");
    for (int64_t t = 0; t < max_frames; ++t) {
      for (int64_t b = 0; b < batch; ++b) {
        T s = dloss->data<T>()[b];
        if (norm) s /= static_cast<T>(std::max<int64_t>(LengthAt(*logits_len, b), 1));
        for (int64_t k = 0; k < classes; ++k) {
          const int64_t i = (t * batch + b) * classes + k;
          dx[i] = gd[i] * s;
        }
      }
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, LastLevel(ctx, "Logits", *logits));
  for (int64_t b = 0; b + 1 < static_cast<int64_t>(off.size()) && b < batch; ++b) {
    const int64_t n = static_cast<int64_t>(off[b + 1] - off[b]);
    T s = dloss->data<T>()[b];
    if (norm) s /= static_cast<T>(std::max<int64_t>(n, 1));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t k = 0; k < classes; ++k) {
        dx[(static_cast<int64_t>(off[b]) + t) * classes + k] = gd[(t * batch + b) * classes + k] * s;
      }
    }
  }
  dx_t->set_lod(logits->lod());
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)

}  // namespace

void RegisterWarpCtcOps(OpRegistry* r) {
  r->Register("warpctc")
      .Input("Logits")
      .Input("Label")
      .Input("LogitsLength", kDispensable)
      .Input("LabelLength", kDispensable)
      .Output("Loss")
      .Output("WarpCTCGrad", kDispensable)
      .Attr("blank", int32_t{0})
      .Attr("norm_by_times", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(+[](const ExecutionContext& ctx) { return InputDtypeOf(ctx, "Logits"); })
      .SetGradMaker(GradOpMaker({"Logits", "LogitsLength"}, {"WarpCTCGrad"}, {"Loss"}, {"Logits"}))
      .OAR_FLOATS(WarpCtcKernel);
  r->Register("warpctc_grad")
      .Input("WarpCTCGrad")
      .Input("Logits")
      .Input(GradVarName("Loss"))
      .Input("LogitsLength", kDispensable)
      .Output(GradVarName("Logits"), kDispensable)
      .Attr("blank", int32_t{0})
      .Attr("norm_by_times", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(+[](const ExecutionContext& ctx) { return InputDtypeOf(ctx, "Logits"); })
      .OAR_FLOATS(WarpCtcGradKernel);
}

}  // namespace oar
