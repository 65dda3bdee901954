// The model-building API's Program and Var, after Fluid's Python classes.
//
//   Program main, startup;
//   {
//     ProgramGuard guard(&main, &startup);
//     Var x = layers::data("x", {784});
//     Var y = layers::fc(x, 10, "softmax");
//   }
//   if (!main.status().ok()) ...   // the first build error, if any
//
// Building never throws and never aborts: a layer that is misused records the
// first error in its Program (status()) and returns an invalid Var, and every
// later layer given an invalid Var does nothing. Check status() once after
// building, as TensorFlow's C++ Scope does.
//
// Thread-safety: externally synchronized. The current-program stack
// (ProgramGuard) is per thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/framework/program_desc.h"

namespace oar {

class WeightDecayRegularizer;  // regularizer.h
class GradientClip;            // clip.h

class Program {
 public:
  Program();
  Program(const Program& other);
  Program& operator=(const Program& other);

  ProgramDesc& desc() { return *desc_; }
  const ProgramDesc& desc() const { return *desc_; }
  BlockDesc* global_block() { return desc_->MutableBlock(0); }

  // Fluid's Program.clone: a deep copy. With for_test, backward and optimize
  // ops and @GRAD variables are pruned and `is_test` attrs set to true.
  Program clone(bool for_test = false) const;

  // Seed given to initializers whose own seed is 0 (0: nondeterministic).
  int32_t random_seed() const { return random_seed_; }
  void set_random_seed(int32_t seed) { random_seed_ = seed; }

  // The first error met while building; OK if none.
  const absl::Status& status() const { return status_; }
  void RecordError(const absl::Status& s) {
    if (status_.ok() && !s.ok()) status_ = s;
  }

  // Parameters of the global block in creation order (Fluid's all_parameters).
  const std::vector<std::string>& parameters() const { return parameters_; }
  void AddParameter(const std::string& name) { parameters_.push_back(name); }

  // Per-parameter regularizer and gradient clip, from ParamAttr or
  // set_gradient_clip (Fluid keeps them on the Python Parameter).
  struct ParamExtras {
    std::shared_ptr<const WeightDecayRegularizer> regularizer;
    std::shared_ptr<const GradientClip> clip;
  };
  std::map<std::string, ParamExtras> param_extras;

  // The block layers append to (Fluid's current_block); sub-blocks are made
  // by control flow (ConditionalBlockGuard).
  BlockDesc* current_block() { return desc_->MutableBlock(current_block_idx_); }
  BlockDesc* CreateBlock();
  void RollbackBlock();

  // Role stamped on appended ops (Fluid's _current_role / _op_role_var).
  OpRole current_role = OpRole::kForward;
  std::vector<std::string> current_role_var;

  std::string ToString() const { return desc_->ToString(); }

 private:
  std::unique_ptr<ProgramDesc> desc_;
  int32_t random_seed_ = 0;
  int32_t current_block_idx_ = 0;
  absl::Status status_;
  std::vector<std::string> parameters_;
};

// A handle to a variable of a Program's block. Cheap to copy.
class Var {
 public:
  Var() = default;
  Var(Program* program, BlockDesc* block, std::string name)
      : program_(program), block_(block), name_(std::move(name)) {}

  bool valid() const { return program_ != nullptr; }
  const std::string& name() const { return name_; }
  Program* program() const { return program_; }
  BlockDesc* block() const { return block_; }
  const VarDesc& desc() const { return *block_->FindVarRecursive(name_); }
  VarDesc* mutable_desc() const { return block_->FindMutableVar(name_); }
  std::vector<int64_t> shape() const { return desc().shape; }
  DataType dtype() const { return desc().dtype; }
  bool stop_gradient() const { return desc().stop_gradient; }
  void set_stop_gradient(bool v) const { mutable_desc()->stop_gradient = v; }
  bool persistable() const { return desc().persistable; }

 private:
  Program* program_ = nullptr;
  BlockDesc* block_ = nullptr;
  std::string name_;
};

// Makes `main` and `startup` the programs that layers append to, until the
// guard is destroyed (Fluid's program_guard). Nests.
class ProgramGuard {
 public:
  ProgramGuard(Program* main, Program* startup);
  ~ProgramGuard();
  ProgramGuard(const ProgramGuard&) = delete;
  ProgramGuard& operator=(const ProgramGuard&) = delete;

 private:
  Program* prev_main_;
  Program* prev_startup_;
};

// The programs layers append to: the innermost guard's, else this thread's
// default pair.
Program* default_main_program();
Program* default_startup_program();

// Switches the current role of `program` for a scope (Fluid's
// _optimized_guard / _lr_schedule_guard / _backward_role_guard).
class RoleGuard {
 public:
  RoleGuard(Program* program, OpRole role, std::vector<std::string> role_var = {});
  ~RoleGuard();

 private:
  Program* program_;
  OpRole saved_role_;
  std::vector<std::string> saved_var_;
};

}  // namespace oar
