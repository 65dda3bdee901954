// lstm (fluid.layers.dynamic_lstm), forward and backward through time, as
// Paddle computes it: Input [T, 4H] already projected, gates in the order
// candidate, input, forget, output; Weight [H, 4H]; Bias [1, 4H], or
// [1, 7H] with the peephole weights; optional H0, C0; is_reverse. Each
// sequence of Input's LoD runs on its own. The gradient follows
// Hidden@GRAD alone, as Paddle's (a loss on Cell adds nothing). Arithmetic
// is in double; the step products go through blas.h's Gemm.
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

// ---- lstm ----

struct LstmSetup {
  int64_t h = 0;
  bool peep = false, reverse = false;
  Act gate, cell, cand;
  std::vector<size_t> off;
  std::vector<double> w, b, h0, c0;
};

absl::StatusOr<LstmSetup> LstmOf(const ExecutionContext& ctx, const Tensor& in) {
  LstmSetup s;
  OAR_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, "Weight"));
  OAR_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, "Bias"));
  OAR_ASSIGN_OR_RETURN(s.off, LastLevel(ctx, "Input", in));
  OAR_ASSIGN_OR_RETURN(s.gate, ParseAct("lstm", ctx.Attr<std::string>("gate_activation")));
  OAR_ASSIGN_OR_RETURN(s.cell, ParseAct("lstm", ctx.Attr<std::string>("cell_activation")));
  OAR_ASSIGN_OR_RETURN(s.cand, ParseAct("lstm", ctx.Attr<std::string>("candidate_activation")));
  s.h = w->dims()[0];
  s.peep = ctx.Attr<bool>("use_peepholes");
  s.reverse = ctx.Attr<bool>("is_reverse");
  if (w->numel() != s.h * 4 * s.h || RowWidth(in) != 4 * s.h || b->numel() != (s.peep ? 7 : 4) * s.h) {
    return absl::InvalidArgumentError(absl::StrCat("lstm: Input", in.dims().ToString(), ", Weight",
                                                   w->dims().ToString(), " and Bias", b->dims().ToString(),
                                                   " do not fit (use_peepholes=", s.peep, ")"));
  }
  s.w = ToDouble(w), s.b = ToDouble(b), s.h0 = ToDouble(ctx.Input("H0")), s.c0 = ToDouble(ctx.Input("C0"));
  return s;
}

// One sequence's forward: per step, the activated gates [c~, i, f, o], the
// cell and the hidden state; returns them in time order.
struct LstmTrace {
  std::vector<int64_t> rows;
  std::vector<std::vector<double>> gates, cell, hidden;
};

LstmTrace LstmForward(const LstmSetup& s, const float* in, size_t seq) {
  const int64_t h = s.h;
  LstmTrace t;
  t.rows = Steps(s.off[seq], s.off[seq + 1], s.reverse);
  std::vector<double> hp(static_cast<size_t>(h), 0.0), cp(static_cast<size_t>(h), 0.0);
  if (!s.h0.empty()) std::copy_n(s.h0.begin() + static_cast<int64_t>(seq) * h, h, hp.begin());
  if (!s.c0.empty()) std::copy_n(s.c0.begin() + static_cast<int64_t>(seq) * h, h, cp.begin());
  for (int64_t r : t.rows) {
    std::vector<double> g(static_cast<size_t>(4 * h));
    for (int64_t k = 0; k < 4 * h; ++k) g[static_cast<size_t>(k)] = in[r * 4 * h + k] + s.b[static_cast<size_t>(k)];
    Gemm<double>(false, false, 1, 4 * h, h, 1, hp.data(), s.w.data(), 1, g.data());
    std::vector<double> c(static_cast<size_t>(h)), hn(static_cast<size_t>(h));
    for (int64_t k = 0; k < h; ++k) {
      const size_t K = static_cast<size_t>(k), H = static_cast<size_t>(h);
      g[K] = Apply(s.cand, g[K]);
      g[H + K] = Apply(s.gate, g[H + K] + (s.peep ? cp[K] * s.b[4 * H + K] : 0));
      g[2 * H + K] = Apply(s.gate, g[2 * H + K] + (s.peep ? cp[K] * s.b[5 * H + K] : 0));
      c[K] = g[2 * H + K] * cp[K] + g[H + K] * g[K];
      g[3 * H + K] = Apply(s.gate, g[3 * H + K] + (s.peep ? c[K] * s.b[6 * H + K] : 0));
      hn[K] = g[3 * H + K] * Apply(s.cell, c[K]);
    }
    t.gates.push_back(g), t.cell.push_back(c), t.hidden.push_back(hn);
    hp = hn, cp = c;
  }
  return t;
}

