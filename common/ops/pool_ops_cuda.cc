// GPU kernels of pool2d and pool2d_grad on cuDNN: max pooling (cuDNN's
// deterministic max), average pooling over the in-image cells (exclusive)
// or over the whole window, global pooling, paddings and strides, with the
// geometry the CPU kernels use (pool_geometry.h). A ceil_mode that adds an
// output row or column has no cuDNN equivalent and is refused by name.
//
// Thread-safety: stateless; a kernel runs on its place's thread.
#include "common/ops/cuda_op_util.h"
#include "common/ops/cudnn_util.h"
#include "common/ops/pool_geometry.h"

namespace oar {
namespace {

struct PoolCall {
  cudnn::TensorDesc x_desc, y_desc;
  cudnn::PoolDesc pool;
};

absl::Status Prepare(const ExecutionContext& ctx, const DDim& x, PoolCall* call) {
  const std::string& type = ctx.op().type;
  OAR_ASSIGN_OR_RETURN(PoolGeom g, PoolGeometry(ctx.op(), x));
  if (g.adaptive) {
    return absl::UnimplementedError(absl::StrCat(type, ": adaptive pooling of X", x.ToString(), " to ", g.oh, "x", g.ow,
                                                 " has windows of unequal sizes, which cuDNN's pooling cannot "
                                                 "produce (it can where the output size divides the input's); run "
                                                 "it on the CPU"));
  }
  const int64_t floor_oh = (g.h - g.kh + 2 * g.ph) / g.sh + 1, floor_ow = (g.w - g.kw + 2 * g.pw) / g.sw + 1;
  if (g.oh != floor_oh || g.ow != floor_ow) {
    return absl::UnimplementedError(absl::StrCat(type, ": ceil_mode adds an output row or column for X", x.ToString(),
                                                 ", which cuDNN's pooling cannot produce; run it on the CPU"));
  }
  const cudnnPoolingMode_t mode = g.is_max      ? CUDNN_POOLING_MAX_DETERMINISTIC
                                  : g.exclusive ? CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING
                                                : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
  const int window[2] = {static_cast<int>(g.kh), static_cast<int>(g.kw)};
  const int pad[2] = {static_cast<int>(g.ph), static_cast<int>(g.pw)};
  const int stride[2] = {static_cast<int>(g.sh), static_cast<int>(g.sw)};
  OAR_RETURN_IF_ERROR(call->pool.Set(type, mode, window, pad, stride));
  OAR_RETURN_IF_ERROR(call->x_desc.Set(type, g.n, g.c, g.h, g.w));
  return call->y_desc.Set(type, g.n, g.c, g.oh, g.ow);
}

absl::Status PoolKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  PoolCall call;
  OAR_RETURN_IF_ERROR(Prepare(ctx, ctx.Input("X")->dims(), &call));
  const float one = 1.f, zero = 0.f;
  return CudnnStatus(cudnnPoolingForward(c->cudnn, call.pool.get(), &one, call.x_desc.get(), x, &zero,
                                         call.y_desc.get(), GpuOut<float>(ctx, "Out")),
                     "pool2d: cudnnPoolingForward");
}

absl::Status PoolGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* y, GpuIn<float>(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const float* dy, GpuIn<float>(ctx, GradVarName("Out")));
  float* dx = GpuOut<float>(ctx, GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  PoolCall call;
  OAR_RETURN_IF_ERROR(Prepare(ctx, ctx.Input("X")->dims(), &call));
  const float one = 1.f, zero = 0.f;
  return CudnnStatus(cudnnPoolingBackward(c->cudnn, call.pool.get(), &one, call.y_desc.get(), y, call.y_desc.get(), dy,
                                          call.x_desc.get(), x, &zero, call.x_desc.get(), dx),
                     "pool2d_grad: cudnnPoolingBackward");
}

}  // namespace

void RegisterCudaPoolKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("pool2d").Kernel<float>(PoolKernel, gpu);
  r->Extend("pool2d_grad").Kernel<float>(PoolGradKernel, gpu);
}

}  // namespace oar
