// gru (fluid.layers.dynamic_gru: gates update, reset, candidate; Weight
// [H, 3H] stored as the [H, 2H] update/reset block then the [H, H]
// candidate block; origin_mode; is_reverse; optional H0) and gru_unit (one
// GRU step; activations by number), forward and backward through time, as
// Paddle computes them. Arithmetic is in double; the step products go
// through blas.h's Gemm.
//
// Thread-safety: stateless kernels.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/blas.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/rnn_act.h"
#include "common/ops/sequence_util.h"

namespace oar {
namespace {

using rnn::Act;
using rnn::ActByNumber;
using rnn::Apply;
using rnn::ParseAct;
using rnn::Slope;
using rnn::Steps;
using rnn::ToDouble;

// ---- gru, gru_unit: one step ----

struct GruStep {
  std::vector<double> u, r, c, rh, h;  // activated gates, r·h_prev, the new hidden state
};

// One GRU step from the projected input x (3H, bias added) and h_prev.
GruStep GruForwardStep(const std::vector<double>& x, const std::vector<double>& hp, const std::vector<double>& w,
                       int64_t h, Act gate, Act act, bool origin) {
  const size_t H = static_cast<size_t>(h);
  GruStep s;
  std::vector<double> ur(x.begin(), x.begin() + 2 * h);
  Gemm<double>(false, false, 1, 2 * h, h, 1, hp.data(), w.data(), 1, ur.data());
  s.u.resize(H), s.r.resize(H), s.rh.resize(H), s.c.resize(H), s.h.resize(H);
  for (size_t k = 0; k < H; ++k) s.u[k] = Apply(gate, ur[k]), s.r[k] = Apply(gate, ur[H + k]), s.rh[k] = s.r[k] * hp[k];
  std::vector<double> c(x.begin() + 2 * h, x.end());
  Gemm<double>(false, false, 1, h, h, 1, s.rh.data(), w.data() + 2 * h * h, 1, c.data());
  for (size_t k = 0; k < H; ++k) {
    s.c[k] = Apply(act, c[k]);
    s.h[k] = origin ? s.u[k] * hp[k] + (1 - s.u[k]) * s.c[k] : (1 - s.u[k]) * hp[k] + s.u[k] * s.c[k];
  }
  return s;
}

// The step's backward from dh: the projected-input gradient (3H), dW added
// into `dw`, the h_prev gradient returned through `dhp`.
std::vector<double> GruBackwardStep(const GruStep& s, const std::vector<double>& hp, const std::vector<double>& dh,
                                    const std::vector<double>& w, int64_t h, Act gate, Act act, bool origin,
                                    std::vector<double>* dw, std::vector<double>* dhp) {
  const size_t H = static_cast<size_t>(h);
  std::vector<double> dx(3 * H), drh(H, 0.0);
  dhp->assign(H, 0.0);
  for (size_t k = 0; k < H; ++k) {
    const double du = origin ? dh[k] * (hp[k] - s.c[k]) : dh[k] * (s.c[k] - hp[k]);
    const double dc = origin ? dh[k] * (1 - s.u[k]) : dh[k] * s.u[k];
    (*dhp)[k] = origin ? dh[k] * s.u[k] : dh[k] * (1 - s.u[k]);
    dx[k] = du * Slope(gate, s.u[k]);
    dx[2 * H + k] = dc * Slope(act, s.c[k]);
  }
  Gemm<double>(false, true, 1, h, h, 1, dx.data() + 2 * h, w.data() + 2 * h * h, 0, drh.data());     // d(r·h_prev)
  Gemm<double>(true, false, h, h, 1, 1, s.rh.data(), dx.data() + 2 * h, 1, dw->data() + 2 * h * h);  // dW_c
  for (size_t k = 0; k < H; ++k) {
    dx[H + k] = drh[k] * hp[k] * Slope(gate, s.r[k]);
    (*dhp)[k] += drh[k] * s.r[k];
  }
  Gemm<double>(true, false, h, 2 * h, 1, 1, hp.data(), dx.data(), 1, dw->data());  // dW_ur
  Gemm<double>(false, true, 1, h, 2 * h, 1, dx.data(), w.data(), 1, dhp->data());  // through W_ur
  return dx;
}

template <bool kGrad>
absl::Status GruKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* wt, RequireInput(ctx, "Weight"));
  OAR_ASSIGN_OR_RETURN(const std::vector<size_t> off, LastLevel(ctx, "Input", *in));
  OAR_ASSIGN_OR_RETURN(const Act gate, ParseAct("gru", ctx.Attr<std::string>("gate_activation")));
  OAR_ASSIGN_OR_RETURN(const Act act, ParseAct("gru", ctx.Attr<std::string>("activation")));
  const int64_t h = wt->dims()[0];
  const size_t H = static_cast<size_t>(h);
  const bool origin = ctx.Attr<bool>("origin_mode"), reverse = ctx.Attr<bool>("is_reverse");
  if (wt->numel() != 3 * h * h || RowWidth(*in) != 3 * h) {
    return absl::InvalidArgumentError(
        absl::StrCat("gru: Input", in->dims().ToString(), " and Weight", wt->dims().ToString(), " do not fit"));
  }
  const std::vector<double> w = ToDouble(wt), b = ToDouble(ctx.Input("Bias")), h0 = ToDouble(ctx.Input("H0"));
  std::vector<double> dw(w.size(), 0.0), db(3 * H, 0.0), din(static_cast<size_t>(in->numel()), 0.0),
      dh0(h0.size(), 0.0);
  float* hid = kGrad ? nullptr : ctx.Output("Hidden")->mutable_data<float>(DDim{in->dims()[0], h});
  const Tensor* dhid = kGrad ? ctx.Input(GradVarName("Hidden")) : nullptr;
  if (kGrad && dhid == nullptr) return absl::InvalidArgumentError("gru_grad: Hidden@GRAD is missing");
  for (size_t q = 0; q + 1 < off.size(); ++q) {
    const std::vector<int64_t> rows = Steps(off[q], off[q + 1], reverse);
    std::vector<GruStep> steps;
    std::vector<std::vector<double>> xs, hps;
    std::vector<double> hp(H, 0.0);
    if (!h0.empty()) std::copy_n(h0.begin() + static_cast<int64_t>(q) * h, h, hp.begin());
    for (int64_t r : rows) {
      std::vector<double> x(3 * H);
      for (size_t k = 0; k < 3 * H; ++k)
        x[k] = in->data<float>()[r * 3 * h + static_cast<int64_t>(k)] + (b.empty() ? 0 : b[k]);
      hps.push_back(hp), xs.push_back(x);
      steps.push_back(GruForwardStep(x, hp, w, h, gate, act, origin));
      hp = steps.back().h;
      if (!kGrad) {
        for (size_t k = 0; k < H; ++k) hid[r * h + static_cast<int64_t>(k)] = static_cast<float>(hp[k]);
      }
    }
    if (!kGrad) continue;
    std::vector<double> dnext(H, 0.0), dhp;
    for (size_t i = rows.size(); i-- > 0;) {
      std::vector<double> dh(H);
      for (size_t k = 0; k < H; ++k) dh[k] = dhid->data<float>()[rows[i] * h + static_cast<int64_t>(k)] + dnext[k];
      const std::vector<double> dx = GruBackwardStep(steps[i], hps[i], dh, w, h, gate, act, origin, &dw, &dhp);
      for (size_t k = 0; k < 3 * H; ++k) din[static_cast<size_t>(rows[i]) * 3 * H + k] = dx[k], db[k] += dx[k];
      dnext = dhp;
    }
    if (!dh0.empty()) std::copy(dnext.begin(), dnext.end(), dh0.begin() + static_cast<int64_t>(q) * h);
  }
  if (!kGrad) {
    ctx.Output("Hidden")->set_lod(in->lod());
    for (const char* slot : {"BatchGate", "BatchResetHiddenPrev", "BatchHidden"}) {  // Paddle's scratch outputs
      if (Tensor* t = ctx.Output(slot)) t->mutable_data<float>(DDim{0});
    }
    return absl::OkStatus();
  }
  auto put = [&](const char* slot, const std::vector<double>& v, const DDim& d) {
    if (Tensor* t = ctx.Output(GradVarName(slot))) {
      float* p = t->mutable_data<float>(d);
      for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
    }
  };
  put("Input", din, in->dims());
  put("Weight", dw, wt->dims());
  if (ctx.Input("Bias")) put("Bias", db, ctx.Input("Bias")->dims());
  if (ctx.Input("H0")) put("H0", dh0, ctx.Input("H0")->dims());
  return absl::OkStatus();
}

