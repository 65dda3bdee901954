// Control flow for the layers API, after fluid.layers.control_flow:
// ConditionalBlockGuard opens a sub-block that layers append to; when it
// closes, a `conditional_block` op (Cond, Input, Out, Scope, sub_block,
// is_scalar_condition) is appended to the parent block. Switch chains cases
// with logical_not / logical_and exactly as Fluid's Switch does.
//
//   layers::Switch sw;
//   { auto c = sw.Case(layers::less_than(step, boundary)); layers::assign(v0, lr); }
//   { auto d = sw.Default(); layers::assign(v1, lr); }
//
// Thread-safety: externally synchronized (appends to the thread's programs).
#pragma once

#include <memory>
#include <vector>

#include "common/api/program.h"

namespace oar {
namespace layers {

class ConditionalBlockGuard {
 public:
  ConditionalBlockGuard(std::vector<Var> conditions, bool is_scalar_condition);
  ~ConditionalBlockGuard();
  ConditionalBlockGuard(const ConditionalBlockGuard&) = delete;
  ConditionalBlockGuard& operator=(const ConditionalBlockGuard&) = delete;

 private:
  Program* program_;
  std::vector<Var> conditions_;
  bool is_scalar_;
  BlockDesc* sub_block_ = nullptr;
};

class Switch {
 public:
  // Ops appended while the returned guard lives run when `condition` (a bool
  // [1]) holds and no earlier case did.
  std::unique_ptr<ConditionalBlockGuard> Case(const Var& condition);
  // Ops appended while the returned guard lives run when no case held.
  std::unique_ptr<ConditionalBlockGuard> Default();

 private:
  std::vector<Var> pre_not_conditions_;
};

}  // namespace layers
}  // namespace oar
