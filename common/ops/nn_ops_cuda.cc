// GPU kernels of cross_entropy (hard int64 or soft labels), cross_entropy2
// and their gradients, top_k, top_k_v2 and accuracy (the softmax family is
// in softmax_ops_cuda.cc), and CheckBadLabel. Also RegisterCudaKernels,
// which installs every GPU kernel.
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"
#include "common/ops/loss_util.h"
#include "common/ops/ops.h"

namespace oar {

absl::Status CheckBadLabel(const ExecutionContext& ctx, CudaContext* c, const int64_t* bad_row_dev,
                           const int64_t* labels_dev, int64_t cols) {
  int64_t bad_row = 0;
  OAR_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(&bad_row, bad_row_dev, sizeof bad_row, cudaMemcpyDeviceToHost, c->stream),
                 "cross_entropy: label check"));
  OAR_RETURN_IF_ERROR(CudaStatus(cudaStreamSynchronize(c->stream), "cross_entropy: label check"));
  if (bad_row == std::numeric_limits<int64_t>::max()) return absl::OkStatus();
  int64_t value = 0;
  OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpy(&value, labels_dev + bad_row, sizeof value, cudaMemcpyDeviceToHost),
                                 "cross_entropy: label check"));
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": label ", value, " of row ", bad_row,
                                                 " is outside [0, ", cols, ") (input ", InputLabel(ctx.op(), "Label"),
                                                 ")"));
}

namespace {

absl::Status CrossEntropyKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  auto [rows, cols] = loss_util::RowsCols(ctx.Input("X")->dims());
  float* y = GpuOut<float>(ctx, "Y");
  if (ctx.Attr<bool>("soft_label")) {
    OAR_ASSIGN_OR_RETURN(const float* label, GpuIn<float>(ctx, "Label"));
    cuda::CrossEntropySoft<float>(x, label, y, rows, cols, c->stream);
    return LaunchStatus(ctx);
  }
  OAR_ASSIGN_OR_RETURN(const int64_t* label, GpuIn<int64_t>(ctx, "Label"));
  Tensor bad;
  bad.Resize(DDim{1});
  int64_t* bad_row = bad.mutable_data<int64_t>(ctx.place());
  cuda::Fill<int64_t>(bad_row, 1, std::numeric_limits<int64_t>::max(), c->stream);
  cuda::CrossEntropyHard<float>(x, label, y, rows, cols, ctx.Attr<int32_t>("ignore_index"), bad_row, c->stream);
  OAR_RETURN_IF_ERROR(LaunchStatus(ctx));
  return CheckBadLabel(ctx, c, bad_row, label, cols);
}

absl::Status CrossEntropyGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* dy, GpuIn<float>(ctx, GradVarName("Y")));
  float* dx = GpuOut<float>(ctx, GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  auto [rows, cols] = loss_util::RowsCols(ctx.Input("X")->dims());
  if (ctx.Attr<bool>("soft_label")) {
    OAR_ASSIGN_OR_RETURN(const float* label, GpuIn<float>(ctx, "Label"));
    cuda::CrossEntropySoftGrad<float>(x, label, dy, dx, rows, cols, c->stream);
  } else {
    // Labels were checked by the forward kernel; out-of-range ones get 0.
    OAR_ASSIGN_OR_RETURN(const int64_t* label, GpuIn<int64_t>(ctx, "Label"));
    cuda::CrossEntropyHardGrad<float>(x, label, dy, dx, rows, cols, ctx.Attr<int32_t>("ignore_index"), c->stream);
  }
  return LaunchStatus(ctx);
}

// cross_entropy2 (Fluid 1.6's hard-label cross entropy): Y, MatchX (the
// probability at the label, for the gradient) and XShape (X's shape only,
// on the host as the CPU kernel leaves it); labels checked.
absl::Status CrossEntropy2Kernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const int64_t* label, GpuIn<int64_t>(ctx, "Label"));
  auto [rows, cols] = loss_util::RowsCols(ctx.Input("X")->dims());
  if (ctx.Input("Label")->numel() != rows) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": Label has ", ctx.Input("Label")->numel(), " labels for ", rows, " rows of X"));
  }
  if (Tensor* xs = ctx.Output("XShape")) xs->mutable_data<float>();
  Tensor bad;
  bad.Resize(DDim{1});
  int64_t* bad_row = bad.mutable_data<int64_t>(ctx.place());
  cuda::Fill<int64_t>(bad_row, 1, std::numeric_limits<int64_t>::max(), c->stream);
  cuda::CrossEntropy2<float>(x, label, GpuOut<float>(ctx, "Y"), GpuOut<float>(ctx, "MatchX"), rows, cols,
                             ctx.Attr<int32_t>("ignore_index"), bad_row, c->stream);
  OAR_RETURN_IF_ERROR(LaunchStatus(ctx));
  return CheckBadLabel(ctx, c, bad_row, label, cols);
}

