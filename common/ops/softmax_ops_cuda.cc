// GPU kernels of softmax and softmax_with_cross_entropy and their
// gradients, along any axis, as the CPU kernels (softmax_ops.cc). The
// device kernels work on rows of classes; a tensor viewed along `axis` as
// [pre, n, post] is such rows when post is 1 (the last axis), and otherwise
// is permuted to [pre, post, n] first and its result permuted back. The
// loss and a hard label, [pre, 1, post], already lie in the rows' order.
#include <cstdint>
#include <limits>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"
#include "common/ops/loss_util.h"

namespace oar {
namespace {

// A tensor along the op's class axis.
struct Classes {
  int64_t pre = 1, n = 1, post = 1;
  int64_t rows() const { return pre * post; }
  bool last() const { return post == 1; }
};

Classes ClassesOf(const ExecutionContext& ctx, const DDim& d) {
  const loss_util::AxisView v = loss_util::ViewAlong(d, ctx.Attr<int32_t>("axis"));
  return {v.pre, v.n, v.post};
}

// x viewed as [a, b, c] into out as [a, c, b].
void SwapLastTwo(const float* x, int64_t a, int64_t b, int64_t c, float* out, cudaStream_t s) {
  cuda::PermuteLayout l;
  l.rank = 3;
  l.out_dims[0] = a;
  l.out_dims[1] = c;
  l.out_dims[2] = b;
  l.src_strides[0] = b * c;
  l.src_strides[1] = 1;
  l.src_strides[2] = c;
  cuda::Permute<float>(x, l, out, a * b * c, s);
}

// `x` [pre, n, post] as rows of classes: itself on the last axis, else a
// permuted copy in `storage`.
const float* AsRows(const ExecutionContext& ctx, CudaContext* c, const float* x, const Classes& k, Tensor* storage) {
  if (k.last()) return x;
  storage->Resize(DDim{k.rows(), k.n});
  float* t = storage->mutable_data<float>(ctx.place());
  SwapLastTwo(x, k.pre, k.n, k.post, t, c->stream);
  return t;
}

// Where rows of classes bound for `out` [pre, n, post] are written: `out`
// itself on the last axis, else `storage` (then FromRows puts them in out).
float* RowsFor(const ExecutionContext& ctx, float* out, const Classes& k, Tensor* storage) {
  if (k.last()) return out;
  storage->Resize(DDim{k.rows(), k.n});
  return storage->mutable_data<float>(ctx.place());
}

void FromRows(CudaContext* c, const float* rows, const Classes& k, float* out) {
  if (!k.last()) SwapLastTwo(rows, k.pre, k.post, k.n, out, c->stream);
}

absl::Status SoftmaxKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "X"));
  const Classes k = ClassesOf(ctx, ctx.Input("X")->dims());
  Tensor x_rows, out_rows;
  float* out = GpuOut<float>(ctx, "Out");
  float* o = RowsFor(ctx, out, k, &out_rows);
  cuda::SoftmaxRows<float>(AsRows(ctx, c, x, k, &x_rows), o, k.rows(), k.n, c->stream);
  FromRows(c, o, k, out);
  return LaunchStatus(ctx);
}

absl::Status SoftmaxGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* out, GpuIn<float>(ctx, "Out"));
  OAR_ASSIGN_OR_RETURN(const float* g, GpuIn<float>(ctx, GradVarName("Out")));
  float* dx = GpuOut<float>(ctx, GradVarName("X"));
  if (dx == nullptr) return absl::OkStatus();
  const Classes k = ClassesOf(ctx, ctx.Input("Out")->dims());
  Tensor out_rows, g_rows, dx_rows;
  float* d = RowsFor(ctx, dx, k, &dx_rows);
  cuda::SoftmaxGradRows<float>(AsRows(ctx, c, out, k, &out_rows), AsRows(ctx, c, g, k, &g_rows), d, k.rows(), k.n,
                               c->stream);
  FromRows(c, d, k, dx);
  return LaunchStatus(ctx);
}

