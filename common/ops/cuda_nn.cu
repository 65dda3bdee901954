// Device code of the row-wise ops: softmax over the last axis and its
// gradient, cross entropy (hard and soft labels) and its gradient,
// softmax_with_cross_entropy's gradient, cross_entropy2 and its gradient,
// top_k
// and accuracy. Launch functions are declared in cuda_launch.h. One block
// per row for the reductions (rows of a classifier's output are short).
#include <cfloat>
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_reduce.cuh"

namespace oar {
namespace cuda {
namespace {

// Losses take log(max(p, Tiny)) as the CPU's SafeLog, written so that a
// NaN p stays NaN, as std::max leaves it.
template <typename T>
__device__ T Tiny();
template <>
__device__ float Tiny<float>() {
  return FLT_MIN;
}
template <>
__device__ double Tiny<double>() {
  return DBL_MIN;
}

template <typename T>
__device__ T Lowest();
template <>
__device__ float Lowest<float>() {
  return -FLT_MAX;
}
template <>
__device__ double Lowest<double>() {
  return -DBL_MAX;
}

unsigned RowBlocks(int64_t rows) { return static_cast<unsigned>(rows < 65535 * 16 ? rows : 65535 * 16); }

template <typename T>
__global__ void SoftmaxRowsKernel(const T* x, T* out, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* in = x + r * cols;
    T* o = out + r * cols;
    T m = Lowest<T>();
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = in[c] > m ? in[c] : m;
    m = BlockReduceAll<T, true>(m);
    T s = T(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const T e = exp(in[c] - m);
      o[c] = e;
      s += e;
    }
    s = BlockReduceAll<T>(s);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) o[c] /= s;
  }
}

template <typename T>
__global__ void SoftmaxGradRowsKernel(const T* out, const T* dout, T* dx, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* o = out + r * cols;
    const T* g = dout + r * cols;
    T dot = T(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dot += o[c] * g[c];
    dot = BlockReduceAll<T>(dot);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) dx[r * cols + c] = o[c] * (g[c] - dot);
  }
}

template <typename T>
__global__ void CrossEntropyHardKernel(const T* x, const int64_t* label, T* y, int64_t rows, int64_t cols,
                                       int64_t ignore, int64_t* bad_row) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t l = label[r];
    if (l == ignore) {
      y[r] = T(0);
    } else if (l < 0 || l >= cols) {
      y[r] = T(0);
      atomicMin(reinterpret_cast<long long*>(bad_row), static_cast<long long>(r));
    } else {
      const T p = x[r * cols + l];
      y[r] = -log(p < Tiny<T>() ? Tiny<T>() : p);
    }
  }
}

template <typename T>
__global__ void CrossEntropySoftKernel(const T* x, const T* label, T* y, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T s = T(0);
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      const T p = x[r * cols + c];
      s -= label[r * cols + c] * log(p < Tiny<T>() ? Tiny<T>() : p);
    }
    s = BlockReduceAll<T>(s);
    if (threadIdx.x == 0) y[r] = s;
  }
}

template <typename T>
__global__ void CrossEntropyHardGradKernel(const T* x, const int64_t* label, const T* dy, T* dx, int64_t rows,
                                           int64_t cols, int64_t ignore) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const int64_t l = label[r];
    T d = T(0);
    if (l != ignore && l == c) {
      const T p = x[i];
      d = -dy[r] / (p < Tiny<T>() ? Tiny<T>() : p);
    }
    dx[i] = d;
  }
}

template <typename T>
__global__ void CrossEntropySoftGradKernel(const T* x, const T* label, const T* dy, T* dx, int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T p = x[i];
    dx[i] = -dy[i / cols] * label[i] / (p < Tiny<T>() ? Tiny<T>() : p);
  }
}

// One thread per row; pick j takes the best element ordered strictly after
// pick j-1 in (value descending, index ascending).
template <typename T>
__global__ void TopKKernel(const T* x, T* out, int64_t* indices, int64_t rows, int64_t cols, int64_t k) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T* row = x + r * cols;
    T prev_v = T(0);
    int64_t prev_i = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t c = 0; c < cols; ++c) {
        const T v = row[c];
        const bool after_prev = prev_i < 0 || v < prev_v || (v == prev_v && c > prev_i);
        if (after_prev && (best < 0 || v > row[best])) best = c;
      }
      if (best < 0) best = 0;  // k > cols is refused by shape inference
      out[r * k + j] = row[best];
      indices[r * k + j] = best;
      prev_v = row[best];
      prev_i = best;
    }
  }
}

