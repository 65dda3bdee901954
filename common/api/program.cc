#include "common/api/program.h"

#include <algorithm>

#include "absl/strings/match.h"

namespace oar {

namespace {
thread_local Program* current_main = nullptr;
thread_local Program* current_startup = nullptr;
}  // namespace

Program::Program() : desc_(std::make_unique<ProgramDesc>()) {}

Program::Program(const Program& other)
    : current_role(other.current_role),
      current_role_var(other.current_role_var),
      desc_(std::make_unique<ProgramDesc>(other.desc())),
      random_seed_(other.random_seed_),
      status_(other.status_),
      parameters_(other.parameters_) {
  param_extras = other.param_extras;
}

Program& Program::operator=(const Program& other) {
  if (this == &other) return *this;
  *desc_ = other.desc();
  random_seed_ = other.random_seed_;
  status_ = other.status_;
  parameters_ = other.parameters_;
  param_extras = other.param_extras;
  current_role = other.current_role;
  current_role_var = other.current_role_var;
  return *this;
}

BlockDesc* Program::CreateBlock() {
  BlockDesc* b = desc_->AppendBlock(current_block_idx_);
  current_block_idx_ = b->idx();
  return b;
}

void Program::RollbackBlock() { current_block_idx_ = std::max(0, desc_->Block(current_block_idx_).parent_idx()); }

Program Program::clone(bool for_test) const {
  Program p(*this);
  if (!for_test) return p;
  const int32_t pruned = static_cast<int32_t>(OpRole::kBackward) | static_cast<int32_t>(OpRole::kOptimize);
  for (size_t b = 0; b < p.desc_->NumBlocks(); ++b) {
    BlockDesc* block = p.desc_->MutableBlock(b);
    for (size_t i = block->OpSize(); i-- > 0;) {
      if (block->Op(i).role() & pruned) block->RemoveOps(i, i + 1);
    }
    for (size_t i = 0; i < block->OpSize(); ++i) {
      if (block->Op(i).HasAttr("is_test")) block->MutableOp(i)->SetAttr("is_test", true);
    }
    std::vector<std::string> grads;
    for (const auto& [name, v] : block->vars()) {
      if (absl::StrContains(name, kGradSuffix)) grads.push_back(name);
    }
    for (const auto& g : grads) block->RemoveVar(g);
  }
  return p;
}

ProgramGuard::ProgramGuard(Program* main, Program* startup) : prev_main_(current_main), prev_startup_(current_startup) {
  current_main = main;
  current_startup = startup;
}

ProgramGuard::~ProgramGuard() {
  current_main = prev_main_;
  current_startup = prev_startup_;
}

Program* default_main_program() {
  thread_local Program fallback;
  return current_main ? current_main : &fallback;
}

Program* default_startup_program() {
  thread_local Program fallback;
  return current_startup ? current_startup : &fallback;
}

RoleGuard::RoleGuard(Program* program, OpRole role, std::vector<std::string> role_var)
    : program_(program), saved_role_(program->current_role), saved_var_(program->current_role_var) {
  program->current_role = role;
  program->current_role_var = std::move(role_var);
}

RoleGuard::~RoleGuard() {
  program_->current_role = saved_role_;
  program_->current_role_var = std::move(saved_var_);
}

}  // namespace oar
