// Losses of Fluid's layers and paddle.nn.functional, forward and gradient,
// with Paddle's slots, attributes and numerics: kldiv_loss (reduction none,
// sum, mean, batchmean), bce_loss (logs floored at -100), nll_loss ([N, C]
// with optional Weight and ignore_index), log_loss, huber_loss (also
// smooth_l1_loss's op), bpr_loss and rank_loss.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

template <typename T>
T Sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

absl::Status SameShape(const ExecutionContext& ctx, const Tensor& a, const char* as, const Tensor& b, const char* bs) {
  if (a.numel() == b.numel()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), as), a.dims().ToString(),
                                                 " and ", InputLabel(ctx.op(), bs), b.dims().ToString(), " differ"));
}

// ---- kldiv_loss: target · (log target − x), 0 where target ≤ 0 ----

// The divisor of a reduction: 1 (none, sum), the element count (mean), the
// batch (batchmean).
double KlDivisor(const std::string& reduction, const DDim& x) {
  if (reduction == "mean") return static_cast<double>(x.numel());
  if (reduction == "batchmean") return x.size() > 0 ? static_cast<double>(x[0]) : 1.0;
  return 1.0;
}

template <typename T>
absl::Status KlDivKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, "Target"));
  OAR_RETURN_IF_ERROR(SameShape(ctx, *x, "X", *t, "Target"));
  const std::string reduction = ctx.Attr<std::string>("reduction");
  const T* xp = x->data<T>();
  const T* tp = t->data<T>();
  if (reduction == "none") {
    T* o = ctx.Output("Loss")->mutable_data<T>(x->dims());
    for (int64_t i = 0, n = x->numel(); i < n; ++i) o[i] = tp[i] > T(0) ? tp[i] * (std::log(tp[i]) - xp[i]) : T(0);
    return absl::OkStatus();
  }
  double sum = 0;
  for (int64_t i = 0, n = x->numel(); i < n; ++i) sum += tp[i] > T(0) ? tp[i] * (std::log(tp[i]) - xp[i]) : T(0);
  ctx.Output("Loss")->mutable_data<T>(DDim{})[0] = static_cast<T>(sum / KlDivisor(reduction, x->dims()));
  return absl::OkStatus();
}

template <typename T>
absl::Status KlDivGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, "Target"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Loss")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const std::string reduction = ctx.Attr<std::string>("reduction");
  const T scale = static_cast<T>(1.0 / KlDivisor(reduction, x->dims()));
  const T* tp = t->data<T>();
  const T* gp = g->data<T>();
  const bool each = g->numel() == x->numel() && reduction == "none";
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t i = 0, n = x->numel(); i < n; ++i) d[i] = tp[i] > T(0) ? -tp[i] * gp[each ? i : 0] * scale : T(0);
  return absl::OkStatus();
}

// ---- bce_loss ----

template <typename T>
absl::Status BceKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* l, RequireInput(ctx, "Label"));
  OAR_RETURN_IF_ERROR(SameShape(ctx, *x, "X", *l, "Label"));
  const T* xp = x->data<T>();
  const T* lp = l->data<T>();
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  for (int64_t i = 0, n = x->numel(); i < n; ++i) {
    const T a = std::max(std::log(xp[i]), T(-100)), b = std::max(std::log(T(1) - xp[i]), T(-100));
    o[i] = -(lp[i] * a + (T(1) - lp[i]) * b);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status BceGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* l, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T* xp = x->data<T>();
  const T* lp = l->data<T>();
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t i = 0, n = x->numel(); i < n; ++i) {
    d[i] = gp[i] * (xp[i] - lp[i]) / std::max((T(1) - xp[i]) * xp[i], T(1e-12));
  }
  return absl::OkStatus();
}

// ---- nll_loss: X [N, C] of log-probabilities, Label [N] ----