__global__ void AccuracyKernel(const int64_t* indices, const int64_t* label, int64_t rows, int64_t k, float* accuracy,
                               int32_t* correct, int32_t* total) {
  int32_t hits = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    for (int64_t j = 0; j < k; ++j) {
      if (indices[r * k + j] == label[r]) {
        ++hits;
        break;
      }
    }
  }
  hits = BlockReduceAll<int32_t>(hits);
  if (threadIdx.x == 0) {
    accuracy[0] = rows > 0 ? static_cast<float>(hits) / static_cast<float>(rows) : 0.f;
    if (correct != nullptr) correct[0] = hits;
    if (total != nullptr) total[0] = static_cast<int32_t>(rows);
  }
}

// softmax_with_cross_entropy's gradient through the softmax: (p - onehot)
// * dloss for a hard label (a row with the ignored label gets 0), (p -
// label) * dloss for soft labels.
// Without the softmax (use_softmax false: p is the input itself) the loss
// is -sum(label * log p), whose gradient is -label * dloss / p.
template <typename T>
__global__ void SoftmaxXentGradKernel(const T* p, const int64_t* hard, const T* soft, const T* dloss, T* dx,
                                      int64_t rows, int64_t cols, int64_t ignore, bool softmax) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = i / cols, c = i % cols;
    if (soft != nullptr) {
      dx[i] = softmax ? (p[i] - soft[i]) * dloss[r] : -soft[i] * dloss[r] / p[i];
      continue;
    }
    const int64_t l = hard[r];
    if (l == ignore) {
      dx[i] = T(0);
    } else if (softmax) {
      dx[i] = p[i] * dloss[r] - (l == c ? dloss[r] : T(0));
    } else {
      dx[i] = l == c ? -dloss[r] / p[i] : T(0);
    }
  }
}

// cross_entropy2: Y = -log(max(X[label], tiny)) and MatchX = X[label] per
// row, both 0 on an ignored row; a label out of range marks its row.
template <typename T>
__global__ void CrossEntropy2Kernel(const T* x, const int64_t* label, T* y, T* match, int64_t rows, int64_t cols,
                                    int64_t ignore, int64_t* bad_row) {
  for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; r < rows;
       r += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t l = label[r];
    if (l == ignore || l < 0 || l >= cols) {
      y[r] = match[r] = T(0);
      if (l != ignore) atomicMin(reinterpret_cast<long long*>(bad_row), static_cast<long long>(r));
      continue;
    }
    const T p = x[r * cols + l];
    match[r] = p;
    y[r] = -log(p < Tiny<T>() ? Tiny<T>() : p);
  }
}

// dX = -dY / MatchX at the label, 0 elsewhere and on an ignored row.
template <typename T>
__global__ void CrossEntropy2GradKernel(const T* match, const int64_t* label, const T* dy, T* dx, int64_t rows,
                                        int64_t cols, int64_t ignore) {
  const int64_t total = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const int64_t l = label[r];
    dx[i] = l != ignore && l == c ? -dy[r] / match[r] : T(0);
  }
}

}  // namespace

template <typename T>
void SoftmaxRows(const T* x, T* out, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows > 0 && cols > 0) SoftmaxRowsKernel<T><<<RowBlocks(rows), kThreads, 0, s>>>(x, out, rows, cols);
}

template <typename T>
void SoftmaxGradRows(const T* out, const T* dout, T* dx, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows > 0 && cols > 0) SoftmaxGradRowsKernel<T><<<RowBlocks(rows), kThreads, 0, s>>>(out, dout, dx, rows, cols);
}

template <typename T>
void CrossEntropyHard(const T* x, const int64_t* label, T* y, int64_t rows, int64_t cols, int64_t ignore,
                      int64_t* bad_row, cudaStream_t s) {
  if (rows > 0) CrossEntropyHardKernel<T><<<GridFor(rows), kThreads, 0, s>>>(x, label, y, rows, cols, ignore, bad_row);
}

