// GPU kernels of concat, concat_grad and split: one strided device copy
// (cudaMemcpy2DAsync) per piece, on the place's stream. A piece's rows are
// its bytes from `axis` on; there are prod(dims[:axis]) of them.
//
// Thread-safety: stateless; a kernel runs on its place's thread.
#include <vector>

#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

int NormAxis(int axis, int rank) { return axis < 0 ? axis + rank : axis; }

// Copies between `big` and its pieces along `axis` on the GPU; to_big:
// pieces -> big (concat), else big -> pieces (split).
absl::Status StitchOnGpu(const ExecutionContext& ctx, CudaContext* c, Tensor* big, const std::vector<Tensor*>& pieces,
                         int axis, bool to_big) {
  const DDim& d = big->dims();
  if (axis < 0 || axis >= d.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": axis ", ctx.Attr<int32_t>("axis"), " out of range for rank ", d.size()));
  }
  const size_t outer = static_cast<size_t>(d.Product(0, axis));
  const size_t inner = static_cast<size_t>(d.Product(axis + 1, d.size())) * SizeOf(big->dtype());
  const size_t big_row = static_cast<size_t>(d[axis]) * inner;
  char* b = static_cast<char*>(big->raw_data());
  size_t offset = 0;
  for (Tensor* p : pieces) {
    const size_t row = static_cast<size_t>(p->dims()[axis]) * inner;
    char* pp = static_cast<char*>(p->raw_data());
    if (row > 0 && outer > 0) {
      cudaError_t e =
          to_big ? cudaMemcpy2DAsync(b + offset, big_row, pp, row, row, outer, cudaMemcpyDeviceToDevice, c->stream)
                 : cudaMemcpy2DAsync(pp, row, b + offset, big_row, row, outer, cudaMemcpyDeviceToDevice, c->stream);
      OAR_RETURN_IF_ERROR(CudaStatus(e, ctx.op().type + ": copy"));
    }
    offset += row;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ConcatKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  std::vector<Tensor*> pieces;
  for (size_t i = 0; i < ctx.InputSize("X"); ++i) {
    OAR_RETURN_IF_ERROR(GpuIn<T>(ctx, "X", i).status());
    pieces.push_back(const_cast<Tensor*>(ctx.Input("X", i)));  // read only
  }
  Tensor* out = ctx.Output("Out");
  out->mutable_data<T>(ctx.place());
  return StitchOnGpu(ctx, c, out, pieces, NormAxis(ctx.Attr<int32_t>("axis"), out->dims().size()), true);
}

template <typename T>
absl::Status ConcatGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_RETURN_IF_ERROR(GpuIn<T>(ctx, GradVarName("Out")).status());
  Tensor* g = const_cast<Tensor*>(ctx.Input(GradVarName("Out")));  // read only
  std::vector<Tensor*> outs = ctx.MultiOutput(GradVarName("X"));
  std::vector<Tensor> scratch(outs.size());  // for @EMPTY@ pieces
  for (size_t i = 0; i < outs.size(); ++i) {
    if (outs[i] == nullptr) {
      scratch[i].Resize(ctx.Input("X", i)->dims());
      outs[i] = &scratch[i];
    }
    outs[i]->mutable_data<T>(ctx.place());
  }
  return StitchOnGpu(ctx, c, g, outs, NormAxis(ctx.Attr<int32_t>("axis"), g->dims().size()), false);
}

template <typename T>
absl::Status SplitKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_RETURN_IF_ERROR(GpuIn<T>(ctx, "X").status());
  Tensor* x = const_cast<Tensor*>(ctx.Input("X"));  // read only
  std::vector<Tensor*> outs = ctx.MultiOutput("Out");
  for (Tensor* o : outs) o->mutable_data<T>(ctx.place());
  return StitchOnGpu(ctx, c, x, outs, NormAxis(ctx.Attr<int32_t>("axis"), x->dims().size()), false);
}

}  // namespace

void RegisterCudaConcatSplitKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("concat")
      .Kernel<float>(ConcatKernel<float>, gpu)
      .Kernel<double>(ConcatKernel<double>, gpu)
      .Kernel<int64_t>(ConcatKernel<int64_t>, gpu);
  r->Extend("concat_grad").Kernel<float>(ConcatGradKernel<float>, gpu).Kernel<double>(ConcatGradKernel<double>, gpu);
  r->Extend("split")
      .Kernel<float>(SplitKernel<float>, gpu)
      .Kernel<double>(SplitKernel<double>, gpu)
      .Kernel<int64_t>(SplitKernel<int64_t>, gpu);
}

}  // namespace oar
