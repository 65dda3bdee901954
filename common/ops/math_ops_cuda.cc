// GPU kernels of mul, matmul and matmul_v2 (rank 2, batched over equal
// leading dimensions, a matrix shared by a batch, vectors) through cuBLAS
// on the place's stream. Tensors are row-major and cuBLAS is column-major,
// so C = A·B is computed as Cᵀ = Bᵀ·Aᵀ.
// float32 only; TF32 stays off unless --gpu_allow_tf32 (cuda_context).
#include <algorithm>

#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

// Row-major C[m,n] = alpha · op(A) · op(B) + beta · C, op(A) [m,k], op(B) [k,n];
// `batch` products of strides a_stride, b_stride (0: shared), c_stride.
absl::Status Gemm(const ExecutionContext& ctx, CudaContext* c, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, const float* b, float beta, float* out, int64_t batch = 1,
                  int64_t a_stride = 0, int64_t b_stride = 0, int64_t c_stride = 0) {
  if (m == 0 || n == 0) return absl::OkStatus();
  // k == 0 leaves C = beta · C; cuBLAS still wants leading dimensions >= 1.
  const int lda = static_cast<int>(std::max<int64_t>(1, ta ? m : k));
  const int ldb = static_cast<int>(std::max<int64_t>(1, tb ? k : n));
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  const std::string what = absl::StrCat(ctx.op().type, ": cublasSgemm [", m, "x", k, "]·[", k, "x", n, "]");
  if (batch == 1) {
    return CublasStatus(cublasSgemm(c->cublas, opb, opa, n, m, k, &alpha, b, ldb, a, lda, &beta, out, n), what);
  }
  return CublasStatus(cublasSgemmStridedBatched(c->cublas, opb, opa, n, m, k, &alpha, b, ldb, b_stride, a, lda,
                                                a_stride, &beta, out, n, c_stride, batch),
                      what);
}

absl::Status MulKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Y"));
  const DDim x2 = ctx.Input("X")->dims().FlattenTo2D(ctx.Attr<int32_t>("x_num_col_dims"));
  const DDim y2 = ctx.Input("Y")->dims().FlattenTo2D(ctx.Attr<int32_t>("y_num_col_dims"));
  return Gemm(ctx, c, false, false, x2[0], y2[1], x2[1], 1.f, x, y, 0.f, GpuOut<float>(ctx, "Out"));
}

absl::Status MulGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  const DDim x2 = ctx.Input("X")->dims().FlattenTo2D(ctx.Attr<int32_t>("x_num_col_dims"));
  const DDim y2 = ctx.Input("Y")->dims().FlattenTo2D(ctx.Attr<int32_t>("y_num_col_dims"));
  const int64_t m = x2[0], k = x2[1], n = y2[1];
  if (float* dx = GpuOut<float>(ctx, GradVarName("X"))) {  // dX = dOut · Yᵀ
    OAR_RETURN_IF_ERROR(Gemm(ctx, c, false, true, m, k, n, 1.f, g, y, 0.f, dx));
  }
  if (float* dy = GpuOut<float>(ctx, GradVarName("Y"))) {  // dY = Xᵀ · dOut
    OAR_RETURN_IF_ERROR(Gemm(ctx, c, true, false, k, n, m, 1.f, x, g, 0.f, dy));
  }
  return absl::OkStatus();
}

// matmul and matmul_v2 of X [..., m, k] and Y [..., k, n]: equal batch
// dimensions, or one side a plain matrix (rank 2) shared by every batch of
// the other; a vector operand is a row (X) or a column (Y), as on the CPU
// (matmul_v2 ignores the transpose flags on a vector). Batch dimensions that
// differ otherwise stay on the CPU.
struct MatmulShape {
  int64_t batch, m, n, k;
  bool tx, ty;
  bool x_shared = false, y_shared = false;  // one matrix for every batch
};

absl::StatusOr<MatmulShape> MatmulShapeOf(const ExecutionContext& ctx) {
  DDim x = ctx.Input("X")->dims();
  DDim y = ctx.Input("Y")->dims();
  const bool v2 = ctx.op().type.rfind("matmul_v2", 0) == 0;
  MatmulShape s;
  s.tx = ctx.Attr<bool>(v2 ? "trans_x" : "transpose_X");
  s.ty = ctx.Attr<bool>(v2 ? "trans_y" : "transpose_Y");
  if (x.size() == 1) {
    x = DDim{1, x[0]};
    s.tx = s.tx && !v2;
  }
  if (y.size() == 1) {
    y = DDim{y[0], 1};
    s.ty = s.ty && !v2;
  }
  const int xr = x.size(), yr = y.size();
  const int64_t xb = xr >= 2 ? x.Product(0, xr - 2) : 0, yb = yr >= 2 ? y.Product(0, yr - 2) : 0;
  s.x_shared = xr == 2 && yr > 2;
  s.y_shared = yr == 2 && xr > 2;
  if (xr < 2 || yr < 2 || (!s.x_shared && !s.y_shared && (xr != yr || xb != yb))) {
    return absl::UnimplementedError(absl::StrCat(ctx.op().type,
                                                 ": the GPU kernel takes equal batch dimensions, or a "
                                                 "matrix against a batch; got X",
                                                 ctx.Input("X")->dims().ToString(), " and Y",
                                                 ctx.Input("Y")->dims().ToString()));
  }
  s.batch = s.x_shared ? yb : xb;
  s.m = s.tx ? x[xr - 1] : x[xr - 2];
  s.k = s.tx ? x[xr - 2] : x[xr - 1];
  s.n = s.ty ? y[yr - 2] : y[yr - 1];
  return s;
}

