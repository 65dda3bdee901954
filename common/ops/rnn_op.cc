// The fused `rnn` op of paddle.nn.LSTM / GRU / SimpleRNN (mode LSTM, GRU,
// RNN_TANH, RNN_RELU), and rnn_grad: `num_layers` layers, each one or two
// directions (is_bidirec), time-major Input [T, N, input_size]. WeightList
// holds, for cell c = layer * directions + direction, W_ih [G·H, in] and
// W_hh [G·H, H] (all cells' weights first, then all cells' b_ih, b_hh);
// PreState and State hold h (and c) as [layers·directions, N, H]. Gates as
// Paddle's cells compute them: LSTM i, f, g, o (c = f·c + i·g, h =
// o·tanh c); GRU r, z, c̃ with c̃ = tanh(x_c + r ⊙ (W_hc h + b_hc)) and h =
// z ⊙ h_prev + (1 − z) ⊙ c̃. The forward pass (rnn_forward.h) leaves its
// records in Reserve; the gradient reads them back (or recomputes them where
// Reserve does not hold them) and runs back through time. Not implemented
// (refused by name): SequenceLength and dropout between layers in training.
//
// Thread-safety: stateless kernels.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/blas.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"
#include "common/ops/rnn_forward.h"

namespace oar {
namespace {

using namespace rnn_fused;  // NOLINT: the op is written in the forward pass's terms

absl::Status CheckImplemented(const ExecutionContext& ctx) {
  const Tensor* len = ctx.Input("SequenceLength");
  if (len != nullptr && len->initialized()) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), "SequenceLength"),
                                                 " (sequences of different lengths) is not implemented; pad them "
                                                 "and give no sequence_length"));
  }
  if (!ctx.Attr<bool>("is_test") && ctx.Attr<float>("dropout_prob") > 0 && ctx.Attr<int32_t>("num_layers") > 1) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type, ": dropout_prob=", ctx.Attr<float>("dropout_prob"),
                                                 " between layers in training is not implemented"));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status RnnKernel(const ExecutionContext& ctx) {
  OAR_RETURN_IF_ERROR(CheckImplemented(ctx));
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Input"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Input", 0, *x));
  OAR_ASSIGN_OR_RETURN(Spec s, ReadSpec(ctx, *x));
  OAR_ASSIGN_OR_RETURN(Forward<T> f, RunForward<T>(ctx, s, *x));
  T* out = ctx.Output("Out")->mutable_data<T>(DDim{s.steps, s.batch, s.dirs * s.hidden});
  std::copy(f.out.begin(), f.out.end(), out);
  const std::vector<Tensor*> state = ctx.MultiOutput("State");
  const DDim sd{s.layers * s.dirs, s.batch, s.hidden};
  if (!state.empty() && state[0] != nullptr) std::copy(f.h_last.begin(), f.h_last.end(), state[0]->mutable_data<T>(sd));
  if (state.size() > 1 && state[1] != nullptr)
    std::copy(f.c_last.begin(), f.c_last.end(), state[1]->mutable_data<T>(sd));
  if (Tensor* t = ctx.Output("Reserve")) PackReserve(s, &f, t);
  if (Tensor* t = ctx.Output("DropoutState")) t->mutable_data<T>(DDim{1})[0] = T(0);  // no dropout: nothing kept
  return absl::OkStatus();
}

absl::Status RnnShape(InferShapeContext& ctx) {
  const DDim x = ctx.InputDim("Input");
  const int64_t dirs = ctx.Attr<bool>("is_bidirec") ? 2 : 1, h = ctx.Attr<int32_t>("hidden_size");
  if (x.size() != 3) return ctx.Error("Input", x.ToString(), " is not [time, batch, input_size]");
  ctx.SetOutputDim("Out", DDim{x[0], x[1], dirs * h});
  ctx.SetOutputDtype("Out", ctx.InputDtype("Input"));
  for (size_t i = 0; i < ctx.OutputSize("State"); ++i) {
    ctx.SetOutputDim("State", DDim{ctx.Attr<int32_t>("num_layers") * dirs, x[1], h}, i);
  }
  return absl::OkStatus();
}

// ---- rnn_grad ----

