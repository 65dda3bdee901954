// Helpers for optimizer update ops: shape checks against Param, typed input
// access, and a view of the gradient that is either dense or sparse
// (SelectedRows, rows merged) — densified for optimizers that, as in Fluid,
// update every row even when the gradient is sparse.
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/base/status.h"
#include "common/framework/op_context.h"
#include "common/framework/selected_rows_util.h"
#include "common/ops/op_util.h"

namespace oar::optimizer_util {

// Checks LearningRate has one value and that every slot in `like_param`
// matches Param's size; sets each (out slot) to Param's shape.
absl::Status InferUpdateShape(InferShapeContext& ctx, const std::vector<std::string>& like_param,
                              const std::vector<std::string>& outs, const std::vector<std::string>& scalars = {});

// The dense input of `slot` as T (dtype checked).
template <typename T>
absl::StatusOr<const T*> In(const ExecutionContext& ctx, const std::string& slot) {
  OAR_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, slot));
  OAR_RETURN_IF_ERROR(RequireDtype<T>(ctx, slot, *t));
  return t->data<T>();
}

// The dense output `slot` shaped like `like`.
template <typename T>
T* Out(const ExecutionContext& ctx, const std::string& slot, const Tensor& like) {
  return ctx.Output(slot)->mutable_data<T>(like.dims());
}

template <typename T>
struct GradView {
  const T* dense = nullptr;  // set for a dense (or densified) gradient
  SelectedRows rows;         // the merged sparse gradient otherwise
  int64_t width = 0;         // elements per row
  Tensor storage;            // owns a densified gradient
  bool sparse() const { return dense == nullptr; }
};

// Reads Grad for a Param of `param_numel` elements. With `densify`, a sparse
// gradient is expanded to the full shape.
template <typename T>
absl::StatusOr<GradView<T>> ReadGrad(const ExecutionContext& ctx, const Tensor& param, bool densify) {
  GradView<T> g;
  const Variable* v = ctx.InputVar("Grad");
  if (v != nullptr && v->IsType<SelectedRows>()) {
    const SelectedRows& sr = v->Get<SelectedRows>();
    OAR_RETURN_IF_ERROR(CheckSelectedRows(sr, ctx.op().type + ": Grad"));
    if (sr.height != param.dims()[0]) {
      return absl::InvalidArgumentError(absl::StrCat(ctx.op().type, ": sparse Grad has height ", sr.height,
                                                     ", Param has ", param.dims()[0], " rows"));
    }
    g.width = param.dims()[0] ? param.numel() / param.dims()[0] : 0;
    if (!sr.rows.empty()) OAR_RETURN_IF_ERROR(RequireDtype<T>(ctx, "Grad", sr.value));
    if (densify) {
      g.storage = sr.rows.empty() ? Tensor() : Densify<T>(sr);
      if (sr.rows.empty()) {
        T* z = g.storage.template mutable_data<T>(param.dims());
        std::fill(z, z + param.numel(), T(0));
      }
      g.dense = g.storage.template data<T>();
    } else {
      g.rows = sr.rows.empty() ? sr : MergeRows<T>(sr);
    }
    return g;
  }
  OAR_ASSIGN_OR_RETURN(g.dense, In<T>(ctx, "Grad"));
  return g;
}

}  // namespace oar::optimizer_util
