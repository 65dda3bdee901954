// The fused `rnn` op of paddle.nn.LSTM / GRU / SimpleRNN (mode LSTM, GRU,
// RNN_TANH, RNN_RELU), and rnn_grad: `num_layers` layers, each one or two
// directions (is_bidirec), time-major Input [T, N, input_size]. WeightList
// holds, for cell c = layer * directions + direction, W_ih [G·H, in] and
// W_hh [G·H, H] (all cells' weights first, then all cells' b_ih, b_hh);
// PreState and State hold h (and c) as [layers·directions, N, H]. Gates as
// Paddle's cells compute them: LSTM i, f, g, o (c = f·c + i·g, h =
// o·tanh c); GRU r, z, c̃ with c̃ = tanh(x_c + r ⊙ (W_hc h + b_hc)) and h =
// z ⊙ h_prev + (1 − z) ⊙ c̃. The gradient recomputes the forward pass and
// runs back through time; Reserve is not used. Not implemented (refused by
// name): SequenceLength and dropout between layers in training.
//
// Thread-safety: stateless kernels.
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/blas.h"
#include "common/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

struct Spec {
  std::string mode;
  bool lstm = false, gru = false, rnn_tanh = false;  // mode, read once (the step loops test it per element)
  int gates = 4, layers = 1, dirs = 1;
  int64_t steps = 0, batch = 0, input = 0, hidden = 0;
  int64_t InputOf(int layer) const { return layer == 0 ? input : dirs * hidden; }
};

absl::StatusOr<Spec> ReadSpec(const ExecutionContext& ctx, const Tensor& x) {
  Spec s;
  s.mode = ctx.Attr<std::string>("mode");
  s.gates = s.mode == "LSTM" ? 4 : s.mode == "GRU" ? 3 : 1;
  s.lstm = s.mode == "LSTM", s.gru = s.mode == "GRU", s.rnn_tanh = s.mode == "RNN_TANH";
  if (s.mode != "LSTM" && s.mode != "GRU" && s.mode != "RNN_TANH" && s.mode != "RNN_RELU") {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": mode '", s.mode,
                                                   "' is not LSTM, GRU, RNN_TANH or RNN_RELU"));
  }
  s.layers = ctx.Attr<int32_t>("num_layers");
  s.dirs = ctx.Attr<bool>("is_bidirec") ? 2 : 1;
  s.hidden = ctx.Attr<int32_t>("hidden_size");
  if (x.dims().size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), "Input"),
                                                   x.dims().ToString(), " is not [time, batch, input_size]"));
  }
  s.steps = x.dims()[0];
  s.batch = x.dims()[1];
  s.input = x.dims()[2];
  const size_t cells = static_cast<size_t>(s.layers * s.dirs);
  const std::vector<const Tensor*> w = ctx.MultiInput("WeightList");
  if (w.size() != 4 * cells) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": WeightList holds ", w.size(),
                                                   " tensors; ", s.layers, " layer(s) of ", s.dirs,
                                                   " direction(s) need ", 4 * cells));
  }
  for (size_t c = 0; c < cells; ++c) {
    const int64_t gh = s.gates * s.hidden, in = s.InputOf(static_cast<int>(c) / s.dirs);
    const DDim want[4] = {DDim{gh, in}, DDim{gh, s.hidden}, DDim{gh}, DDim{gh}};
    const size_t at[4] = {2 * c, 2 * c + 1, 2 * cells + 2 * c, 2 * cells + 2 * c + 1};
    for (int k = 0; k < 4; ++k) {
      if (w[at[k]] == nullptr || w[at[k]]->dims() != want[k]) {
        return absl::InvalidArgumentError(absl::StrCat(
            ctx.op().type, ": ", InputLabel(ctx.op(), "WeightList", at[k]),
            w[at[k]] ? w[at[k]]->dims().ToString() : std::string(" (no value)"), " should be ", want[k].ToString(),
            " (cell ", c, " of ", s.mode, ", hidden_size ", s.hidden, ")"));
      }
    }
  }
  return s;
}