template <bool kGrad>
absl::Status GruUnitKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* hprev, RequireInput(ctx, "HiddenPrev"));
  OAR_ASSIGN_OR_RETURN(const Tensor* wt, RequireInput(ctx, "Weight"));
  OAR_ASSIGN_OR_RETURN(const Act gate, ActByNumber("gru_unit", ctx.Attr<int32_t>("gate_activation")));
  OAR_ASSIGN_OR_RETURN(const Act act, ActByNumber("gru_unit", ctx.Attr<int32_t>("activation")));
  const int64_t n = in->dims()[0], h = wt->dims()[0];
  const size_t H = static_cast<size_t>(h);
  if (wt->numel() != 3 * h * h || in->numel() != n * 3 * h || hprev->numel() != n * h) {
    return absl::InvalidArgumentError("gru_unit: Input [N, 3H], HiddenPrev [N, H] and Weight [H, 3H] do not fit");
  }
  const bool origin = ctx.Attr<bool>("origin_mode");
  const std::vector<double> w = ToDouble(wt), b = ToDouble(ctx.Input("Bias"));
  std::vector<double> dw(w.size(), 0.0), db(3 * H, 0.0);
  const Tensor* dhid = kGrad ? ctx.Input(GradVarName("Hidden")) : nullptr;
  if (kGrad && dhid == nullptr) return absl::InvalidArgumentError("gru_unit_grad: Hidden@GRAD is missing");
  Tensor* din = ctx.Output(GradVarName("Input"));
  Tensor* dhp_t = ctx.Output(GradVarName("HiddenPrev"));
  for (int64_t i = 0; i < n; ++i) {
    std::vector<double> x(3 * H), hp(hprev->data<float>() + i * h, hprev->data<float>() + (i + 1) * h);
    for (size_t k = 0; k < 3 * H; ++k)
      x[k] = in->data<float>()[i * 3 * h + static_cast<int64_t>(k)] + (b.empty() ? 0 : b[k]);
    const GruStep s = GruForwardStep(x, hp, w, h, gate, act, origin);
    if (!kGrad) {
      float* gp = ctx.Output("Gate")->mutable_data<float>(DDim{n, 3 * h});
      float* rp = ctx.Output("ResetHiddenPrev")->mutable_data<float>(DDim{n, h});
      float* hp_out = ctx.Output("Hidden")->mutable_data<float>(DDim{n, h});
      for (size_t k = 0; k < H; ++k) {
        gp[i * 3 * h + static_cast<int64_t>(k)] = static_cast<float>(s.u[k]);
        gp[i * 3 * h + h + static_cast<int64_t>(k)] = static_cast<float>(s.r[k]);
        gp[i * 3 * h + 2 * h + static_cast<int64_t>(k)] = static_cast<float>(s.c[k]);
        rp[i * h + static_cast<int64_t>(k)] = static_cast<float>(s.rh[k]);
        hp_out[i * h + static_cast<int64_t>(k)] = static_cast<float>(s.h[k]);
      }
      continue;
    }
    std::vector<double> dh(dhid->data<float>() + i * h, dhid->data<float>() + (i + 1) * h), dhp;
    const std::vector<double> dx = GruBackwardStep(s, hp, dh, w, h, gate, act, origin, &dw, &dhp);
    for (size_t k = 0; k < 3 * H; ++k) {
      if (din) din->mutable_data<float>(in->dims())[i * 3 * h + static_cast<int64_t>(k)] = static_cast<float>(dx[k]);
      db[k] += dx[k];
    }
    for (size_t k = 0; dhp_t && k < H; ++k)
      dhp_t->mutable_data<float>(hprev->dims())[i * h + static_cast<int64_t>(k)] = static_cast<float>(dhp[k]);
  }
  if (kGrad) {
    if (Tensor* t = ctx.Output(GradVarName("Weight"))) {
      float* p = t->mutable_data<float>(wt->dims());
      for (size_t k = 0; k < dw.size(); ++k) p[k] = static_cast<float>(dw[k]);
    }
    if (Tensor* t = ctx.Output(GradVarName("Bias"))) {
      float* p = t->mutable_data<float>(DDim{1, 3 * h});
      for (size_t k = 0; k < db.size(); ++k) p[k] = static_cast<float>(db[k]);
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterGruOps(OpRegistry* r) {
  auto gru = [](OpInfo& i) -> OpInfo& {
    return i.Attr("activation", std::string("tanh"))
        .Attr("gate_activation", std::string("sigmoid"))
        .Attr("is_reverse", false)
        .Attr("origin_mode", false);
  };
  gru(r->Register("gru")
          .NotInPlace()
          .Input("Input")
          .Input("H0", kDispensable)
          .Input("Weight")
          .Input("Bias", kDispensable)
          .Output("Hidden")
          .Output("BatchGate", kDispensable)
          .Output("BatchResetHiddenPrev", kDispensable)
          .Output("BatchHidden", kDispensable))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"Input", "H0", "Weight", "Bias"},
                                {"Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden"}, {"Hidden"},
                                {"Input", "H0", "Weight", "Bias"}))
      .Kernel<float>(GruKernel<false>);
  gru(r->Register("gru_grad")
          .NotInPlace()
          .Input("Input")
          .Input("H0", kDispensable)
          .Input("Weight")
          .Input("Bias", kDispensable)
          .Input("Hidden", kDispensable)
          .Input("BatchGate", kDispensable)
          .Input("BatchResetHiddenPrev", kDispensable)
          .Input("BatchHidden", kDispensable)
          .Input(GradVarName("Hidden"))
          .Output(GradVarName("Input"), kDispensable)
          .Output(GradVarName("H0"), kDispensable)
          .Output(GradVarName("Weight"), kDispensable)
          .Output(GradVarName("Bias"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(GruKernel<true>);
  auto unit = [](OpInfo& i) -> OpInfo& {
    return i.Attr("activation", int32_t{2}).Attr("gate_activation", int32_t{1}).Attr("origin_mode", false);
  };
  unit(r->Register("gru_unit")
           .NotInPlace()
           .Input("Input")
           .Input("HiddenPrev")
           .Input("Weight")
           .Input("Bias", kDispensable)
           .Output("Gate")
           .Output("ResetHiddenPrev")
           .Output("Hidden"))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"Input", "HiddenPrev", "Weight", "Bias"}, {"Gate", "ResetHiddenPrev"}, {"Hidden"},
                                {"Input", "HiddenPrev", "Weight", "Bias"}))
      .Kernel<float>(GruUnitKernel<false>);
  unit(r->Register("gru_unit_grad")
           .NotInPlace()
           .Input("Input")
           .Input("HiddenPrev")
           .Input("Weight")
           .Input("Bias", kDispensable)
           .Input("Gate", kDispensable)
           .Input("ResetHiddenPrev", kDispensable)
           .Input("Hidden", kDispensable)
           .Input(GradVarName("Hidden"))
           .Output(GradVarName("Input"), kDispensable)
           .Output(GradVarName("HiddenPrev"), kDispensable)
           .Output(GradVarName("Weight"), kDispensable)
           .Output(GradVarName("Bias"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(GruUnitKernel<true>);
}

}  // namespace oar