template <typename T, bool kGrad>
absl::Status NllKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  if (x->dims().size() != 2) {
    return absl::UnimplementedError(
        absl::StrCat("nll_loss: X", x->dims().ToString(), " is not implemented (Oar implements X of [N, C])"));
  }
  const int64_t n = x->dims()[0], c = x->dims()[1];
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  if (label->numel() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("nll_loss: Label", label->dims().ToString(), " for X", x->dims().ToString()));
  }
  const int64_t ignore = ctx.Attr<int64_t>("ignore_index");
  const std::string reduction = ctx.Attr<std::string>("reduction");
  const Tensor* w = ctx.Input("Weight");
  const T* xp = x->data<T>();
  std::vector<int64_t> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    labels[static_cast<size_t>(i)] =
        label->dtype() == DataType::kInt32 ? label->data<int32_t>()[i] : label->data<int64_t>()[i];
    const int64_t l = labels[static_cast<size_t>(i)];
    if (l != ignore && (l < 0 || l >= c)) {
      return absl::InvalidArgumentError(absl::StrCat("nll_loss: label ", l, " of row ", i, " outside [0, ", c, ")"));
    }
  }
  auto weight = [&](int64_t l) { return w ? w->data<T>()[l] : T(1); };
  T total = 0;
  for (int64_t l : labels) total += l == ignore ? T(0) : weight(l);
  if (!kGrad) {
    T* o = ctx.Output("Out")->mutable_data<T>(reduction == "none" ? DDim{n} : DDim{});
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t l = labels[static_cast<size_t>(i)];
      const T v = l == ignore ? T(0) : -xp[i * c + l] * weight(l);
      if (reduction == "none") o[i] = v;
      sum += v;
    }
    if (reduction == "sum") o[0] = sum;
    if (reduction == "mean") o[0] = total > T(0) ? sum / total : T(0);
    if (Tensor* tw = ctx.Output("Total_weight")) tw->mutable_data<T>(DDim{})[0] = total;
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  T* d = ZeroedGradOutput<T>(ctx, "X", x->dims());
  if (d == nullptr) return absl::OkStatus();
  const T* gp = g->data<T>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = labels[static_cast<size_t>(i)];
    if (l == ignore) continue;
    const T gi = reduction == "none" ? gp[i] : (reduction == "mean" && total > T(0) ? gp[0] / total : gp[0]);
    d[i * c + l] = -weight(l) * gi;
  }
  return absl::OkStatus();
}

// ---- log_loss ----

template <typename T, bool kGrad>
absl::Status LogLossKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* p, RequireInput(ctx, "Predicted"));
  OAR_ASSIGN_OR_RETURN(const Tensor* l, RequireInput(ctx, "Labels"));
  OAR_RETURN_IF_ERROR(SameShape(ctx, *p, "Predicted", *l, "Labels"));
  const T eps = static_cast<T>(ctx.Attr<float>("epsilon"));
  const T* pp = p->data<T>();
  const T* lp = l->data<T>();
  if (!kGrad) {
    T* o = ctx.Output("Loss")->mutable_data<T>(p->dims());
    for (int64_t i = 0, n = p->numel(); i < n; ++i) {
      o[i] = -lp[i] * std::log(pp[i] + eps) - (T(1) - lp[i]) * std::log(T(1) - pp[i] + eps);
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Loss")));
  Tensor* dp = ctx.Output(GradVarName("Predicted"));
  if (dp == nullptr) return absl::OkStatus();
  const T* gp = g->data<T>();
  T* d = dp->mutable_data<T>(p->dims());
  for (int64_t i = 0, n = p->numel(); i < n; ++i) {
    d[i] = gp[i] * (-lp[i] / (pp[i] + eps) + (T(1) - lp[i]) / (T(1) - pp[i] + eps));
  }
  return absl::OkStatus();
}

// ---- huber_loss: Residual = Y − X ----

template <typename T>
absl::Status HuberKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, "Y"));
  OAR_RETURN_IF_ERROR(SameShape(ctx, *x, "X", *y, "Y"));
  const T delta = static_cast<T>(ctx.Attr<float>("delta"));
  const T* xp = x->data<T>();
  const T* yp = y->data<T>();
  T* r = ctx.Output("Residual")->mutable_data<T>(x->dims());
  T* o = ctx.Output("Out")->mutable_data<T>(x->dims());
  for (int64_t i = 0, n = x->numel(); i < n; ++i) {
    r[i] = yp[i] - xp[i];
    const T a = std::abs(r[i]);
    o[i] = a <= delta ? T(0.5) * r[i] * r[i] : delta * (a - T(0.5) * delta);
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status HuberGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, "Residual"));
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const T delta = static_cast<T>(ctx.Attr<float>("delta"));
  const T* rp = r->data<T>();
  const T* gp = g->data<T>();
  Tensor* dx = ctx.Output(GradVarName("X"));
  Tensor* dy = ctx.Output(GradVarName("Y"));
  T* dxp = dx ? dx->mutable_data<T>(r->dims()) : nullptr;
  T* dyp = dy ? dy->mutable_data<T>(r->dims()) : nullptr;
  for (int64_t i = 0, n = r->numel(); i < n; ++i) {
    const T v = gp[i] * (std::abs(rp[i]) <= delta ? rp[i] : (rp[i] > T(0) ? delta : -delta));
    if (dxp) dxp[i] = -v;
    if (dyp) dyp[i] = v;
  }
  return absl::OkStatus();
}

