// hash (Fluid 1.5+'s layers.hash): each row of an int tensor hashed
// num_hash times with xxHash64 (seeds 0 .. num_hash-1, over the row's bytes)
// modulo mod_by — the ids of hashed-feature embeddings. Out is
// [rows, num_hash, 1] of the input's type, with its LoD. xxHash comes from
// Debian's libxxhash-dev, inlined (XXH_INLINE_ALL): nothing to link.
//
// Thread-safety: stateless kernels.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/strings/str_cat.h"
#include "common/framework/op_registry.h"
#include "common/ops/op_util.h"
#include "common/ops/ops.h"

namespace oar {
namespace {

template <typename T>
absl::Status HashKernel(const ExecutionContext& ctx) {
  OAR_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, "X"));
  const int64_t mod_by = ctx.Attr<int64_t>("mod_by");
  const int32_t num_hash = ctx.Attr<int32_t>("num_hash");
  if (x->dims().size() != 2 || mod_by <= 0 || num_hash <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("hash: X", x->dims().ToString(), " must be [rows, width], mod_by (",
                                                   mod_by, ") and num_hash (", num_hash, ") positive"));
  }
  const int64_t rows = x->dims()[0], width = x->dims()[1];
  Tensor* out = ctx.Output("Out");
  T* o = out->mutable_data<T>(DDim{rows, num_hash, 1});
  const T* in = x->data<T>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int32_t h = 0; h < num_hash; ++h) {
      const uint64_t v = XXH64(in + r * width, sizeof(T) * static_cast<size_t>(width), static_cast<uint64_t>(h));
      o[r * num_hash + h] = static_cast<T>(v % static_cast<uint64_t>(mod_by));
    }
  }
  out->set_lod(x->lod());
  return absl::OkStatus();
}

}  // namespace

void RegisterHashOp(OpRegistry* r) {
  r->Register("hash")
      .Input("X")
      .Output("Out")
      .Attr("num_hash", int32_t{1})
      .Attr("mod_by", int64_t{100000})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(+[](const ExecutionContext& ctx) { return InputDtypeOf(ctx, "X"); })
      .Kernel<int32_t>(HashKernel<int32_t>)
      .Kernel<int64_t>(HashKernel<int64_t>);
}

}  // namespace oar
