// The forward pass of the fused `rnn` op (rnn_op.cc): the op's shape
// (Spec), one direction of one layer over time,
// every layer (RunForward), and the records rnn_grad needs, packed into the
// op's Reserve output and read back from it (Oar's own layout, as Paddle's
// Reserve is its own).
//
// Thread-safety: stateless functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/base/blas.h"
#include "common/framework/op_context.h"
#include "common/ops/op_util.h"
#include "common/ops/rnn_activation.h"

namespace oar::rnn_fused {

struct Spec {
  std::string mode;
  bool lstm = false, gru = false, rnn_tanh = false;  // mode, read once (the step loops test it per element)
  int gates = 4, layers = 1, dirs = 1;
  int64_t steps = 0, batch = 0, input = 0, hidden = 0;
  int64_t InputOf(int layer) const { return layer == 0 ? input : dirs * hidden; }
};

inline absl::StatusOr<Spec> ReadSpec(const ExecutionContext& ctx, const Tensor& x) {
  Spec s;
  s.mode = ctx.Attr<std::string>("mode");
  s.gates = s.mode == "LSTM" ? 4 : s.mode == "GRU" ? 3 : 1;
  s.lstm = s.mode == "LSTM", s.gru = s.mode == "GRU", s.rnn_tanh = s.mode == "RNN_TANH";
  if (s.mode != "LSTM" && s.mode != "GRU" && s.mode != "RNN_TANH" && s.mode != "RNN_RELU") {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": mode '", s.mode, "' is not LSTM, GRU, RNN_TANH or RNN_RELU"));
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
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": WeightList holds ", w.size(), " tensors; ",
                                                   s.layers, " layer(s) of ", s.dirs, " direction(s) need ",
                                                   4 * cells));
  }
  for (size_t c = 0; c < cells; ++c) {
    const int64_t gh = s.gates * s.hidden, in = s.InputOf(static_cast<int>(c) / s.dirs);
    const DDim want[4] = {DDim{gh, in}, DDim{gh, s.hidden}, DDim{gh}, DDim{gh}};
    const size_t at[4] = {2 * c, 2 * c + 1, 2 * cells + 2 * c, 2 * cells + 2 * c + 1};
    for (int k = 0; k < 4; ++k) {
      if (w[at[k]] == nullptr || w[at[k]]->dims() != want[k]) {
        return absl::InvalidArgumentError(
            absl::StrCat(ctx.op().type, ": ", InputLabel(ctx.op(), "WeightList", at[k]),
                         w[at[k]] ? w[at[k]]->dims().ToString() : std::string(" (no value)"), " should be ",
                         want[k].ToString(), " (cell ", c, " of ", s.mode, ", hidden_size ", s.hidden, ")"));
      }
    }
  }
  return s;
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
  std::vector<T> tc(s.lstm ? static_cast<size_t>(N * H) : 0);
  for (int64_t step = 0; step < s.steps; ++step) {
    const int64_t t = dir == 0 ? step : s.steps - 1 - step;
    Gemm<T>(false, true, N, G, H, T(1), h.data(), w_hh, T(0), hg.data());
    T* g = rec->gates.data() + t * N * G;  // this step's gates, [N, G]
    const T* a = xg.data() + t * N * G;
    // Pre-activations (GRU: of r and z; c̃ waits for r), then Paddle's
    // activations over whole rows (rnn_activation.h), then the states.
    const int64_t pre = s.gru ? 2 * H : G;
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t j = 0; j < pre; ++j) g[n * G + j] = a[n * G + j] + hg[n * G + j] + b_hh[j];
    }
    if (s.lstm) {  // gates i f g o: c = f·c + i·g, h = o·tanh(c)
      for (int64_t n = 0; n < N; ++n) {
        SigmoidInPlace(g + n * G, 2 * H);
        TanhInPlace(g + n * G + 2 * H, H);
        SigmoidInPlace(g + n * G + 3 * H, H);
      }
      T* cell = rec->cell.data() + t * N * H;
      for (int64_t n = 0; n < N; ++n) {
        const T* gn = g + n * G;
        for (int64_t j = 0; j < H; ++j) {
          const int64_t k = n * H + j;
          c[k] = gn[H + j] * c[k] + gn[j] * gn[2 * H + j];
          cell[k] = c[k];
        }
      }
      std::copy(cell, cell + N * H, tc.begin());
      TanhInPlace(tc.data(), N * H);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t j = 0; j < H; ++j) h[n * H + j] = g[n * G + 3 * H + j] * tc[n * H + j];
      }
    } else if (s.gru) {  // gates r z c̃: c̃ = tanh(x_c + r·(W_hc·h + b_hc)), h = z·h + (1 − z)·c̃
      T* hc = rec->hc.data() + t * N * H;
      for (int64_t n = 0; n < N; ++n) {
        T* gn = g + n * G;
        SigmoidInPlace(gn, 2 * H);
        for (int64_t j = 0; j < H; ++j) {
          hc[n * H + j] = hg[n * G + 2 * H + j] + b_hh[2 * H + j];
          gn[2 * H + j] = a[n * G + 2 * H + j] + gn[j] * hc[n * H + j];
        }
        TanhInPlace(gn + 2 * H, H);
        for (int64_t j = 0; j < H; ++j) {
          const T cc = gn[2 * H + j];
          h[n * H + j] = (h[n * H + j] - cc) * gn[H + j] + cc;
        }
      }
    } else if (s.rnn_tanh) {
      TanhInPlace(g, N * G);
      std::copy(g, g + N * G, h.begin());
    } else {
      for (int64_t k = 0; k < N * G; ++k) g[k] = std::max(g[k], T(0));
      std::copy(g, g + N * G, h.begin());
    }
    for (int64_t n = 0; n < N; ++n) {
      std::copy(h.begin() + n * H, h.begin() + (n + 1) * H, y + (t * N + n) * s.dirs * H + dir * H);
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
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": PreState holds ", pre.size(), " tensors; ", s.mode, " takes ", want_states));
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
                      w[2 * n_cells + 2 * c]->data<T>(), w[2 * n_cells + 2 * c + 1]->data<T>(), pre[0]->data<T>() + off,
                      s.lstm ? pre[1]->data<T>() + off : nullptr, y.data(), f.h_last.data() + off,
                      s.lstm ? f.c_last.data() + off : nullptr, &f.records[c]);
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

}  // namespace oar::rnn_fused