absl::Status LstmKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const LstmSetup s, LstmOf(ctx, *in));
  const DDim od{in->dims()[0], s.h};
  Tensor* hid = ctx.Output("Hidden");
  Tensor* cel = ctx.Output("Cell");
  float* hp = hid->mutable_data<float>(od);
  float* cp = cel ? cel->mutable_data<float>(od) : nullptr;
  for (size_t q = 0; q + 1 < s.off.size(); ++q) {
    const LstmTrace t = LstmForward(s, in->data<float>(), q);
    for (size_t i = 0; i < t.rows.size(); ++i) {
      for (int64_t k = 0; k < s.h; ++k) {
        hp[t.rows[i] * s.h + k] = static_cast<float>(t.hidden[i][static_cast<size_t>(k)]);
        if (cp) cp[t.rows[i] * s.h + k] = static_cast<float>(t.cell[i][static_cast<size_t>(k)]);
      }
    }
  }
  hid->set_lod(in->lod());
  if (cel) cel->set_lod(in->lod());
  for (const char* slot : {"BatchGate", "BatchCellPreAct"}) {  // Paddle's scratch outputs; Oar recomputes instead
    if (Tensor* t = ctx.Output(slot)) t->mutable_data<float>(DDim{0});
  }
  return absl::OkStatus();
}

absl::Status LstmGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* in, RequireInput(ctx, "Input"));
  OAR_ASSIGN_OR_RETURN(const Tensor* dhid, RequireInput(ctx, GradVarName("Hidden")));
  OAR_ASSIGN_OR_RETURN(const LstmSetup s, LstmOf(ctx, *in));
  const int64_t h = s.h;
  const size_t H = static_cast<size_t>(h);
  std::vector<double> dw(s.w.size(), 0.0), db(s.b.size(), 0.0), din(static_cast<size_t>(in->numel()), 0.0);
  std::vector<double> dh0(s.h0.size(), 0.0), dc0(s.c0.size(), 0.0);
  for (size_t q = 0; q + 1 < s.off.size(); ++q) {
    const LstmTrace t = LstmForward(s, in->data<float>(), q);
    std::vector<double> dh_next(H, 0.0), dc_next(H, 0.0);
    for (size_t i = t.rows.size(); i-- > 0;) {
      const int64_t r = t.rows[i];
      std::vector<double> hp(H, 0.0), cp(H, 0.0);
      if (i > 0)
        hp = t.hidden[i - 1], cp = t.cell[i - 1];
      else if (!s.h0.empty() || !s.c0.empty()) {
        if (!s.h0.empty()) std::copy_n(s.h0.begin() + static_cast<int64_t>(q) * h, h, hp.begin());
        if (!s.c0.empty()) std::copy_n(s.c0.begin() + static_cast<int64_t>(q) * h, h, cp.begin());
      }
      const std::vector<double>& g = t.gates[i];
      std::vector<double> da(4 * H), dcp(H);
      for (size_t k = 0; k < H; ++k) {
        const double dh = dhid->data<float>()[r * h + static_cast<int64_t>(k)] + dh_next[k];
        const double ac = Apply(s.cell, t.cell[i][k]);
        da[3 * H + k] = dh * ac * Slope(s.gate, g[3 * H + k]);
        double dc = dh * g[3 * H + k] * Slope(s.cell, ac) + dc_next[k];
        if (s.peep) dc += da[3 * H + k] * s.b[6 * H + k];
        da[H + k] = dc * g[k] * Slope(s.gate, g[H + k]);
        da[2 * H + k] = dc * cp[k] * Slope(s.gate, g[2 * H + k]);
        da[k] = dc * g[H + k] * Slope(s.cand, g[k]);
        dcp[k] = dc * g[2 * H + k];
        if (s.peep) {
          dcp[k] += da[H + k] * s.b[4 * H + k] + da[2 * H + k] * s.b[5 * H + k];
          db[4 * H + k] += da[H + k] * cp[k], db[5 * H + k] += da[2 * H + k] * cp[k];
          db[6 * H + k] += da[3 * H + k] * t.cell[i][k];
        }
      }
      for (size_t k = 0; k < 4 * H; ++k) din[static_cast<size_t>(r) * 4 * H + k] = da[k], db[k] += da[k];
      Gemm<double>(true, false, h, 4 * h, 1, 1, hp.data(), da.data(), 1, dw.data());  // dW += h_prevᵀ·da
      std::fill(dh_next.begin(), dh_next.end(), 0.0);
      Gemm<double>(false, true, 1, h, 4 * h, 1, da.data(), s.w.data(), 0, dh_next.data());  // da·Wᵀ
      dc_next = dcp;
      if (i == 0) {
        if (!dh0.empty()) std::copy(dh_next.begin(), dh_next.end(), dh0.begin() + static_cast<int64_t>(q) * h);
        if (!dc0.empty()) std::copy(dc_next.begin(), dc_next.end(), dc0.begin() + static_cast<int64_t>(q) * h);
      }
    }
  }
  auto put = [&](const char* slot, const std::vector<double>& v, const DDim& d) {
    if (Tensor* t = ctx.Output(GradVarName(slot))) {
      float* p = t->mutable_data<float>(d);
      for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<float>(v[i]);
    }
  };
  put("Input", din, in->dims());
  put("Weight", dw, ctx.Input("Weight")->dims());
  put("Bias", db, ctx.Input("Bias")->dims());
  if (ctx.Input("H0")) put("H0", dh0, ctx.Input("H0")->dims());
  if (ctx.Input("C0")) put("C0", dc0, ctx.Input("C0")->dims());
  if (Tensor* t = ctx.Output(GradVarName("Input"))) t->set_lod(in->lod());
  return absl::OkStatus();
}

}  // namespace