// Paddle's CPU rnn kernel's activations (phi's detail/activation_functions.h
// formulas, written here): the sigmoid of the input clipped to [-40, 13],
// tanh as 2/(1 + e^(-2x)) − 1 with the exponent capped at 40. One expf each,
// where libm's tanhf costs several times more (a third of an LSTM step).
template <typename T>
T Sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-std::clamp(v, T(-40), T(13))));
}

template <typename T>
T Tanh(T v) {
  return T(2) / (T(1) + std::exp(std::min(T(-2) * v, T(40)))) - T(1);
}

// What one direction of one layer computed, kept for the gradient: per
// step, the activated gates (LSTM i f g o; GRU r z c̃ and W_hc·h + b_hc;
// RNN the output) and the cell state (LSTM).
template <typename T>
struct Record {
  std::vector<T> gates, hc, cell;  // [T, N, G·H], [T, N, H] (GRU), [T, N, H] (LSTM)
};

// Runs cell (layer, dir) over x [T, N, in], writing h into y [T, N, D·H] at
// dir's columns; h0 (c0) the initial states, hT (cT) the final ones.
template <typename T>
void RunDirection(const Spec& s, int dir, const T* x, int64_t in, const T* w_ih, const T* w_hh, const T* b_ih,
                  const T* b_hh, const T* h0, const T* c0, T* y, T* hT, T* cT, Record<T>* rec) {
  const int64_t N = s.batch, H = s.hidden, G = s.gates * H, TN = s.steps * N;
  std::vector<T> xg(static_cast<size_t>(TN * G)), hg(static_cast<size_t>(N * G));
  Gemm<T>(false, true, TN, G, in, T(1), x, w_ih, T(0), xg.data());
  for (int64_t r = 0; r < TN; ++r) {
    for (int64_t j = 0; j < G; ++j) xg[r * G + j] += b_ih[j];
  }
  std::vector<T> h(h0, h0 + N * H), c;
  if (s.lstm) c.assign(c0, c0 + N * H);
  rec->gates.assign(static_cast<size_t>(TN * G), T(0));
  if (s.gru) rec->hc.assign(static_cast<size_t>(TN * H), T(0));
  if (s.lstm) rec->cell.assign(static_cast<size_t>(TN * H), T(0));
  for (int64_t step = 0; step < s.steps; ++step) {
    const int64_t t = dir == 0 ? step : s.steps - 1 - step;
    Gemm<T>(false, true, N, G, H, T(1), h.data(), w_hh, T(0), hg.data());
    for (int64_t n = 0; n < N; ++n) {
      const T* a = xg.data() + (t * N + n) * G;
      const T* b = hg.data() + n * G;
      T* g = rec->gates.data() + (t * N + n) * G;
      T* hn = h.data() + n * H;
      for (int64_t j = 0; j < H; ++j) {
        if (s.lstm) {
          const T i = Sigmoid(a[j] + b[j] + b_hh[j]), f = Sigmoid(a[H + j] + b[H + j] + b_hh[H + j]);
          const T gg = Tanh(a[2 * H + j] + b[2 * H + j] + b_hh[2 * H + j]);
          const T o = Sigmoid(a[3 * H + j] + b[3 * H + j] + b_hh[3 * H + j]);
          T& cn = c[static_cast<size_t>(n * H + j)];
          cn = f * cn + i * gg;
          hn[j] = o * Tanh(cn);
          g[j] = i, g[H + j] = f, g[2 * H + j] = gg, g[3 * H + j] = o;
          rec->cell[static_cast<size_t>((t * N + n) * H + j)] = cn;
        } else if (s.gru) {
          const T r = Sigmoid(a[j] + b[j] + b_hh[j]), z = Sigmoid(a[H + j] + b[H + j] + b_hh[H + j]);
          const T hcv = b[2 * H + j] + b_hh[2 * H + j];
          const T cc = Tanh(a[2 * H + j] + r * hcv);
          hn[j] = (hn[j] - cc) * z + cc;
          g[j] = r, g[H + j] = z, g[2 * H + j] = cc;
          rec->hc[static_cast<size_t>((t * N + n) * H + j)] = hcv;
        } else {
          const T v = a[j] + b[j] + b_hh[j];
          hn[j] = s.rnn_tanh ? Tanh(v) : std::max(v, T(0));
          g[j] = hn[j];
        }
        y[(t * N + n) * s.dirs * H + dir * H + j] = hn[j];
      }
    }
  }
  std::copy(h.begin(), h.end(), hT);
  if (s.lstm) std::copy(c.begin(), c.end(), cT);
}

