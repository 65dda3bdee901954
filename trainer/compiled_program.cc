#include "trainer/compiled_program.h"

#include "common/base/status.h"
#include "trainer/places.h"

namespace oar {

CompiledProgram& CompiledProgram::WithDataParallel(std::string loss_name, BuildStrategy build, ExecutionStrategy exec,
                                                   const CompiledProgram* share_vars_from, std::vector<Place> places,
                                                   int num_trainers, int trainer_id) {
  data_parallel_ = true;
  loss_name_ = std::move(loss_name);
  build_ = std::move(build);
  exec_ = exec;
  share_vars_from_ = share_vars_from;
  places_ = std::move(places);
  num_trainers_ = num_trainers;
  trainer_id_ = trainer_id;
  pe_.reset();
  return *this;
}

absl::StatusOr<std::vector<Tensor>> CompiledProgram::Run(Scope* scope, const FeedMap& feed,
                                                         const std::vector<std::string>& fetch_list) {
  if (scope == nullptr) return absl::InvalidArgumentError("CompiledProgram::Run needs a scope");
  if (!data_parallel_) return exe_.Run(program_, scope, feed, fetch_list);
  if (pe_ != nullptr && scope != scope_) {
    return absl::InvalidArgumentError("CompiledProgram: run in another scope than the one it was compiled in");
  }
  if (pe_ == nullptr) {
    const ParallelExecutor* shared = nullptr;
    if (share_vars_from_ != nullptr) {
      shared = share_vars_from_->parallel_executor();
      if (shared == nullptr) {
        return absl::FailedPreconditionError(
            "share_vars_from: the program to share variables from has not run yet, so it has no variables to share");
      }
    }
    std::vector<Place> places = places_;
    if (places.empty()) {
      OAR_ASSIGN_OR_RETURN(places, CpuPlacesFromEnv());
    }
    OAR_ASSIGN_OR_RETURN(pe_, ParallelExecutor::Create(std::move(places), loss_name_, program_, scope, build_, exec_,
                                                       num_trainers_, trainer_id_, shared));
    scope_ = scope;
  }
  return pe_->Run(fetch_list, feed);
}

}  // namespace oar