// As Gemm over `batch` products, but when `shared_out` the products are
// summed into the one matrix `out` (the gradient of a shared operand).
absl::Status GemmInto(const ExecutionContext& ctx, CudaContext* c, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      float alpha, const float* a, const float* b, float* out, int64_t batch, int64_t a_stride,
                      int64_t b_stride, int64_t c_stride, bool shared_out) {
  if (!shared_out) return Gemm(ctx, c, ta, tb, m, n, k, alpha, a, b, 0.f, out, batch, a_stride, b_stride, c_stride);
  if (batch == 0) {
    return CudaStatus(cudaMemsetAsync(out, 0, sizeof(float) * static_cast<size_t>(m * n), c->stream), ctx.op().type);
  }
  for (int64_t i = 0; i < batch; ++i) {
    OAR_RETURN_IF_ERROR(
        Gemm(ctx, c, ta, tb, m, n, k, alpha, a + i * a_stride, b + i * b_stride, i == 0 ? 0.f : 1.f, out));
  }
  return absl::OkStatus();
}

absl::Status MatmulKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(MatmulShape s, MatmulShapeOf(ctx));
  const float alpha = ctx.op().HasAttr("alpha") ? ctx.Attr<float>("alpha") : 1.f;
  return Gemm(ctx, c, s.tx, s.ty, s.m, s.n, s.k, alpha, x, y, 0.f, GpuOut<float>(ctx, "Out"), s.batch,
              s.x_shared ? 0 : s.m * s.k, s.y_shared ? 0 : s.k * s.n, s.m * s.n);
}

absl::Status MatmulGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Y"));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  OAR_ASSIGN_OR_RETURN(MatmulShape s, MatmulShapeOf(ctx));
  const float alpha = ctx.op().HasAttr("alpha") ? ctx.Attr<float>("alpha") : 1.f;
  const int64_t mk = s.x_shared ? 0 : s.m * s.k, kn = s.y_shared ? 0 : s.k * s.n, mn = s.m * s.n;
  if (float* dx = GpuOut<float>(ctx, GradVarName("X"))) {
    if (!s.tx) {  // dX[m,k] = dO · op(Y)ᵀ
      OAR_RETURN_IF_ERROR(
          GemmInto(ctx, c, false, !s.ty, s.m, s.k, s.n, alpha, g, y, dx, s.batch, mn, kn, s.m * s.k, s.x_shared));
    } else {  // dX[k,m] = op(Y) · dOᵀ
      OAR_RETURN_IF_ERROR(
          GemmInto(ctx, c, s.ty, true, s.k, s.m, s.n, alpha, y, g, dx, s.batch, kn, mn, s.m * s.k, s.x_shared));
    }
  }
  if (float* dy = GpuOut<float>(ctx, GradVarName("Y"))) {
    if (!s.ty) {  // dY[k,n] = op(X)ᵀ · dO
      OAR_RETURN_IF_ERROR(
          GemmInto(ctx, c, !s.tx, false, s.k, s.n, s.m, alpha, x, g, dy, s.batch, mk, mn, s.k * s.n, s.y_shared));
    } else {  // dY[n,k] = dOᵀ · op(X)
      OAR_RETURN_IF_ERROR(
          GemmInto(ctx, c, true, s.tx, s.n, s.k, s.m, alpha, g, x, dy, s.batch, mn, mk, s.k * s.n, s.y_shared));
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterCudaMathKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("mul").Kernel<float>(MulKernel, gpu);
  r->Extend("mul_grad").Kernel<float>(MulGradKernel, gpu);
  r->Extend("matmul").Kernel<float>(MatmulKernel, gpu);
  r->Extend("matmul_grad").Kernel<float>(MatmulGradKernel, gpu);
  r->Extend("matmul_v2").Kernel<float>(MatmulKernel, gpu);
  r->Extend("matmul_v2_grad").Kernel<float>(MatmulGradKernel, gpu);
}

}  // namespace oar