// The forward pass of every layer: each layer's input (for the gradient),
// the records, Out and the final states.
template <typename T>
struct Forward {
  std::vector<std::vector<T>> inputs;  // layer l's input, [T, N, in_l]
  std::vector<Record<T>> records;      // per cell
  std::vector<T> out, h_last, c_last;
};

template <typename T>
absl::StatusOr<Forward<T>> RunForward(const ExecutionContext& ctx, const Spec& s, const Tensor& x) {
  const int64_t N = s.batch, H = s.hidden, cells = s.layers * s.dirs;
  const std::vector<const Tensor*> w = ctx.MultiInput("WeightList");
  const std::vector<const Tensor*> pre = ctx.MultiInput("PreState");
  const size_t want_states = s.lstm ? 2 : 1;
  if (pre.size() != want_states) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": PreState holds ", pre.size(), " tensors; ",
                                                   s.mode, " takes ", want_states));
  }
  for (size_t k = 0; k < pre.size(); ++k) {
    if (pre[k] == nullptr || pre[k]->dims() != DDim{cells, N, H}) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), "PreState", k),
                                                     " should be ", DDim{cells, N, H}.ToString()));
    }
  }
  Forward<T> f;
  f.inputs.emplace_back(x.data<T>(), x.data<T>() + x.numel());
  f.records.resize(static_cast<size_t>(cells));
  f.h_last.assign(static_cast<size_t>(cells * N * H), T(0));
  if (s.lstm) f.c_last.assign(static_cast<size_t>(cells * N * H), T(0));
  for (int l = 0; l < s.layers; ++l) {
    std::vector<T> y(static_cast<size_t>(s.steps * N * s.dirs * H));
    for (int d = 0; d < s.dirs; ++d) {
      const size_t c = static_cast<size_t>(l * s.dirs + d), n_cells = static_cast<size_t>(cells);
      const int64_t off = static_cast<int64_t>(c) * N * H;
      RunDirection<T>(s, d, f.inputs.back().data(), s.InputOf(l), w[2 * c]->data<T>(), w[2 * c + 1]->data<T>(),
                      w[2 * n_cells + 2 * c]->data<T>(), w[2 * n_cells + 2 * c + 1]->data<T>(),
                      pre[0]->data<T>() + off, s.lstm ? pre[1]->data<T>() + off : nullptr, y.data(),
                      f.h_last.data() + off, s.lstm ? f.c_last.data() + off : nullptr, &f.records[c]);
    }
    if (l + 1 < s.layers) {
      f.inputs.push_back(std::move(y));
    } else {
      f.out = std::move(y);
    }
  }
  return f;
}