// ---- bpr_loss: Y_i = mean over j ≠ label of log(1 + e^(x_j − x_label)) ----

template <typename T, bool kGrad>
absl::Status BprKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const std::vector<int64_t> labels, IndexValues(ctx, "Label", x->dims()[x->dims().size() - 1]));
  const int64_t c = x->dims()[x->dims().size() - 1], n = c ? x->numel() / c : 0;
  if (static_cast<int64_t>(labels.size()) != n || c < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("bpr_loss: Label of ", labels.size(), " for X", x->dims().ToString()));
  }
  const T* xp = x->data<T>();
  const T k = T(1) / T(c - 1);
  if (!kGrad) {
    T* y = ctx.Output("Y")->mutable_data<T>(DDim{n, 1});
    for (int64_t i = 0; i < n; ++i) {
      const int64_t l = labels[static_cast<size_t>(i)];
      T s = 0;
      for (int64_t j = 0; j < c; ++j) {
        if (j != l) s += std::log1p(std::exp(xp[i * c + j] - xp[i * c + l]));
      }
      y[i] = s * k;
    }
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Y")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const T* gp = g->data<T>();
  T* d = dx->mutable_data<T>(x->dims());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t l = labels[static_cast<size_t>(i)];
    T at_label = 0;
    for (int64_t j = 0; j < c; ++j) {
      if (j == l) continue;
      const T s = Sigmoid(xp[i * c + j] - xp[i * c + l]) * k * gp[i];
      d[i * c + j] = s;
      at_label -= s;
    }
    d[i * c + l] = at_label;
  }
  return absl::OkStatus();
}

// ---- rank_loss: log(1 + e^(left − right)) − label · (left − right) ----

template <typename T, bool kGrad>
absl::Status RankKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* label, RequireInput(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const Tensor* left, RequireInput(ctx, "Left"));
  OAR_ASSIGN_OR_RETURN(const Tensor* right, RequireInput(ctx, "Right"));
  OAR_RETURN_IF_ERROR(SameShape(ctx, *left, "Left", *right, "Right"));
  OAR_RETURN_IF_ERROR(SameShape(ctx, *left, "Left", *label, "Label"));
  const T* lp = label->data<T>();
  const T* a = left->data<T>();
  const T* b = right->data<T>();
  if (!kGrad) {
    T* o = ctx.Output("Out")->mutable_data<T>(left->dims());
    for (int64_t i = 0, n = left->numel(); i < n; ++i) o[i] = std::log1p(std::exp(a[i] - b[i])) - lp[i] * (a[i] - b[i]);
    return absl::OkStatus();
  }
  OAR_ASSIGN_OR_RETURN(const Tensor* g, RequireInput(ctx, GradVarName("Out")));
  const T* gp = g->data<T>();
  Tensor* dl = ctx.Output(GradVarName("Left"));
  Tensor* dr = ctx.Output(GradVarName("Right"));
  T* dlp = dl ? dl->mutable_data<T>(left->dims()) : nullptr;
  T* drp = dr ? dr->mutable_data<T>(left->dims()) : nullptr;
  for (int64_t i = 0, n = left->numel(); i < n; ++i) {
    const T v = gp[i] * (Sigmoid(a[i] - b[i]) - lp[i]);
    if (dlp) dlp[i] = v;
    if (drp) drp[i] = -v;
  }
  return absl::OkStatus();
}

