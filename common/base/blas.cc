#include "common/base/blas.h"

#include <cblas.h>

namespace oar {

template <>
void Gemm<float>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b,
                 float beta, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

template <>
void Gemm<double>(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, const double* b,
                  double beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

void SetBlasThreads(int n) { openblas_set_num_threads(n); }
int GetBlasThreads() { return openblas_get_num_threads(); }

}  // namespace oar