// Reserve: what the forward pass leaves for rnn_grad (Oar's own layout, as
// Paddle's Reserve is its own): each upper layer's input, every cell's
// records, Out and the final states, one after another. rnn_grad reads them
// back instead of running the forward pass again; where Reserve does not
// hold exactly that (a program that dropped it), it recomputes.
template <typename T>
std::vector<std::vector<T>*> ReserveParts(const Spec& s, Forward<T>* f) {
  std::vector<std::vector<T>*> parts;
  for (size_t l = 1; l < f->inputs.size(); ++l) parts.push_back(&f->inputs[l]);
  for (Record<T>& r : f->records) {
    parts.push_back(&r.gates);
    if (s.gru) parts.push_back(&r.hc);
    if (s.lstm) parts.push_back(&r.cell);
  }
  parts.push_back(&f->out);
  parts.push_back(&f->h_last);
  if (s.lstm) parts.push_back(&f->c_last);
  return parts;
}

template <typename T>
void PackReserve(const Spec& s, Forward<T>* f, Tensor* reserve) {
  size_t n = 0;
  for (const std::vector<T>* p : ReserveParts(s, f)) n += p->size();
  T* dst = reserve->mutable_data<T>(DDim{static_cast<int64_t>(n)});
  for (const std::vector<T>* p : ReserveParts(s, f)) dst = std::copy(p->begin(), p->end(), dst);
}