#define OAR_FLOATS(K) Kernel<float>(K<float>).Kernel<double>(K<double>)
#define OAR_FLOATS2(K, B) Kernel<float>(K<float, B>).Kernel<double>(K<double, B>)

}  // namespace

void RegisterLossMoreOps(OpRegistry* r) {
  r->Register("kldiv_loss")
      .Input("X")
      .Input("Target")
      .Output("Loss")
      .Attr("reduction", std::string("mean"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Target"}, {}, {"Loss"}, {"X"}))
      .OAR_FLOATS(KlDivKernel);
  r->Register("kldiv_loss_grad")
      .Input("X")
      .Input("Target")
      .Input(GradVarName("Loss"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("reduction", std::string("mean"))
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS(KlDivGradKernel);
  r->Register("bce_loss")
      .Input("X")
      .Input("Label")
      .Output("Out")
      .SetInferShape(SameShapeAsX)
      .SetGradMaker(GradOpMaker({"X", "Label"}, {}, {"Out"}, {"X"}))
      .OAR_FLOATS(BceKernel);
  r->Register("bce_loss_grad")
      .Input("X")
      .Input("Label")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS(BceGradKernel);
  r->Register("nll_loss")
      .Input("X")
      .Input("Label")
      .Input("Weight", kDispensable)
      .Output("Out")
      .Output("Total_weight", kDispensable)
      .Attr("ignore_index", int64_t{-100})
      .Attr("reduction", std::string("mean"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Label", "Weight"}, {"Total_weight"}, {"Out"}, {"X"}))
      .OAR_FLOATS2(NllKernel, false);
  r->Register("nll_loss_grad")
      .Input("X")
      .Input("Label")
      .Input("Weight", kDispensable)
      .Input("Total_weight", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("ignore_index", int64_t{-100})
      .Attr("reduction", std::string("mean"))
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(NllKernel, true);
  r->Register("log_loss")
      .Input("Predicted")
      .Input("Labels")
      .Output("Loss")
      .Attr("epsilon", 1e-4f)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"Predicted", "Labels"}, {}, {"Loss"}, {"Predicted"}))
      .OAR_FLOATS2(LogLossKernel, false);
  r->Register("log_loss_grad")
      .Input("Predicted")
      .Input("Labels")
      .Input(GradVarName("Loss"))
      .Output(GradVarName("Predicted"), kDispensable)
      .Attr("epsilon", 1e-4f)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(LogLossKernel, true);
  r->Register("huber_loss")
      .Input("X")
      .Input("Y")
      .Output("Out")
      .Output("Residual")
      .Attr("delta", 1.0f)
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({}, {"Residual"}, {"Out"}, {"X", "Y"}))
      .OAR_FLOATS(HuberKernel);
  r->Register("huber_loss_grad")
      .Input("Residual")
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Output(GradVarName("Y"), kDispensable)
      .Attr("delta", 1.0f)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS(HuberGradKernel);
  r->Register("bpr_loss")
      .Input("X")
      .Input("Label")
      .Output("Y")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"X", "Label"}, {}, {"Y"}, {"X"}))
      .OAR_FLOATS2(BprKernel, false);
  r->Register("bpr_loss_grad")
      .Input("X")
      .Input("Label")
      .Input(GradVarName("Y"))
      .Output(GradVarName("X"), kDispensable)
      .SetInferShape(GradSameShapeAsX)
      .OAR_FLOATS2(BprKernel, true);
  r->Register("rank_loss")
      .Input("Label")
      .Input("Left")
      .Input("Right")
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"Label", "Left", "Right"}, {}, {"Out"}, {"Left", "Right"}))
      .OAR_FLOATS2(RankKernel, false);
  r->Register("rank_loss_grad")
      .Input("Label")
      .Input("Left")
      .Input("Right")
      .Input(GradVarName("Out"))
      .Output(GradVarName("Left"), kDispensable)
      .Output(GradVarName("Right"), kDispensable)
      .SetInferShape(NoShapeInference)
      .OAR_FLOATS2(RankKernel, true);
}

#undef OAR_FLOATS
#undef OAR_FLOATS2

}  // namespace oar
