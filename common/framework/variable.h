// Variable: the run-time value of a program variable, holding one of a
// LoDTensor, SelectedRows, a tensor list (Fluid's FEED_MINIBATCH,
// FETCH_LIST and LOD_TENSOR_ARRAY), a pserver's SparseTable (a distributed
// lookup table's shard), the step scopes of a `while` op (STEP_SCOPES), or
// nothing yet.
//
// Thread-safety: externally synchronized.
#pragma once

#include <variant>
#include <vector>

#include "common/framework/selected_rows.h"
#include "common/framework/sparse_table.h"
#include "common/framework/tensor.h"

namespace oar {

using TensorList = std::vector<Tensor>;

class Scope;
// A `while` op's scopes, one per step it ran, in order (children of the
// scope the op ran in; while_grad walks them backwards and drops them).
struct StepScopes {
  std::vector<Scope*> scopes;
};

class Variable {
 public:
  bool IsInitialized() const { return !std::holds_alternative<std::monostate>(v_); }
  template <typename T>
  bool IsType() const {
    return std::holds_alternative<T>(v_);
  }
  // The held value; the caller has checked IsType<T>().
  template <typename T>
  const T& Get() const {
    return std::get<T>(v_);
  }
  // The held T, first replacing whatever else is held with a fresh T.
  template <typename T>
  T* GetMutable() {
    if (!std::holds_alternative<T>(v_)) v_.template emplace<T>();
    return &std::get<T>(v_);
  }
  void Clear() { v_ = std::monostate{}; }

 private:
  std::variant<std::monostate, Tensor, SelectedRows, TensorList, SparseTable, StepScopes> v_;
};

}  // namespace oar