// The forward pass as the forward op left it; false where Reserve does not
// hold it.
template <typename T>
bool UnpackReserve(const Spec& s, const Tensor& x, const Tensor* reserve, Forward<T>* f) {
  if (reserve == nullptr || !reserve->initialized() || reserve->dtype() != DataTypeOf<T>::value) return false;
  const int64_t N = s.batch, H = s.hidden, TN = s.steps * N, cells = s.layers * s.dirs;
  f->inputs.assign(static_cast<size_t>(s.layers), {});
  f->inputs[0].assign(x.data<T>(), x.data<T>() + x.numel());
  for (int l = 1; l < s.layers; ++l) f->inputs[static_cast<size_t>(l)].resize(static_cast<size_t>(TN * s.dirs * H));
  f->records.assign(static_cast<size_t>(cells), {});
  for (Record<T>& r : f->records) {
    r.gates.resize(static_cast<size_t>(TN * s.gates * H));
    if (s.gru) r.hc.resize(static_cast<size_t>(TN * H));
    if (s.lstm) r.cell.resize(static_cast<size_t>(TN * H));
  }
  f->out.resize(static_cast<size_t>(TN * s.dirs * H));
  f->h_last.resize(static_cast<size_t>(cells * N * H));
  if (s.lstm) f->c_last.resize(static_cast<size_t>(cells * N * H));
  size_t n = 0;
  for (const std::vector<T>* p : ReserveParts(s, f)) n += p->size();
  if (static_cast<size_t>(reserve->numel()) != n) return false;
  const T* src = reserve->data<T>();
  for (std::vector<T>* p : ReserveParts(s, f)) {
    std::copy(src, src + p->size(), p->begin());
    src += p->size();
  }
  return true;
}

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
  if (state.size() > 1 && state[1] != nullptr) std::copy(f.c_last.begin(), f.c_last.end(), state[1]->mutable_data<T>(sd));
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
      for (int64_t step = s.steps - 1; step >= 0; --step) {
        const int64_t t = d == 0 ? step : s.steps - 1 - step;
        const int64_t tp = d == 0 ? t - 1 : t + 1;  // the step before, in this direction's order
        const bool first = step == 0;
        for (int64_t n = 0; n < N; ++n) {  // h (and c) the step started from
          for (int64_t j = 0; j < H; ++j) {
            hprev[n * H + j] = first ? h0[n * H + j] : (l + 1 < s.layers ? f.inputs[l + 1][(tp * N + n) * DH + d * H + j]
                                                                          : f.out[(tp * N + n) * DH + d * H + j]);
          }
        }
        for (int64_t n = 0; n < N; ++n) {
          const T* g = rec.gates.data() + (t * N + n) * G;
          T* ax = dxg.data() + (t * N + n) * G;
          T* ah = dhg.data() + n * G;
          for (int64_t j = 0; j < H; ++j) {
            const size_t k = static_cast<size_t>(n * H + j);
            const T dhv = dh[k] + dy[(t * N + n) * DH + d * H + j];
            if (s.lstm) {
              const T i = g[j], fg = g[H + j], gg = g[2 * H + j], o = g[3 * H + j];
              const T ct = rec.cell[static_cast<size_t>((t * N + n) * H + j)];
              const T cp = first ? c0[k] : rec.cell[static_cast<size_t>((tp * N + n) * H + j)];
              const T tc = Tanh(ct);
              const T dct = dc[k] + dhv * o * (T(1) - tc * tc);
              ax[j] = dct * gg * i * (T(1) - i);
              ax[H + j] = dct * cp * fg * (T(1) - fg);
              ax[2 * H + j] = dct * i * (T(1) - gg * gg);
              ax[3 * H + j] = dhv * tc * o * (T(1) - o);
              for (int q = 0; q < 4; ++q) ah[q * H + j] = ax[q * H + j];
              dc[k] = dct * fg;
              dh_prev[k] = T(0);
            } else if (s.gru) {
              const T r = g[j], z = g[H + j], cc = g[2 * H + j];
              const T hcv = rec.hc[static_cast<size_t>((t * N + n) * H + j)];
              const T dcc = dhv * (T(1) - z) * (T(1) - cc * cc);
              ax[j] = dcc * hcv * r * (T(1) - r);
              ax[H + j] = dhv * (hprev[k] - cc) * z * (T(1) - z);
              ax[2 * H + j] = dcc;
              ah[j] = ax[j];
              ah[H + j] = ax[H + j];
              ah[2 * H + j] = dcc * r;
              dh_prev[k] = dhv * z;
            } else {
              const T hv = g[j];
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
  if (!dpre_out.empty() && dpre_out[0] != nullptr) std::copy(dpre_h.begin(), dpre_h.end(), dpre_out[0]->mutable_data<T>(sd));
  if (dpre_out.size() > 1 && dpre_out[1] != nullptr) std::copy(dpre_c.begin(), dpre_c.end(), dpre_out[1]->mutable_data<T>(sd));
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
    return info.Attr("dropout_prob", 0.0f).Attr("is_bidirec", false).Attr("input_size", int32_t{10})
        .Attr("hidden_size", int32_t{100}).Attr("num_layers", int32_t{1}).Attr("mode", std::string("LSTM"))
        .Attr("seed", int32_t{0}).Attr("is_test", false);
  };
  attrs(r->Register("rnn").NotInPlace().Input("Input").Input("PreState", kDuplicable)
            .Input("WeightList", kDuplicable).Input("SequenceLength", kDispensable)
            .Output("Out").Output("State", kDuplicable | kDispensable).Output("Reserve", kDispensable)
            .Output("DropoutState", kDispensable))
      .SetInferShape(RnnShape)
      .SetGradMaker(GradOpMaker({"Input", "PreState", "WeightList", "SequenceLength"},
                                {"Out", "Reserve", "DropoutState"}, {"Out", "State"},
                                {"Input", "PreState", "WeightList"}))
      .Kernel<float>(RnnKernel<float>).Kernel<double>(RnnKernel<double>);
  attrs(r->Register("rnn_grad").NotInPlace().Input("Input").Input("PreState", kDuplicable)
            .Input("WeightList", kDuplicable).Input("SequenceLength", kDispensable)
            .Input("Out", kDispensable).Input("Reserve", kDispensable).Input("DropoutState", kDispensable)
            .Input(GradVarName("Out"), kDispensable).Input(GradVarName("State"), kDuplicable | kDispensable)
            .Output(GradVarName("Input"), kDispensable).Output(GradVarName("PreState"), kDuplicable | kDispensable)
            .Output(GradVarName("WeightList"), kDuplicable | kDispensable))
      .SetInferShape(RnnGradShape)
      .Kernel<float>(RnnGradKernel<float>).Kernel<double>(RnnGradKernel<double>);
}

}  // namespace oar
