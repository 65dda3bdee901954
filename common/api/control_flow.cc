#include "common/api/control_flow.h"

#include <set>

#include "common/api/layer_helper.h"
#include "common/api/layers.h"
#include "common/api/unique_name.h"

namespace oar {
namespace layers {

ConditionalBlockGuard::ConditionalBlockGuard(std::vector<Var> conditions, bool is_scalar_condition)
    : program_(default_main_program()), conditions_(std::move(conditions)), is_scalar_(is_scalar_condition) {
  for (const Var& c : conditions_) {
    if (!c.valid()) {
      program_->RecordError(absl::InvalidArgumentError("conditional_block: an invalid condition variable"));
      return;
    }
  }
  sub_block_ = program_->CreateBlock();
}

ConditionalBlockGuard::~ConditionalBlockGuard() {
  if (sub_block_ == nullptr) return;
  program_->RollbackBlock();
  BlockDesc* parent = program_->current_block();
  // Inputs: what the sub-block reads before writing; outputs: parent
  // variables it writes.
  std::set<std::string> written, params;
  for (size_t i = 0; i < sub_block_->OpSize(); ++i) {
    const OpDesc& op = sub_block_->Op(i);
    for (const auto& in : op.InputArgNames())
      if (!written.count(in)) params.insert(in);
    for (const auto& out : op.OutputArgNames()) written.insert(out);
  }
  std::set<std::string> cond_names;
  for (const Var& c : conditions_) cond_names.insert(c.name());
  std::vector<Var> inputs, outputs;
  for (const auto& p : params) {
    if (!cond_names.count(p) && parent->FindVarRecursive(p)) inputs.emplace_back(program_, parent, p);
  }
  for (const auto& [name, v] : parent->vars()) {
    if (written.count(name)) outputs.emplace_back(program_, parent, name);
  }
  std::string scope_name = unique_name::Generate("_generated_var");
  parent->Var(scope_name)->type = paddle::framework::proto::VarType::STEP_SCOPES;
  LayerHelper h("conditional_block", "conditional_block");
  h.AppendOp("conditional_block", {{"Cond", conditions_}, {"Input", inputs}},
             {{"Out", outputs}, {"Scope", {Var(program_, parent, scope_name)}}},
             {{"sub_block", BlockRef{sub_block_->idx()}}, {"is_scalar_condition", is_scalar_}});
}

std::unique_ptr<ConditionalBlockGuard> Switch::Case(const Var& condition) {
  Var cond = condition;
  if (pre_not_conditions_.empty()) {
    pre_not_conditions_.push_back(logical_not(condition));
  } else {
    const Var pre_not = pre_not_conditions_.back();  // a copy: the push_back below may reallocate
    pre_not_conditions_.push_back(logical_and(pre_not, logical_not(condition)));
    cond = logical_and(pre_not, condition);
  }
  return std::make_unique<ConditionalBlockGuard>(std::vector<Var>{cond}, true);
}

std::unique_ptr<ConditionalBlockGuard> Switch::Default() {
  if (pre_not_conditions_.empty()) {
    default_main_program()->RecordError(absl::InvalidArgumentError("Switch: Default() needs a Case() before it"));
    return nullptr;
  }
  return std::make_unique<ConditionalBlockGuard>(std::vector<Var>{pre_not_conditions_.back()}, true);
}

}  // namespace layers
}  // namespace oar