template <typename T>
absl::Status RnnGradKernel(const ExecutionContext& ctx) {
  OAR_RETURN_IF_ERROR(CheckImplemented(ctx));
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "Input"));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Input", 0, *x));
  OAR_ASSIGN_OR_RETURN(Spec s, ReadSpec(ctx, *x));
  Forward<T> f;
  if (!UnpackReserve(s, *x, ctx.Input("Reserve"), &f)) {
    OAR_ASSIGN_OR_RETURN(f, RunForward<T>(ctx, s, *x));
  }
  const int64_t N = s.batch, H = s.hidden, G = s.gates * H, TN = s.steps * N, DH = s.dirs * H;
  const size_t cells = static_cast<size_t>(s.layers * s.dirs);
  const std::vector<const Tensor*> w = ctx.MultiInput("WeightList");
  const std::vector<const Tensor*> pre = ctx.MultiInput("PreState");
  // The gradient arriving at the top layer's output, and at the final states.
  std::vector<T> dy(static_cast<size_t>(TN * DH), T(0));
  if (const Tensor* g = ctx.Input(GradVarName("Out")); g != nullptr && g->initialized()) {
    if (g->numel() != TN * DH) {
      return absl::InvalidArgumentError(absl::StrCat("rnn_grad: ", InputLabel(ctx.op(), GradVarName("Out")),
                                                     g->dims().ToString(), " is not Out's shape"));
    }
    std::copy(g->data<T>(), g->data<T>() + g->numel(), dy.begin());
  }
  const size_t state_n = static_cast<size_t>(cells * N * H);
  std::vector<T> dh_last(state_n, T(0)), dc_last(state_n, T(0));
  for (size_t k = 0; k < 2 && k < ctx.InputSize(GradVarName("State")); ++k) {
    const Tensor* g = ctx.Input(GradVarName("State"), k);
    if (g == nullptr || !g->initialized()) continue;
    if (static_cast<size_t>(g->numel()) != state_n) {
      return absl::InvalidArgumentError(absl::StrCat("rnn_grad: ", InputLabel(ctx.op(), GradVarName("State"), k),
                                                     g->dims().ToString(), " is not State's shape"));
    }
    std::copy(g->data<T>(), g->data<T>() + g->numel(), (k == 0 ? dh_last : dc_last).begin());
  }
  std::vector<std::vector<T>> dw(w.size());
  for (size_t i = 0; i < w.size(); ++i) dw[i].assign(static_cast<size_t>(w[i]->numel()), T(0));
  std::vector<T> dpre_h(state_n, T(0)), dpre_c(state_n, T(0));
  std::vector<T> dx_layer;
  for (int l = s.layers - 1; l >= 0; --l) {
    const int64_t in = s.InputOf(l);
    const std::vector<T>& xl = f.inputs[static_cast<size_t>(l)];
    dx_layer.assign(static_cast<size_t>(TN * in), T(0));
    for (int d = 0; d < s.dirs; ++d) {
      const size_t c = static_cast<size_t>(l * s.dirs + d);
      const Record<T>& rec = f.records[c];
      const T* w_ih = w[2 * c]->data<T>();
      const T* w_hh = w[2 * c + 1]->data<T>();
      const int64_t off = static_cast<int64_t>(c) * N * H;
      const T* h0 = pre[0]->data<T>() + off;
      const T* c0 = s.lstm ? pre[1]->data<T>() + off : nullptr;
      std::vector<T> dxg(static_cast<size_t>(TN * G), T(0)), dhg(static_cast<size_t>(N * G));
      std::vector<T> dh(dh_last.begin() + off, dh_last.begin() + off + N * H);
      std::vector<T> dc(dc_last.begin() + off, dc_last.begin() + off + N * H);
      std::vector<T> hprev(static_cast<size_t>(N * H)), dh_prev(static_cast<size_t>(N * H));
      std::vector<T> tc(s.lstm ? static_cast<size_t>(N * H) : 0);
      for (int64_t step = s.steps - 1; step >= 0; --step) {
        const int64_t t = d == 0 ? step : s.steps - 1 - step;
        const int64_t tp = d == 0 ? t - 1 : t + 1;  // the step before, in this direction's order
        const bool first = step == 0;
        for (int64_t n = 0; n < N; ++n) {  // h (and c) the step started from
          for (int64_t j = 0; j < H; ++j) {
            hprev[n * H + j] = first ? h0[n * H + j]
                                     : (l + 1 < s.layers ? f.inputs[l + 1][(tp * N + n) * DH + d * H + j]
                                                         : f.out[(tp * N + n) * DH + d * H + j]);
          }
        }
        if (s.lstm) {  // tanh(c_t), the activation of this step's cell state, all at once
          std::copy(rec.cell.begin() + t * N * H, rec.cell.begin() + (t + 1) * N * H, tc.begin());
          TanhInPlace(tc.data(), N * H);
        }
        for (int64_t n = 0; n < N; ++n) {
          const T* g = rec.gates.data() + (t * N + n) * G;
          T* ax = dxg.data() + (t * N + n) * G;
          T* ah = dhg.data() + n * G;
          const T* dyn = dy.data() + (t * N + n) * DH + d * H;
          const int64_t k0 = n * H;
          if (s.lstm) {
            const T* cp = first ? c0 + k0 : rec.cell.data() + (tp * N + n) * H;
            for (int64_t j = 0; j < H; ++j) {
              const int64_t k = k0 + j;
              const T dhv = dh[k] + dyn[j];
              const T i = g[j], fg = g[H + j], gg = g[2 * H + j], o = g[3 * H + j], tcv = tc[k];
              const T dct = dc[k] + dhv * o * (T(1) - tcv * tcv);
              ax[j] = dct * gg * i * (T(1) - i);
              ax[H + j] = dct * cp[j] * fg * (T(1) - fg);
              ax[2 * H + j] = dct * i * (T(1) - gg * gg);
              ax[3 * H + j] = dhv * tcv * o * (T(1) - o);
              dc[k] = dct * fg;
              dh_prev[k] = T(0);
            }
            std::copy(ax, ax + G, ah);
          } else if (s.gru) {
            const T* hcv = rec.hc.data() + (t * N + n) * H;
            for (int64_t j = 0; j < H; ++j) {
              const int64_t k = k0 + j;
              const T dhv = dh[k] + dyn[j];
              const T r = g[j], z = g[H + j], cc = g[2 * H + j];
              const T dcc = dhv * (T(1) - z) * (T(1) - cc * cc);
              ax[j] = dcc * hcv[j] * r * (T(1) - r);
              ax[H + j] = dhv * (hprev[k] - cc) * z * (T(1) - z);
              ax[2 * H + j] = dcc;
              ah[j] = ax[j];
              ah[H + j] = ax[H + j];
              ah[2 * H + j] = dcc * r;
              dh_prev[k] = dhv * z;
            }
          } else {
            for (int64_t j = 0; j < H; ++j) {
              const int64_t k = k0 + j;
              const T dhv = dh[k] + dyn[j], hv = g[j];
              ax[j] = s.rnn_tanh ? dhv * (T(1) - hv * hv) : (hv > T(0) ? dhv : T(0));
              ah[j] = ax[j];
              dh_prev[k] = T(0);
            }
          }
        }
        // dW_hh += dhgᵀ·h_prev; db_hh += Σ dhg; dh for the step before = dh_prev + dhg·W_hh.
        Gemm<T>(true, false, G, H, N, T(1), dhg.data(), hprev.data(), T(1), dw[2 * c + 1].data());
        T* dbh = dw[2 * cells + 2 * c + 1].data();
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t j = 0; j < G; ++j) dbh[j] += dhg[n * G + j];
        }
        std::copy(dh_prev.begin(), dh_prev.end(), dh.begin());
        Gemm<T>(false, false, N, H, G, T(1), dhg.data(), w_hh, T(1), dh.data());
      }
      std::copy(dh.begin(), dh.end(), dpre_h.begin() + off);
      if (s.lstm) std::copy(dc.begin(), dc.end(), dpre_c.begin() + off);
      // dW_ih += dxgᵀ·x; db_ih += Σ dxg; dx += dxg·W_ih.
      Gemm<T>(true, false, G, in, TN, T(1), dxg.data(), xl.data(), T(1), dw[2 * c].data());
      T* dbi = dw[2 * cells + 2 * c].data();
      for (int64_t r = 0; r < TN; ++r) {
        for (int64_t j = 0; j < G; ++j) dbi[j] += dxg[r * G + j];
      }
      Gemm<T>(false, false, TN, in, G, T(1), dxg.data(), w_ih, T(1), dx_layer.data());
    }
    if (l > 0) dy = dx_layer;  // the layer below's output gradient
  }
  if (Tensor* dx = ctx.Output(GradVarName("Input"))) {
    std::copy(dx_layer.begin(), dx_layer.end(), dx->mutable_data<T>(x->dims()));
  }
  const std::vector<Tensor*> dw_out = ctx.MultiOutput(GradVarName("WeightList"));
  for (size_t i = 0; i < dw_out.size() && i < w.size(); ++i) {
    if (dw_out[i] != nullptr) std::copy(dw[i].begin(), dw[i].end(), dw_out[i]->mutable_data<T>(w[i]->dims()));
  }
  const std::vector<Tensor*> dpre_out = ctx.MultiOutput(GradVarName("PreState"));
  const DDim sd{static_cast<int64_t>(cells), N, H};
  if (!dpre_out.empty() && dpre_out[0] != nullptr)
    std::copy(dpre_h.begin(), dpre_h.end(), dpre_out[0]->mutable_data<T>(sd));
  if (dpre_out.size() > 1 && dpre_out[1] != nullptr)
    std::copy(dpre_c.begin(), dpre_c.end(), dpre_out[1]->mutable_data<T>(sd));
  return absl::OkStatus();
}

