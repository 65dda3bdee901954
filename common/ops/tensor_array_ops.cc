// Tensor arrays — Fluid's LOD_TENSOR_ARRAY, held by a Variable as a
// TensorList — and the ops that loops build with them: write_to_array,
// read_from_array (each the other's gradient, as Fluid pairs them),
// lod_array_length, and tensor_array_to_tensor (stack or concat of the
// elements) with its gradient. Elements are copied in and out, never
// shared, so a loop that overwrites its state in place cannot change what
// an array already holds.
//
// Thread-safety: kernels are stateless; the variables are the executor's.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

// The array position in input I (an int64 or int32 [1], on any place).
absl::StatusOr<size_t> ArrayIndex(const ExecutionContext& ctx) {
  const Tensor* i = ctx.Input("I");
  if (i == nullptr || !i->initialized() || i->numel() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(ctx.op().type, ": index I (", InputLabel(ctx.op(), "I"), ") must hold one integer"));
  }
  Tensor host;
  const Tensor* h = i;
  if (!i->place().is_host()) {
    OAR_RETURN_IF_ERROR(i->CopyTo(CPUPlace(), &host));
    h = &host;
  }
  int64_t v;
  if (h->dtype() == DataType::kInt64)
    v = h->data<int64_t>()[0];
  else if (h->dtype() == DataType::kInt32)
    v = h->data<int32_t>()[0];
  else
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": index I must be int64 or int32"));
  if (v < 0) {
    return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": index I (", InputLabel(ctx.op(), "I"), ") is ", v,
                                                   "; an array position cannot be negative"));
  }
  return static_cast<size_t>(v);
}

TensorList* OutputArray(const ExecutionContext& ctx, const std::string& slot) {
  Variable* v = ctx.OutputVar(slot);
  return v == nullptr ? nullptr : v->GetMutable<TensorList>();
}

const TensorList* InputArray(const ExecutionContext& ctx, const std::string& slot) {
  const Variable* v = ctx.InputVar(slot);
  return v != nullptr && v->IsType<TensorList>() ? &v->Get<TensorList>() : nullptr;
}

absl::Status WriteToArrayKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const size_t i, ArrayIndex(ctx));
  TensorList* out = OutputArray(ctx, "Out");
  if (out == nullptr) return absl::InvalidArgumentError("write_to_array: output Out is missing");
  if (i >= out->size()) out->resize(i + 1);
  const Tensor* x = ctx.Input("X");
  Tensor& slot = (*out)[i];
  if (x != nullptr && x->initialized() && x->numel() > 0) {
    slot.CopyFrom(*x);
  } else {  // an empty element, as Fluid writes one
    slot = Tensor();
    if (x != nullptr) slot.set_lod(x->lod());
  }
  return absl::OkStatus();
}

// Out = X[I]. Where X has no value at I (past its end, or empty there: the
// gradient of a step nothing flowed back to) and X_W names what was written
// there, Out is zeros shaped like X_W, as Fluid's gradient path does.
absl::Status ReadFromArrayKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const size_t i, ArrayIndex(ctx));
  Tensor* out = ctx.Output("Out");
  if (out == nullptr) return absl::InvalidArgumentError("read_from_array: output Out is missing");
  const TensorList* x = InputArray(ctx, "X");
  if (x != nullptr && i < x->size() && (*x)[i].initialized() && (*x)[i].numel() > 0) {
    out->CopyFrom((*x)[i]);
    return absl::OkStatus();
  }
  const Tensor* like = ctx.Input("X_W");
  if (like == nullptr || !like->initialized()) {
    return absl::OutOfRangeError(absl::StrCat("read_from_array: array ", InputLabel(ctx.op(), "X"), " has no element ",
                                              i, " (it holds ", x == nullptr ? 0 : x->size(), ")"));
  }
  out->Resize(like->dims());
  std::memset(out->mutable_data(like->dtype(), CPUPlace()), 0, out->nbytes());
  out->set_lod(like->lod());
  return absl::OkStatus();
}

absl::Status ArrayLengthKernel(const ExecutionContext& ctx) {
  const TensorList* x = InputArray(ctx, "X");
  ctx.Output("Out")->mutable_data<int64_t>(DDim{1})[0] = x == nullptr ? 0 : static_cast<int64_t>(x->size());
  return absl::OkStatus();
}

// The layout both directions share: element k is `outer` rows of
// chunk[k] bytes; the tensor is those rows side by side.
struct ArrayLayout {
  int64_t outer = 1;
  std::vector<size_t> chunk;
  DDim dims;
  std::vector<int32_t> sizes;  // each element's extent along axis (1 when stacked)
};

