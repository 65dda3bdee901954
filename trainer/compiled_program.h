// CompiledProgram: Fluid's wrapper that says how a program runs. As given it
// runs on one place through a plain Executor; WithDataParallel makes it run
// through a ParallelExecutor, created in the scope of the first Run:
//
//   CompiledProgram train(main.desc());
//   train.WithDataParallel(loss.name(), build, exec);
//   CompiledProgram test(test_program.desc());
//   test.WithDataParallel(loss.name(), {}, {}, &train);   // shares train's parameters
//   OAR_ASSIGN_OR_RETURN(auto out, train.Run(&scope, feed, {loss.name()}));
//
// Thread-safety: externally synchronized (one Run at a time).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/framework/executor.h"
#include "trainer/build_strategy.h"
#include "trainer/parallel_executor.h"

namespace oar {

class CompiledProgram {
 public:
  explicit CompiledProgram(const ProgramDesc& program) : program_(program) {}

  // `places` empty means CPU_NUM CPU places. `share_vars_from` must have run
  // at least once before this one first runs, and must outlive it.
  CompiledProgram& WithDataParallel(std::string loss_name = "", BuildStrategy build = {}, ExecutionStrategy exec = {},
                                    const CompiledProgram* share_vars_from = nullptr, std::vector<Place> places = {},
                                    int num_trainers = 1, int trainer_id = 0);

  // One step (num_iteration_per_run steps with data parallelism) in `scope`.
  absl::StatusOr<std::vector<Tensor>> Run(Scope* scope, const FeedMap& feed,
                                          const std::vector<std::string>& fetch_list);

  bool data_parallel() const { return data_parallel_; }
  // The ParallelExecutor, once the first data-parallel Run created it.
  ParallelExecutor* parallel_executor() const { return pe_.get(); }

 private:
  ProgramDesc program_;
  bool data_parallel_ = false;
  std::string loss_name_;
  BuildStrategy build_;
  ExecutionStrategy exec_;
  const CompiledProgram* share_vars_from_ = nullptr;
  std::vector<Place> places_;
  int num_trainers_ = 1;
  int trainer_id_ = 0;
  Scope* scope_ = nullptr;  // where pe_ was created
  std::unique_ptr<ParallelExecutor> pe_;
  Executor exe_;
};

}  // namespace oar