absl::Status RnnGradShape(InferShapeContext& ctx) {
  ctx.SetOutputDim(GradVarName("Input"), ctx.InputDim("Input"));
  for (size_t i = 0; i < ctx.OutputSize(GradVarName("WeightList")) && i < ctx.InputSize("WeightList"); ++i) {
    ctx.SetOutputDim(GradVarName("WeightList"), ctx.InputDim("WeightList", i), i);
  }
  for (size_t i = 0; i < ctx.OutputSize(GradVarName("PreState")) && i < ctx.InputSize("PreState"); ++i) {
    ctx.SetOutputDim(GradVarName("PreState"), ctx.InputDim("PreState", i), i);
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterRnnOps(OpRegistry* r) {
  auto attrs = [](OpInfo& info) -> OpInfo& {
    return info.Attr("dropout_prob", 0.0f)
        .Attr("is_bidirec", false)
        .Attr("input_size", int32_t{10})
        .Attr("hidden_size", int32_t{100})
        .Attr("num_layers", int32_t{1})
        .Attr("mode", std::string("LSTM"))
        .Attr("seed", int32_t{0})
        .Attr("is_test", false);
  };
  attrs(r->Register("rnn")
            .NotInPlace()
            .Input("Input")
            .Input("PreState", kDuplicable)
            .Input("WeightList", kDuplicable)
            .Input("SequenceLength", kDispensable)
            .Output("Out")
            .Output("State", kDuplicable | kDispensable)
            .Output("Reserve", kDispensable)
            .Output("DropoutState", kDispensable))
      .SetInferShape(RnnShape)
      .SetGradMaker(GradOpMaker({"Input", "PreState", "WeightList", "SequenceLength"},
                                {"Out", "Reserve", "DropoutState"}, {"Out", "State"},
                                {"Input", "PreState", "WeightList"}))
      .Kernel<float>(RnnKernel<float>)
      .Kernel<double>(RnnKernel<double>);
  attrs(r->Register("rnn_grad")
            .NotInPlace()
            .Input("Input")
            .Input("PreState", kDuplicable)
            .Input("WeightList", kDuplicable)
            .Input("SequenceLength", kDispensable)
            .Input("Out", kDispensable)
            .Input("Reserve", kDispensable)
            .Input("DropoutState", kDispensable)
            .Input(GradVarName("Out"), kDispensable)
            .Input(GradVarName("State"), kDuplicable | kDispensable)
            .Output(GradVarName("Input"), kDispensable)
            .Output(GradVarName("PreState"), kDuplicable | kDispensable)
            .Output(GradVarName("WeightList"), kDuplicable | kDispensable))
      .SetInferShape(RnnGradShape)
      .Kernel<float>(RnnGradKernel<float>)
      .Kernel<double>(RnnGradKernel<double>);
}

}  // namespace oar