absl::StatusOr<ArrayLayout> Layout(const std::string& type, const TensorList& xs, int axis, bool stack) {
  if (xs.empty()) return absl::InvalidArgumentError(type + ": the array is empty");
  const Tensor& first = xs[0];
  const int rank = static_cast<int>(first.dims().size()) + (stack ? 1 : 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || (!stack && first.dims().size() == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(type, ": axis out of range for elements of shape ", first.dims().ToString()));
  }
  ArrayLayout l;
  l.outer = first.dims().Product(0, axis);
  std::vector<int64_t> shape = first.dims().ToVector();
  int64_t along = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& t = xs[k];
    if (!t.initialized() || t.dtype() != first.dtype() || t.dims().size() != first.dims().size()) {
      return absl::InvalidArgumentError(absl::StrCat(type, ": element ", k, " (", t.dims().ToString(),
                                                     ") does not match element 0 (", first.dims().ToString(), ")"));
    }
    for (int d = 0; d < static_cast<int>(t.dims().size()); ++d) {
      if ((stack || d != axis) && t.dims()[d] != first.dims()[d]) {
        return absl::InvalidArgumentError(absl::StrCat(type, ": element ", k, " has shape ", t.dims().ToString(),
                                                       ", element 0 ", first.dims().ToString()));
      }
    }
    const int64_t ext = stack ? 1 : t.dims()[axis];
    along += ext;
    l.sizes.push_back(static_cast<int32_t>(ext));
    l.chunk.push_back(static_cast<size_t>(l.outer == 0 ? 0 : t.numel() / l.outer) * SizeOf(t.dtype()));
  }
  if (stack)
    shape.insert(shape.begin() + axis, static_cast<int64_t>(xs.size()));
  else
    shape[axis] = along;
  l.dims = DDim(shape);
  return l;
}

template <bool kGrad>
absl::Status ArrayToTensorKernel(const ExecutionContext& ctx) {
  const std::string type = ctx.op().type;
  const TensorList* xs = InputArray(ctx, "X");
  if (xs == nullptr) return absl::InvalidArgumentError(type + ": input X is not a tensor array");
  OAR_ASSIGN_OR_RETURN(ArrayLayout l, Layout(type, *xs, ctx.Attr<int32_t>("axis"), ctx.Attr<bool>("use_stack")));
  if (!kGrad) {
    Tensor* out = ctx.Output("Out");
    out->Resize(l.dims);
    char* o = static_cast<char*>(out->mutable_data((*xs)[0].dtype(), CPUPlace()));
    for (int64_t r = 0; r < l.outer; ++r) {
      for (size_t k = 0; k < xs->size(); ++k) {
        std::memcpy(o, static_cast<const char*>((*xs)[k].raw_data()) + r * l.chunk[k], l.chunk[k]);
        o += l.chunk[k];
      }
    }
    if (Tensor* idx = ctx.Output("OutIndex")) {
      int32_t* p = idx->mutable_data<int32_t>(DDim{static_cast<int64_t>(l.sizes.size())});
      std::copy(l.sizes.begin(), l.sizes.end(), p);
    }
    return absl::OkStatus();
  }
  const Tensor* g = ctx.Input(GradVarName("Out"));
  if (g == nullptr || g->dims() != l.dims || g->dtype() != (*xs)[0].dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(type, ": Out@GRAD must have shape ", l.dims.ToString()));
  }
  TensorList* dxs = OutputArray(ctx, GradVarName("X"));
  if (dxs == nullptr) return absl::OkStatus();
  dxs->assign(xs->size(), Tensor());
  std::vector<char*> dst;
  for (size_t k = 0; k < xs->size(); ++k) {
    (*dxs)[k].Resize((*xs)[k].dims());
    (*dxs)[k].set_lod((*xs)[k].lod());
    dst.push_back(static_cast<char*>((*dxs)[k].mutable_data(g->dtype(), CPUPlace())));
  }
  const char* src = static_cast<const char*>(g->raw_data());
  for (int64_t r = 0; r < l.outer; ++r) {
    for (size_t k = 0; k < xs->size(); ++k) {
      std::memcpy(dst[k] + r * l.chunk[k], src, l.chunk[k]);
      src += l.chunk[k];
    }
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterTensorArrayOps(OpRegistry* r) {
  r->Register("write_to_array")
      .Input("X")
      .Input("I", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(WriteToArrayKernel);
  r->Register("read_from_array")
      .Input("X", kReadAnywhere)
      .Input("I", kReadAnywhere)
      .Input("X_W", kDispensable | kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(ReadFromArrayKernel);
  r->Register("lod_array_length")
      .Input("X", kReadAnywhere)
      .Output("Out")
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(ArrayLengthKernel);
  r->Register("tensor_array_to_tensor")
      .Input("X", kReadAnywhere)
      .Output("Out")
      .Output("OutIndex", kDispensable)
      .Attr("axis", int32_t{0})
      .Attr("use_stack", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(ArrayToTensorKernel<false>);
  r->Register("tensor_array_to_tensor_grad")
      .Input("X", kReadAnywhere)
      .Input("Out", kDispensable)
      .Input("OutIndex", kDispensable)
      .Input(GradVarName("Out"))
      .Output(GradVarName("X"), kDispensable)
      .Attr("axis", int32_t{0})
      .Attr("use_stack", false)
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(ArrayToTensorKernel<true>);
}

}  // namespace oar