template <typename T>
void CrossEntropySoft(const T* x, const T* label, T* y, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows > 0) CrossEntropySoftKernel<T><<<RowBlocks(rows), kThreads, 0, s>>>(x, label, y, rows, cols);
}

template <typename T>
void CrossEntropyHardGrad(const T* x, const int64_t* label, const T* dy, T* dx, int64_t rows, int64_t cols,
                          int64_t ignore, cudaStream_t s) {
  if (rows * cols > 0) {
    CrossEntropyHardGradKernel<T><<<GridFor(rows * cols), kThreads, 0, s>>>(x, label, dy, dx, rows, cols, ignore);
  }
}

template <typename T>
void CrossEntropySoftGrad(const T* x, const T* label, const T* dy, T* dx, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows * cols > 0) {
    CrossEntropySoftGradKernel<T><<<GridFor(rows * cols), kThreads, 0, s>>>(x, label, dy, dx, rows, cols);
  }
}

template <typename T>
void SoftmaxXentGrad(const T* p, const int64_t* hard, const T* soft, const T* dloss, T* dx, int64_t rows, int64_t cols,
                     int64_t ignore, bool softmax, cudaStream_t s) {
  if (rows * cols > 0) {
    SoftmaxXentGradKernel<T>
        <<<GridFor(rows * cols), kThreads, 0, s>>>(p, hard, soft, dloss, dx, rows, cols, ignore, softmax);
  }
}

template <typename T>
void CrossEntropy2(const T* x, const int64_t* label, T* y, T* match, int64_t rows, int64_t cols, int64_t ignore,
                   int64_t* bad_row, cudaStream_t s) {
  if (rows > 0)
    CrossEntropy2Kernel<T><<<GridFor(rows), kThreads, 0, s>>>(x, label, y, match, rows, cols, ignore, bad_row);
}

template <typename T>
void CrossEntropy2Grad(const T* match, const int64_t* label, const T* dy, T* dx, int64_t rows, int64_t cols,
                       int64_t ignore, cudaStream_t s) {
  if (rows * cols > 0) {
    CrossEntropy2GradKernel<T><<<GridFor(rows * cols), kThreads, 0, s>>>(match, label, dy, dx, rows, cols, ignore);
  }
}

template <typename T>
void TopK(const T* x, T* out, int64_t* indices, int64_t rows, int64_t cols, int64_t k, cudaStream_t s) {
  if (rows > 0 && k > 0) TopKKernel<T><<<GridFor(rows), kThreads, 0, s>>>(x, out, indices, rows, cols, k);
}

void Accuracy(const int64_t* indices, const int64_t* label, int64_t rows, int64_t k, float* accuracy, int32_t* correct,
              int32_t* total, cudaStream_t s) {
  AccuracyKernel<<<1, 1024, 0, s>>>(indices, label, rows, k, accuracy, correct, total);
}

template void SoftmaxRows<float>(const float*, float*, int64_t, int64_t, cudaStream_t);
template void SoftmaxGradRows<float>(const float*, const float*, float*, int64_t, int64_t, cudaStream_t);
template void CrossEntropyHard<float>(const float*, const int64_t*, float*, int64_t, int64_t, int64_t, int64_t*,
                                      cudaStream_t);
template void CrossEntropySoft<float>(const float*, const float*, float*, int64_t, int64_t, cudaStream_t);
template void CrossEntropyHardGrad<float>(const float*, const int64_t*, const float*, float*, int64_t, int64_t, int64_t,
                                          cudaStream_t);
template void CrossEntropySoftGrad<float>(const float*, const float*, const float*, float*, int64_t, int64_t,
                                          cudaStream_t);
template void SoftmaxXentGrad<float>(const float*, const int64_t*, const float*, const float*, float*, int64_t, int64_t,
                                     int64_t, bool, cudaStream_t);
template void CrossEntropy2<float>(const float*, const int64_t*, float*, float*, int64_t, int64_t, int64_t, int64_t*,
                                   cudaStream_t);
template void CrossEntropy2Grad<float>(const float*, const int64_t*, const float*, float*, int64_t, int64_t, int64_t,
                                       cudaStream_t);
template void TopK<float>(const float*, float*, int64_t*, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace cuda
}  // namespace oar