void RegisterLstmOp(OpRegistry* r) {
  auto lstm = [](OpInfo& i) -> OpInfo& {
    return i.Attr("use_peepholes", true)
        .Attr("is_reverse", false)
        .Attr("gate_activation", std::string("sigmoid"))
        .Attr("cell_activation", std::string("tanh"))
        .Attr("candidate_activation", std::string("tanh"));
  };
  lstm(r->Register("lstm")
           .NotInPlace()
           .Input("Input")
           .Input("H0", kDispensable)
           .Input("C0", kDispensable)
           .Input("Weight")
           .Input("Bias")
           .Output("Hidden")
           .Output("Cell")
           .Output("BatchGate", kDispensable)
           .Output("BatchCellPreAct", kDispensable))
      .SetInferShape(NoShapeInference)
      .SetGradMaker(GradOpMaker({"Input", "H0", "C0", "Weight", "Bias"},
                                {"Hidden", "Cell", "BatchGate", "BatchCellPreAct"}, {"Hidden"},
                                {"Input", "H0", "C0", "Weight", "Bias"}))
      .Kernel<float>(LstmKernel);
  lstm(r->Register("lstm_grad")
           .NotInPlace()
           .Input("Input")
           .Input("H0", kDispensable)
           .Input("C0", kDispensable)
           .Input("Weight")
           .Input("Bias")
           .Input("Hidden", kDispensable)
           .Input("Cell", kDispensable)
           .Input("BatchGate", kDispensable)
           .Input("BatchCellPreAct", kDispensable)
           .Input(GradVarName("Hidden"))
           .Input(GradVarName("Cell"), kDispensable)
           .Output(GradVarName("Input"), kDispensable)
           .Output(GradVarName("H0"), kDispensable)
           .Output(GradVarName("C0"), kDispensable)
           .Output(GradVarName("Weight"), kDispensable)
           .Output(GradVarName("Bias"), kDispensable))
      .SetInferShape(NoShapeInference)
      .Kernel<float>(LstmGradKernel);
}

}  // namespace oar
