// GEMM through OpenBLAS's CBLAS interface, row-major. Every matrix product in
// Oar goes through here; nothing hand-writes a GEMM.
//
//   Gemm<float>(false, false, M, N, K, 1.f, A, B, 0.f, C);  // C = A·B
//
// Thread-safety: safe for concurrent use (OpenBLAS is thread-safe);
// SetBlasThreads is process-wide.
#pragma once

#include <cstdint>

namespace oar {

// C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C, row-major and dense
// (leading dimensions implied by the transposition flags).
template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c);

// Number of OpenBLAS threads; 1 when several places compute at once.
void SetBlasThreads(int n);
int GetBlasThreads();

}  // namespace oar
