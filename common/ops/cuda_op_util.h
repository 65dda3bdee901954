// Helpers for the GPU op kernels (*_cuda.cc; CUDA builds only): the place's
// device context, launch-error checks, typed device buffers of inputs and
// outputs, and the registration functions of each GPU kernel file.
//
// Thread-safety: stateless; a kernel runs on its place's thread.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/device/cuda_context.h"
#include "common/framework/op_context.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"

namespace oar {

// The context of the kernel's GPU, made current on this thread.
inline absl::StatusOr<CudaContext*> KernelCuda(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, GetCudaContext(ctx.place().device));
  c->Activate();
  return c;
}

// OK unless the last launch on this thread failed; the error names the op.
inline absl::Status LaunchStatus(const ExecutionContext& ctx) {
  return CudaStatus(cudaGetLastError(), absl::StrCat(ctx.op().type, " on ", ctx.place().ToString()));
}

// Output `slot` as a T buffer on the kernel's GPU (nullptr when absent).
template <typename T>
T* GpuOut(const ExecutionContext& ctx, const std::string& slot, size_t i = 0) {
  Tensor* t = ctx.Output(slot, i);
  return t == nullptr ? nullptr : t->mutable_data<T>(ctx.place());
}

// Input `slot` on the kernel's GPU as T: InvalidArgument naming op and slot
// when missing, of another dtype, or (a caller that bypassed the executor's
// moves) not on this GPU.
template <typename T>
absl::StatusOr<const T*> GpuIn(const ExecutionContext& ctx, const std::string& slot, size_t i = 0) {
  OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, slot, i));
  OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, slot, i, *t));
  if (!(t->place() == ctx.place())) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": input ", InputLabel(ctx.op(), slot, i), " is on ",
                                                   t->place().ToString(), ", the kernel on ", ctx.place().ToString()));
  }
  return t->data<T>();
}

// A hard label outside [0, classes): the loss kernels mark the first such
// row in *bad_row_dev (INT64_MAX when none); reading the mark waits for the
// stream (one small copy per step), so a bad label is an error naming the
// row and the value, as on the CPU (nn_ops_cuda.cc).
absl::Status CheckBadLabel(const ExecutionContext& ctx, CudaContext* c, const int64_t* bad_row_dev,
                           const int64_t* labels_dev, int64_t cols);

// An optimizer's Grad on the kernel's GPU as a dense float buffer of
// Param's size: a dense one as it is; a sparse one (SelectedRows) summed
// into `storage`, zeros where it has no row (selected_rows_ops_cuda.cc).
// InvalidArgument naming the op when sizes, height or placement disagree.
absl::StatusOr<const float*> GpuOptimizerGrad(const ExecutionContext& ctx, const Tensor& param, Tensor* storage);
// A sparse Grad merged on the kernel's GPU, for the updates that touch only
// its rows: the distinct rows, sorted (int64, on the GPU), and their summed
// values [count, width] (selected_rows_ops_cuda.cc). count 0 for a Grad
// with no rows.
struct GpuMergedGrad {
  Tensor rows, values;
  int64_t count = 0, width = 0;
};
absl::StatusOr<GpuMergedGrad> GpuMergedSparseGrad(const ExecutionContext& ctx, const Tensor& param);

// sum with a sparse (SelectedRows) input, as the CPU kernel: every input
// sparse gives their rows and values joined; otherwise the dense inputs'
// sum with each sparse one's rows added in (selected_rows_ops_cuda.cc).
absl::Status GpuSumWithSparse(const ExecutionContext& ctx);

void RegisterCudaMathKernels(OpRegistry* r);          // math_ops_cuda.cc: mul, matmul, matmul_v2
void RegisterCudaPointwiseKernels(OpRegistry* r);     // pointwise_ops_cuda.cc
void RegisterCudaNnKernels(OpRegistry* r);            // nn_ops_cuda.cc: losses, metrics
void RegisterCudaSoftmaxKernels(OpRegistry* r);       // softmax_ops_cuda.cc: softmax, softmax_with_cross_entropy
void RegisterCudaTensorKernels(OpRegistry* r);        // tensor_ops_cuda.cc: cast, increment, dropout, transpose2
void RegisterCudaConvKernels(OpRegistry* r);          // conv_ops_cuda.cc: conv2d on cuDNN
void RegisterCudaPoolKernels(OpRegistry* r);          // pool_ops_cuda.cc: pool2d on cuDNN
void RegisterCudaBatchNormKernels(OpRegistry* r);     // batch_norm_ops_cuda.cc: batch_norm on cuDNN
void RegisterCudaConcatSplitKernels(OpRegistry* r);   // concat_split_ops_cuda.cc
void RegisterCudaSparseKernels(OpRegistry* r);        // sparse_ops_cuda.cc: lookup_table
void RegisterCudaSelectedRowsKernels(OpRegistry* r);  // selected_rows_ops_cuda.cc: merge_selected_rows
void RegisterCudaReduceKernels(OpRegistry* r);        // reduce_ops_cuda.cc: reduce_sum, reduce_mean, clip
void RegisterCudaOptimizerKernels(OpRegistry* r);     // optimizer_ops_cuda.cc: every update op
void RegisterCudaControlKernels(OpRegistry* r);       // control_ops_cuda.cc: comparisons, logic, assign
void RegisterCudaSequenceKernels(OpRegistry* r);      // sequence_ops_cuda.cc: sequence_pool
void RegisterCudaFusedKernels(OpRegistry* r);         // fused_ops_cuda.cc: fused_elemwise_activation

}  // namespace oar
