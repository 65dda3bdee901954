// coalesce_tensor, as paddle.nn.LSTM/GRU's startup program writes it: Input
// (a list of tensors) to Output (the same variables) and FusedOutput, one
// flat tensor holding them all in order. Paddle makes Output views into
// FusedOutput's buffer; Oar's variables own their memory, so Output keeps
// (copy_data) or takes (set_constant: `constant`) the values and FusedOutput
// gets a copy, which is what a program reads of it. Alignment padding is
// not reproduced (it holds nothing).
//
// Thread-safety: a stateless kernel.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

template <typename T>
absl::Status CoalesceKernel(const ExecutionContext& ctx) {
  const std::vector<const Tensor*> in = ctx.MultiInput("Input");
  const std::vector<Tensor*> out = ctx.MultiOutput("Output");
  if (out.size() != in.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("coalesce_tensor: ", in.size(), " inputs but ", out.size(), " outputs"));
  }
  const bool copy = ctx.Attr<bool>("copy_data"), set = ctx.Attr<bool>("set_constant");
  const T constant = static_cast<T>(ctx.Attr<float>("constant"));
  int64_t total = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == nullptr || !in[i]->initialized()) {
      return absl::InvalidArgumentError(
          absl::StrCat("coalesce_tensor: ", InputLabel(ctx.op(), "Input", i), " has no value"));
    }
    OAR_RETURN_IF_ERROR(RequireInputDtype<T>(ctx, "Input", i, *in[i]));
    total += in[i]->numel();
  }
  std::vector<T> fused(static_cast<size_t>(total));
  int64_t at = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t n = in[i]->numel();
    if (set) {
      std::fill(fused.begin() + at, fused.begin() + at + n, constant);
    } else if (copy) {
      std::memcpy(fused.data() + at, in[i]->data<T>(), static_cast<size_t>(n) * sizeof(T));
    }
    if (out[i] != nullptr && (set || out[i] != in[i])) {
      const DDim dims = in[i]->dims();
      T* o = out[i]->mutable_data<T>(dims);
      std::memcpy(o, fused.data() + at, static_cast<size_t>(n) * sizeof(T));
    }
    at += n;
  }
  if (Tensor* f = ctx.Output("FusedOutput")) std::copy(fused.begin(), fused.end(), f->mutable_data<T>(DDim{total}));
  return absl::OkStatus();
}

absl::Status CoalesceShape(InferShapeContext& ctx) {
  int64_t total = 0;
  for (size_t i = 0; i < ctx.InputSize("Input"); ++i) {
    const DDim d = ctx.InputDim("Input", i);
    ctx.SetOutputDim("Output", d, i);
    total = d.HasUnknown() || total < 0 ? -1 : total + d.numel();
  }
  ctx.SetOutputDim("FusedOutput", DDim{total});
  return absl::OkStatus();
}

}  // namespace

void RegisterCoalesceTensorOp(OpRegistry* r) {
  r->Register("coalesce_tensor")
      .Input("Input", kDuplicable)
      .Output("Output", kDuplicable)
      .Output("FusedOutput")
      .Attr("dtype", int32_t{5})
      .Attr("copy_data", false)
      .Attr("set_constant", false)
      .Attr("persist_output", false)
      .Attr("constant", 0.0f)
      .Attr("use_align", true)
      .Attr("align_size", int32_t{-1})
      .Attr("user_defined_size_of_dtype", int32_t{-1})
      .Attr("concated_shapes", std::vector<int64_t>{})
      .Attr("concated_ranks", std::vector<int64_t>{})
      .SetInferShape(CoalesceShape)
      .SetKernelDtype(+[](const ExecutionContext& ctx) { return static_cast<DataType>(ctx.Attr<int32_t>("dtype")); })
      .Kernel<float>(CoalesceKernel<float>)
      .Kernel<double>(CoalesceKernel<double>);
}

}  // namespace oar
