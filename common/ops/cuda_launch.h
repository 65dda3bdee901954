// The device kernels of the op library (CUDA builds only), as plain launch
// functions: pointers to device memory, sizes, the place's stream. The op
// kernels (*_cuda.cc, host code) check shapes and dtypes, then call these;
// the device code (*.cu) sees nothing of the framework, so nvcc compiles
// only what it must. Every launch is asynchronous on `s`; a launch error
// surfaces through cudaGetLastError (LaunchStatus in cuda_op_util.h).
//
// Thread-safety: launches on one stream are ordered; nothing is shared.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "common/ops/sequence_pool_type.h"

namespace oar {
namespace cuda {

// ---- fill, scale, sums ----
template <typename T>
void Fill(T* out, int64_t n, T value, cudaStream_t s);
// out[i] = scale * (*src) for i < n (a value that lives on the device).
template <typename T>
void FillFromDevice(T* out, int64_t n, const T* src, T scale, cudaStream_t s);
// out = a * x + b (after) or a * (x + b).
template <typename T>
void Scale(const T* x, T* out, int64_t n, T a, T b, bool bias_after_scale, cudaStream_t s);
// out[0] = scale * sum(x[0..n)); one block.
template <typename T>
void SumAll(const T* x, int64_t n, T scale, T* out, cudaStream_t s);
// out[i] += x[i].
template <typename T>
void AddTo(const T* x, T* out, int64_t n, cudaStream_t s);

// ---- reduce over axes, clip (cuda_reduce_axes.cu) ----
constexpr int kMaxReduceRank = 8;
// A row-major input of `rank` dims; reduced[i] marks the folded axes.
struct ReduceLayout {
  int rank = 0;
  int64_t dims[kMaxReduceRank] = {};
  bool reduced[kMaxReduceRank] = {};
};
// out[o] = scale * sum of the input elements that map to o (the input index
// with reduced coordinates dropped); out_n output elements.
template <typename T>
void ReduceAxes(const T* x, T* out, const ReduceLayout& l, int64_t out_n, T scale, cudaStream_t s);
// dx[e] = scale * g[o(e)] for every input element e (x_n of them).
template <typename T>
void ReduceAxesGrad(const T* g, T* dx, const ReduceLayout& l, int64_t x_n, T scale, cudaStream_t s);

// clip: out = min(max(x, lo), hi); its gradient passes g where lo < x < hi.
template <typename T>
void Clip(const T* x, T lo, T hi, T* out, int64_t n, cudaStream_t s);
template <typename T>
void ClipGrad(const T* x, const T* g, T lo, T hi, T* dx, int64_t n, cudaStream_t s);
// clip_by_norm: out = x * max_norm / ||x|| when ||x|| > max_norm, else x;
// `scratch` is one element on the device.
template <typename T>
void ClipByNorm(const T* x, T max_norm, T* scratch, T* out, int64_t n, cudaStream_t s);

// ---- elementwise binary ops with Fluid's [pre, n, post] broadcast ----
enum class Binary { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin };
// out[e] = f(x[e], y[(e / post) % n]); e < pre * n * post.
template <typename T>
void ElementwiseForward(Binary f, const T* x, const T* y, T* out, int64_t pre, int64_t n, int64_t post, cudaStream_t s);
// dx[e] = dF/dx at e (x may be null except for kPow; out is unused).
// ElementwiseGradY reads out for kDiv only; x may be null for kAdd, kSub and kDiv
// (Fluid 1.3-1.6 give their grads no X).
template <typename T>
void ElementwiseGradX(Binary f, const T* x, const T* y, const T* out, const T* dout, T* dx, int64_t pre, int64_t n,
                      int64_t post, cudaStream_t s);
// dy[j] = sum over i < pre, k < post of dF/dy at e = (i * n + j) * post + k.
template <typename T>
void ElementwiseGradY(Binary f, const T* x, const T* y, const T* out, const T* dout, T* dy, int64_t pre, int64_t n,
                      int64_t post, cudaStream_t s);

// ---- activations and unary math (cuda_math.cu) ----
enum class Activation { kRelu, kSigmoid, kTanh, kExp, kSqrt, kSquare, kCos, kAbs, kFloor, kCeil, kSign };
template <typename T>
void ActivationForward(Activation a, const T* x, T* out, int64_t n, cudaStream_t s);
// dx from `src`, which is Out for relu, sigmoid, tanh, exp and sqrt and X
// for square, cos and abs, as Fluid's grad ops carry; the piecewise-constant
// floor, ceil and sign give zeros.
template <typename T>
void ActivationGrad(Activation a, const T* src, const T* dout, T* dx, int64_t n, cudaStream_t s);
// fused_elemwise_activation in one pass: out[e] = act(x[e] + y[(e / post) %
// n]) over pre * n * post elements; inter (may be null) gets the sums.
template <typename T>
void FusedAddActivation(Activation a, const T* x, const T* y, T* out, T* inter, int64_t pre, int64_t n, int64_t post,
                        cudaStream_t s);

// ---- comparisons and logic (cuda_math.cu): Y as long as X, or one value ----
enum class Compare { kLess, kLessEqual, kGreater, kGreaterEqual, kEqual, kNotEqual };
// out[i] = x[i] <op> y[y_scalar ? 0 : i].
template <typename T>
void CompareOp(Compare c, const T* x, const T* y, bool y_scalar, bool* out, int64_t n, cudaStream_t s);
enum class Logic { kNot, kAnd, kOr, kXor };
// y is unused (may be null) for kNot.
void LogicOp(Logic l, const bool* x, const bool* y, bool y_scalar, bool* out, int64_t n, cudaStream_t s);

// ---- softmax over the last axis, cross entropy, top_k, accuracy ----
template <typename T>
void SoftmaxRows(const T* x, T* out, int64_t rows, int64_t cols, cudaStream_t s);
template <typename T>
void SoftmaxGradRows(const T* out, const T* dout, T* dx, int64_t rows, int64_t cols, cudaStream_t s);
// y[r] = -log(max(x[r, label[r]], tiny)), 0 where label[r] == ignore. A label
// outside [0, cols) other than `ignore` gives 0 and stores its row in
// *bad_row, which must hold INT64_MAX before (the smallest such row wins).
template <typename T>
void CrossEntropyHard(const T* x, const int64_t* label, T* y, int64_t rows, int64_t cols, int64_t ignore,
                      int64_t* bad_row, cudaStream_t s);
template <typename T>
void CrossEntropySoft(const T* x, const T* label, T* y, int64_t rows, int64_t cols, cudaStream_t s);
template <typename T>
void CrossEntropyHardGrad(const T* x, const int64_t* label, const T* dy, T* dx, int64_t rows, int64_t cols,
                          int64_t ignore, cudaStream_t s);
template <typename T>
void CrossEntropySoftGrad(const T* x, const T* label, const T* dy, T* dx, int64_t rows, int64_t cols, cudaStream_t s);
// softmax_with_cross_entropy's Logits gradient from its Softmax p: (p -
// onehot(hard[r])) * dloss[r], 0 on a row whose label is `ignore`; with
// soft labels (hard null), (p - soft) * dloss[r]. Without `softmax` (p was
// the input itself), -onehot * dloss[r] / p, or -soft * dloss[r] / p.
template <typename T>
void SoftmaxXentGrad(const T* p, const int64_t* hard, const T* soft, const T* dloss, T* dx, int64_t rows, int64_t cols,
                     int64_t ignore, bool softmax, cudaStream_t s);
// cross_entropy2: y[r] = -log(max(match[r], tiny)) with match[r] = x[r,
// label[r]]; both 0 where label[r] == ignore. A label out of range gives 0
// and stores its row in *bad_row (INT64_MAX before; the smallest wins).
template <typename T>
void CrossEntropy2(const T* x, const int64_t* label, T* y, T* match, int64_t rows, int64_t cols, int64_t ignore,
                   int64_t* bad_row, cudaStream_t s);
// dx[r, label[r]] = -dy[r] / match[r]; 0 elsewhere and on ignored rows.
template <typename T>
void CrossEntropy2Grad(const T* match, const int64_t* label, const T* dy, T* dx, int64_t rows, int64_t cols,
                       int64_t ignore, cudaStream_t s);
// The k largest of each row, larger first, the lower index first on ties.
template <typename T>
void TopK(const T* x, T* out, int64_t* indices, int64_t rows, int64_t cols, int64_t k, cudaStream_t s);
// accuracy[0] = correct / rows, correct[0], total[0] (correct/total may be null).
void Accuracy(const int64_t* indices, const int64_t* label, int64_t rows, int64_t k, float* accuracy, int32_t* correct,
              int32_t* total, cudaStream_t s);

// ---- optimizers (learning rate and beta powers read on the device) ----
template <typename T>
void Sgd(const T* p, const T* g, const T* lr, T* pout, int64_t n, cudaStream_t s);
template <typename T>
void Momentum(const T* p, const T* g, const T* v, const T* lr, T mu, bool nesterov, T rescale, T decay, T* pout,
              T* vout, int64_t n, cudaStream_t s);
// Fluid's bias-corrected Adam; beta*_pow_out (may be null) get pow * beta.
// With n 0 only the powers advance (g may then be null).
template <typename T>
void Adam(const T* p, const T* g, const T* lr, const T* m1, const T* m2, const T* beta1_pow, const T* beta2_pow, T b1,
          T b2, T eps, T* pout, T* m1out, T* m2out, T* beta1_pow_out, T* beta2_pow_out, int64_t n, cudaStream_t s);

// ---- the other update ops (cuda_optimizers.cu), Fluid's formulas ----
// adagrad (decayed: decayed_adagrad's moment decay * m + (1 - decay) * g²).
template <typename T>
void Adagrad(const T* p, const T* g, const T* mom, const T* lr, T decay, bool decayed, T eps, T* pout, T* mout,
             int64_t n, cudaStream_t s);
template <typename T>
void Adamax(const T* p, const T* g, const T* lr, const T* mom, const T* inf, const T* beta1_pow, T b1, T b2, T eps,
            T* pout, T* mout, T* iout, int64_t n, cudaStream_t s);
// Centered when mg (MeanGrad) is given; mgout then gets its update.
template <typename T>
void Rmsprop(const T* p, const T* g, const T* ms, const T* mom, const T* mg, const T* lr, T rho, T eps, T mu, T* pout,
             T* msout, T* mout, T* mgout, int64_t n, cudaStream_t s);
template <typename T>
void Ftrl(const T* p, const T* g, const T* sq, const T* lin, const T* lr, T l1, T l2, T power, T* pout, T* sqout,
          T* linout, int64_t n, cudaStream_t s);

// lars_momentum; `norms` is 2 elements of scratch on the device.
template <typename T>
void LarsMomentum(const T* p, const T* g, const T* v, const T* lr, T mu, T coeff, T wd, T* norms, T* pout, T* vout,
                  int64_t n, cudaStream_t s);

// ---- embeddings and sparse gradients (cuda_sparse.cu) ----
// Padding: `pad` is padding_idx, any value (negative too), or -1 for none;
// the caller has checked that every other id is a row of the table (so no
// id is -1 without padding).
// out[i, :] = table[ids[i], :] for i < n, zeros where ids[i] == pad.
template <typename T>
void GatherRows(const T* table, const int64_t* ids, T* out, int64_t n, int64_t width, int64_t pad, cudaStream_t s);
// dense[rows[i], :] += value[i, :] for i < n, skipping rows[i] == pad;
// atomic, so a repeated row gets the sum.
template <typename T>
void ScatterAddRows(const T* value, const int64_t* rows, T* dense, int64_t n, int64_t width, int64_t pad,
                    cudaStream_t s);
// v[i, :] = 0 where ids[i] == pad (nothing when pad is -1).
template <typename T>
void ZeroPaddedRows(T* v, const int64_t* ids, int64_t n, int64_t width, int64_t pad, cudaStream_t s);
// The rows-only updates, in place on rows[0..n) (distinct) of a [*, width]
// parameter (and its state), the merged gradient g [n, width] compact:
// sgd, adagrad, and lazy Adam.
template <typename T>
void SgdRows(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr, T* p, cudaStream_t s);
template <typename T>
void AdagradRows(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr, T eps, T* p, T* mom,
                 cudaStream_t s);
// With `advanced`, Adam's step reads the powers times β1/β2 (see
// AdamBiasCorrected).
template <typename T>
void AdamRows(const int64_t* rows, int64_t n, int64_t width, const T* g, const T* lr, const T* beta1_pow,
              const T* beta2_pow, T b1, T b2, T eps, bool advanced, T* p, T* m1, T* m2, cudaStream_t s);
// Non-lazy Adam from a sparse gradient, the rows it does not name (of
// `height`): moments decay, and the parameter steps by them with ε unscaled,
// as Paddle's CPU kernel. `mask` is scratch of `height` bytes on the device.
template <typename T>
void AdamRowsWithoutGrad(const int64_t* rows, int64_t n, int64_t height, int64_t width, const T* lr, const T* beta1_pow,
                         const T* beta2_pow, T b1, T b2, T eps, bool advanced, uint8_t* mask, T* p, T* m1, T* m2,
                         cudaStream_t s);

// ---- sequence_pool over a LoD level (cuda_sequence.cu) ----
// Sequence s is rows [offsets[s], offsets[s + 1]) of x [rows, width]:
// out[s, :] pools them; an empty one gives `pad` (and max_index -1).
// max_index (int32, may be null) is the row MAX took, per element.
template <typename T>
void SequencePoolForward(SequencePool p, const T* x, const int64_t* offsets, int64_t seqs, int64_t width, T pad, T* out,
                         int32_t* max_index, cudaStream_t s);
// dx [rows, width], which the caller has zeroed, gets each sequence's share
// of dout [seqs, width]. A max_index outside its sequence writes nothing and
// stores its flat position s * width + k in *bad (INT64_MAX before; the
// smallest wins).
template <typename T>
void SequencePoolGrad(SequencePool p, const T* dout, const int64_t* offsets, const int32_t* max_index, int64_t seqs,
                      int64_t width, T* dx, int64_t* bad, cudaStream_t s);

// ---- random: map cuRAND's (0, 1] uniforms to [lo, hi) ----
template <typename T>
void AffineUniform(T* p, int64_t n, T lo, T hi, cudaStream_t s);

// ---- cast, increment, dropout, batch-norm statistics (cuda_tensor.cu) ----
// out[i] = static_cast<Out>(x[i]); In and Out among float, double, int32,
// int64, bool.
template <typename In, typename Out>
void Cast(const In* x, Out* out, int64_t n, cudaStream_t s);
// out[0] = x[0] + step (out may be x).
template <typename T>
void Increment(const T* x, T* out, T step, cudaStream_t s);
// On entry mask holds cuRAND's (0, 1] uniforms u; on return mask[i] is 0
// where 1 - u < p (dropped) and 1 elsewhere, and y = x * mask * keep_scale.
template <typename T>
void DropoutMask(const T* x, T* mask, T* y, int64_t n, float p, T keep_scale, cudaStream_t s);
// out[i] = g[i] * mask[i] * k.
template <typename T>
void MaskedScale(const T* g, const T* mask, T k, T* out, int64_t n, cudaStream_t s);
// transpose: out (row-major over out_dims) takes x's element whose offset
// is the sum over i of coordinate i times src_strides[i] (x's stride of
// the axis that output axis i takes).
struct PermuteLayout {
  int rank = 0;
  int64_t out_dims[8] = {};
  int64_t src_strides[8] = {};
};
template <typename T>
void Permute(const T* x, const PermuteLayout& l, T* out, int64_t n, cudaStream_t s);
// out[i] = 1 / sqrt(var[i] + eps).
template <typename T>
void InvStd(const T* var, T eps, T* out, int64_t n, cudaStream_t s);

}  // namespace cuda
}  // namespace oar