absl::Status CrossEntropy2GradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const int64_t* label, GpuIn<int64_t>(ctx, "Label"));
  OAR_ASSIGN_OR_RETURN(const float* match, GpuIn<float>(ctx, "MatchX"));
  OAR_ASSIGN_OR_RETURN(const float* dy, GpuIn<float>(ctx, GradVarName("Y")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  auto [rows, cols] = loss_util::RowsCols(dx->dims());
  if (ctx.Input("Label")->numel() != rows || ctx.Input("MatchX")->numel() != rows) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Label and MatchX need ", rows, " values"));
  }
  cuda::CrossEntropy2Grad<float>(match, label, dy, dx->mutable_data<float>(ctx.place()), rows, cols,
                                 ctx.Attr<int32_t>("ignore_index"), c->stream);
  return LaunchStatus(ctx);
}

absl::Status TopKKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  const DDim& d = ctx.Input("X")->dims();
  if (ctx.op().type == "top_k_v2") {
    const int axis = ctx.Attr<int32_t>("axis");
    if ((axis != -1 && axis != d.size() - 1) || !ctx.Attr<bool>("largest")) {
      return absl::UnimplementedError(
          absl::StrCat("top_k_v2: on the GPU, Oar implements the largest along the last "
                       "axis (got axis=",
                       axis, ", largest=", ctx.Attr<bool>("largest"), "); run it on the CPU"));
    }
  }
  const int64_t k = ctx.Attr<int32_t>("k");
  const int64_t cols = d[d.size() - 1];
  const int64_t rows = cols ? ctx.Input("X")->numel() / cols : 0;
  cuda::TopK<float>(x, GpuOut<float>(ctx, "Out"), GpuOut<int64_t>(ctx, "Indices"), rows, cols, k, c->stream);
  return LaunchStatus(ctx);
}

absl::Status AccuracyKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const int64_t* idx, GpuIn<int64_t>(ctx, "Indices"));
  OAR_ASSIGN_OR_RETURN(const int64_t* label, GpuIn<int64_t>(ctx, "Label"));
  const DDim& d = ctx.Input("Indices")->dims();
  cuda::Accuracy(idx, label, d[0], d[1], GpuOut<float>(ctx, "Accuracy"), GpuOut<int32_t>(ctx, "Correct"),
                 GpuOut<int32_t>(ctx, "Total"), c->stream);
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaNnKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("cross_entropy").Kernel<float>(CrossEntropyKernel, gpu);
  r->Extend("cross_entropy_grad").Kernel<float>(CrossEntropyGradKernel, gpu);
  r->Extend("cross_entropy2").Kernel<float>(CrossEntropy2Kernel, gpu);
  r->Extend("cross_entropy_grad2").Kernel<float>(CrossEntropy2GradKernel, gpu);
  r->Extend("top_k").Kernel<float>(TopKKernel, gpu);
  r->Extend("top_k_v2").Kernel<float>(TopKKernel, gpu);  // the last axis, as on the CPU
  r->Extend("accuracy").Kernel<float>(AccuracyKernel, gpu);
}

void RegisterCudaKernels(OpRegistry* r) {
  RegisterCudaMathKernels(r);
  RegisterCudaPointwiseKernels(r);
  RegisterCudaNnKernels(r);
  RegisterCudaSoftmaxKernels(r);
  RegisterCudaTensorKernels(r);
  RegisterCudaConvKernels(r);
  RegisterCudaPoolKernels(r);
  RegisterCudaBatchNormKernels(r);
  RegisterCudaConcatSplitKernels(r);
  RegisterCudaSparseKernels(r);
  RegisterCudaSelectedRowsKernels(r);
  RegisterCudaReduceKernels(r);
  RegisterCudaOptimizerKernels(r);
  RegisterCudaControlKernels(r);
  RegisterCudaSequenceKernels(r);
  RegisterCudaFusedKernels(r);
}

}  // namespace oar