// softmax_with_cross_entropy: the softmax (or, with use_softmax false, the
// input itself), then the cross entropy of it, as the CPU kernel computes
// it (hard labels checked, the ignored label's loss 0).
absl::Status SoftmaxXentKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const float* x, GpuIn<float>(ctx, "Logits"));
  const Classes k = ClassesOf(ctx, ctx.Input("Logits")->dims());
  Tensor x_rows, sm_rows, label_rows;
  float* sm = GpuOut<float>(ctx, "Softmax");
  float* loss = GpuOut<float>(ctx, "Loss");
  float* s = RowsFor(ctx, sm, k, &sm_rows);
  const float* xr = AsRows(ctx, c, x, k, &x_rows);
  if (ctx.Attr<bool>("use_softmax")) {
    cuda::SoftmaxRows<float>(xr, s, k.rows(), k.n, c->stream);
  } else if (s != xr) {  // Paddle 2.x's cross_entropy(use_softmax=False): Logits are already probabilities
    OAR_RETURN_IF_ERROR(CudaStatus(cudaMemcpyAsync(s, xr, sizeof(float) * static_cast<size_t>(k.rows() * k.n),
                                                   cudaMemcpyDeviceToDevice, c->stream),
                                   ctx.op().type));
  }
  FromRows(c, s, k, sm);
  if (ctx.Attr<bool>("soft_label")) {
    OAR_ASSIGN_OR_RETURN(const float* label, GpuIn<float>(ctx, "Label"));
    cuda::CrossEntropySoft<float>(s, AsRows(ctx, c, label, k, &label_rows), loss, k.rows(), k.n, c->stream);
    return LaunchStatus(ctx);
  }
  OAR_ASSIGN_OR_RETURN(const int64_t* label, GpuIn<int64_t>(ctx, "Label"));
  Tensor bad;
  bad.Resize(DDim{1});
  int64_t* bad_row = bad.mutable_data<int64_t>(ctx.place());
  cuda::Fill<int64_t>(bad_row, 1, std::numeric_limits<int64_t>::max(), c->stream);
  cuda::CrossEntropyHard<float>(s, label, loss, k.rows(), k.n, ctx.Attr<int32_t>("ignore_index"), bad_row, c->stream);
  OAR_RETURN_IF_ERROR(LaunchStatus(ctx));
  return CheckBadLabel(ctx, c, bad_row, label, k.n);
}

absl::Status SoftmaxXentGradKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  const bool softmax = ctx.Attr<bool>("use_softmax");
  OAR_ASSIGN_OR_RETURN(const float* sm, GpuIn<float>(ctx, "Softmax"));
  OAR_ASSIGN_OR_RETURN(const float* dloss, GpuIn<float>(ctx, GradVarName("Loss")));
  float* dx = GpuOut<float>(ctx, GradVarName("Logits"));
  if (dx == nullptr) return absl::OkStatus();
  const Classes k = ClassesOf(ctx, ctx.Input("Softmax")->dims());
  Tensor sm_rows, label_rows, dx_rows;
  const float* s = AsRows(ctx, c, sm, k, &sm_rows);
  float* d = RowsFor(ctx, dx, k, &dx_rows);
  const int64_t ignore = ctx.Attr<int32_t>("ignore_index");
  if (ctx.Attr<bool>("soft_label")) {
    OAR_ASSIGN_OR_RETURN(const float* label, GpuIn<float>(ctx, "Label"));
    cuda::SoftmaxXentGrad<float>(s, nullptr, AsRows(ctx, c, label, k, &label_rows), dloss, d, k.rows(), k.n, ignore,
                                 softmax, c->stream);
  } else {
    // Labels were checked by the forward kernel; an out-of-range one matches no class.
    OAR_ASSIGN_OR_RETURN(const int64_t* label, GpuIn<int64_t>(ctx, "Label"));
    cuda::SoftmaxXentGrad<float>(s, label, nullptr, dloss, d, k.rows(), k.n, ignore, softmax, c->stream);
  }
  FromRows(c, d, k, dx);
  return LaunchStatus(ctx);
}

}  // namespace

void RegisterCudaSoftmaxKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend("softmax").Kernel<float>(SoftmaxKernel, gpu);
  r->Extend("softmax_grad").Kernel<float>(SoftmaxGradKernel, gpu);
  r->Extend("softmax_with_cross_entropy").Kernel<float>(SoftmaxXentKernel, gpu);
  r->Extend("softmax_with_cross_entropy_grad").Kernel<float>(SoftmaxXentGradKernel, gpu);
}

}  // namespace oar
