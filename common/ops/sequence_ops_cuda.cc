// GPU kernels of sequence_pool and sequence_pool_grad (float32), as the CPU
// kernels (sequence_ops.cc): the LoD stays on the host, where it is checked;
// its last level's offsets go to the GPU with each call (one small copy
// queued on the place's stream). A MaxIndex outside its sequence is an
// error naming the element, as on the CPU, which costs MAX's gradient one
// wait for the stream.
#include <cstdint>
#include <limits>
#include <vector>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"
#include "common/ops/sequence_pool.h"

namespace oar {
namespace {

// The offsets as int64 on the kernel's GPU.
absl::StatusOr<Tensor> OffsetsOnGpu(const ExecutionContext& ctx, const std::vector<size_t>& off) {
  Tensor host =
      MakeTensor<int64_t>(DDim{static_cast<int64_t>(off.size())}, std::vector<int64_t>(off.begin(), off.end()));
  Tensor dev;
  OAR_RETURN_IF_ERROR(host.CopyTo(ctx.place(), &dev));
  return dev;
}

int64_t RowWidth(const Tensor& x) {
  return x.dims()[0] ? x.numel() / x.dims()[0] : x.dims().Product(1, x.dims().size());
}

absl::Status SequencePoolKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  const Tensor& xt = *ctx.Input("X");
  OAR_ASSIGN_OR_RETURN(SequencePool pool, ParseSequencePool(ctx.Attr<std::string>("pooltype")));
  OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, SequenceOffsets(ctx, xt));
  OAR_ASSIGN_OR_RETURN(Tensor offsets, OffsetsOnGpu(ctx, off));
  const int64_t seqs = static_cast<int64_t>(off.size()) - 1;
  DDim od = xt.dims();
  od[0] = seqs;
  Tensor* out = ctx.Output("Out");
  out->Resize(od);
  out->set_lod(LoD(xt.lod().begin(), xt.lod().end() - 1));
  int32_t* max_index = nullptr;
  if (pool == SequencePool::kMax) {
    if (Tensor* mi = ctx.Output("MaxIndex")) {
      mi->Resize(od);
      max_index = mi->mutable_data<int32_t>(ctx.place());
    }
  }
  cuda::SequencePoolForward<float>(pool, x, offsets.data<int64_t>(), seqs, RowWidth(xt), ctx.Attr<float>("pad_value"),
                                   out->mutable_data<float>(ctx.place()), max_index, c->stream);
  return LaunchStatus(ctx);
}

absl::Status SequencePoolGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const Tensor* xt, RequireInput(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  Tensor* dx = ctx.Output(GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  OAR_ASSIGN_OR_RETURN(SequencePool pool, ParseSequencePool(ctx.Attr<std::string>("pooltype")));
  OAR_ASSIGN_OR_RETURN(std::vector<size_t> off, SequenceOffsets(ctx, *xt));
  const int64_t seqs = static_cast<int64_t>(off.size()) - 1;
  DDim od = xt->dims();
  od[0] = seqs;
  const int32_t* max_index = nullptr;
  if (pool == SequencePool::kMax) {
    const Tensor* mi = ctx.Input("MaxIndex");
    if (mi == nullptr || !mi->initialized()) {
      return absl::InvalidArgumentError("sequence_pool_grad: MAX pooling needs MaxIndex");
    }
    OAR_ASSIGN_OR_RETURN(max_index, GpuIn<int32_t>(ctx, "MaxIndex"));
    if (mi->dims() != od) {
      return absl::InvalidArgumentError(absl::StrCat("sequence_pool_grad: input ", InputLabel(ctx.op(), "MaxIndex"),
                                                     " has shape ", mi->dims().ToString(), ", expected ",
                                                     od.ToString()));
    }
  }
  if (ctx.Input(GradVarName("Out"))->dims() != od) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence_pool_grad: input ", InputLabel(ctx.op(), GradVarName("Out")), " has shape ",
                     ctx.Input(GradVarName("Out"))->dims().ToString(), ", expected ", od.ToString()));
  }
  OAR_ASSIGN_OR_RETURN(Tensor offsets, OffsetsOnGpu(ctx, off));
  const int64_t width = RowWidth(*xt);
  dx->Resize(xt->dims());
  dx->set_lod(xt->lod());
  float* d = dx->mutable_data<float>(ctx.place());
  cuda::Fill<float>(d, dx->numel(), 0.f, c->stream);
  Tensor bad;
  int64_t* bad_dev = nullptr;
  if (max_index != nullptr) {
    bad.Resize(DDim{1});
    bad_dev = bad.mutable_data<int64_t>(ctx.place());
    cuda::Fill<int64_t>(bad_dev, 1, std::numeric_limits<int64_t>::max(), c->stream);
  }
  cuda::SequencePoolGrad<float>(pool, g, offsets.data<int64_t>(), max_index, seqs, width, d, bad_dev, c->stream);
  OAR_RETURN_IF_ERROR(LaunchStatus(ctx));
  if (bad_dev == nullptr) return absl::OkStatus();
  Tensor bad_host;
  OAR_RETURN_IF_ERROR(bad.CopyTo(CPUPlace(), &bad_host));  // waits for the stream
  const int64_t o = bad_host.data<int64_t>()[0];
  if (o == std::numeric_limits<int64_t>::max()) return absl::OkStatus();
  const int64_t s = o / width, k = o % width;
  int32_t value = 0;
  OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpy(&value, max_index + o, sizeof value, cudaMemcpyDeviceToHost),
                                 "sequence_pool_grad: MaxIndex check"));
  return absl::InvalidArgumentError(absl::StrCat("sequence_pool_grad: MaxIndex ", value, " at [", s, ", ", k,
                                                 "] is outside sequence ", s, "'s rows [", off[s], ", ", off[s + 1],
                                                 ")"));
}

}  // namespace

void RegisterCudaSequenceKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("sequence_pool").Kernel<float>(SequencePoolKernel, gpu);
  r->Extend("sequence_pool_grad").Kernel<float>(SequencePoolGradKernel, gpu);
}

}  // namespace oar
