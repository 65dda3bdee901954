// GPU kernels of the small ops that learning-rate schedules, metrics and
// Paddle-written programs put between layers: the comparisons (less_than,
// less_equal, greater_than, greater_equal, equal, not_equal; float32,
// float64, int32 and int64, giving bool), logical_not/and/or/xor, and
// assign (a copy on the place's stream, dense or sparse). As on the CPU
// (control_ops.cc), Y is as long as X or holds one value. conditional_block
// registers one kernel for every place in control_ops.cc.
#include <cstdint>

#include "common/ops/cuda_launch.h"
#include "common/ops/cuda_op_util.h"

namespace oar {
namespace {

// Y as long as X, or one value (broadcast); `y` may be null (logical_not).
absl::StatusOr<bool> YIsScalar(const ExecutionContext& ctx, const Tensor& x, const Tensor* y) {
  if (y == nullptr || y->numel() == x.numel()) return false;
  if (y->numel() == 1) return true;
  return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": Y ('", ctx.op().Input("Y")[0], "')",
                                                 y->dims().ToString(), " must match X ('", ctx.op().Input("X")[0], "')",
                                                 x.dims().ToString(), " or hold one value"));
}

template <typename T, cuda::Compare C>
absl::Status CompareKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const T* x, GpuIn<T>(ctx, "X"));
  OAR_ASSIGN_OR_RETURN(const T* y, GpuIn<T>(ctx, "Y"));
  const Tensor& xt = *ctx.Input("X");
  OAR_ASSIGN_OR_RETURN(const bool scalar, YIsScalar(ctx, xt, ctx.Input("Y")));
  // Out bound to X or Y: the bools would overwrite elements other threads
  // have yet to read, so they go to a buffer of their own, which then
  // replaces Out's (the old one is freed in stream order, after the kernel).
  const Variable* out_var = ctx.OutputVar("Out");
  const bool in_place = out_var == ctx.InputVar("X") || out_var == ctx.InputVar("Y");
  Tensor fresh;
  Tensor* out = in_place ? &fresh : ctx.Output("Out");
  out->Resize(xt.dims());
  cuda::CompareOp<T>(C, x, y, scalar, out->mutable_data<bool>(ctx.place()), xt.numel(), c->stream);
  if (in_place) ctx.Output("Out")->ShareDataWith(fresh);
  return LaunchStatus(ctx);
}

template <cuda::Logic L>
absl::Status LogicKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(CudaContext * c, KernelCuda(ctx));
  OAR_ASSIGN_OR_RETURN(const bool* x, GpuIn<bool>(ctx, "X"));
  const bool* y = nullptr;
  if (L != cuda::Logic::kNot) {
    OAR_ASSIGN_OR_RETURN(y, GpuIn<bool>(ctx, "Y"));
  }
  const Tensor& xt = *ctx.Input("X");
  OAR_ASSIGN_OR_RETURN(const bool scalar, YIsScalar(ctx, xt, y != nullptr ? ctx.Input("Y") : nullptr));
  Tensor* out = ctx.Output("Out");
  out->Resize(xt.dims());
  cuda::LogicOp(L, x, y, scalar, out->mutable_data<bool>(ctx.place()), xt.numel(), c->stream);
  return LaunchStatus(ctx);
}

// Out = a copy of X on this GPU, queued on its stream: a dense tensor (any
// dtype, its LoD too) or a SelectedRows (rows and height on the host, the
// value copied).
absl::Status AssignKernel(const ExecutionContext& ctx) {
  OAR_RETURN_IF_ERROR(KernelCuda(ctx).status());
  const Variable* x = ctx.InputVar("X");
  Variable* out = ctx.OutputVar("Out");
  if (x == nullptr || !x->IsInitialized()) {
    return absl::InvalidArgumentError(absl::StrCat("assign: input X ('", ctx.op().Input("X")[0], "') has no value"));
  }
  if (x == out) return absl::OkStatus();
  if (x->IsType<SelectedRows>()) {
    const SelectedRows& s = x->Get<SelectedRows>();
    SelectedRows* o = out->GetMutable<SelectedRows>();
    o->rows = s.rows;
    o->height = s.height;
    return s.value.CopyTo(ctx.place(), &o->value);
  }
  return x->Get<Tensor>().CopyTo(ctx.place(), out->GetMutable<Tensor>());
}

template <cuda::Compare C>
void RegisterCompare(OpRegistry* r, const std::string& type) {
  const auto gpu = Place::Kind::kCUDA;
  r->Extend(type)
      .Kernel<float>(CompareKernel<float, C>, gpu)
      .template Kernel<double>(CompareKernel<double, C>, gpu)
      .template Kernel<int32_t>(CompareKernel<int32_t, C>, gpu)
      .template Kernel<int64_t>(CompareKernel<int64_t, C>, gpu);
}

}  // namespace

void RegisterCudaControlKernels(OpRegistry* r) {
  const auto gpu = Place::Kind::kCUDA;
  using cuda::Compare;
  using cuda::Logic;
  RegisterCompare<Compare::kLess>(r, "less_than");
  RegisterCompare<Compare::kLessEqual>(r, "less_equal");
  RegisterCompare<Compare::kGreater>(r, "greater_than");
  RegisterCompare<Compare::kGreaterEqual>(r, "greater_equal");
  RegisterCompare<Compare::kEqual>(r, "equal");
  RegisterCompare<Compare::kNotEqual>(r, "not_equal");
  r->Extend("logical_not").Kernel<bool>(LogicKernel<Logic::kNot>, gpu);
  r->Extend("logical_and").Kernel<bool>(LogicKernel<Logic::kAnd>, gpu);
  r->Extend("logical_or").Kernel<bool>(LogicKernel<Logic::kOr>, gpu);
  r->Extend("logical_xor").Kernel<bool>(LogicKernel<Logic::kXor>, gpu);
  r->Extend("assign").Kernel<float>(AssignKernel, gpu);
}

}  // namespace oar
