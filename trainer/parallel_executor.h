// ParallelExecutor: data parallelism inside one process. The program is
// replicated on every place (each with its own copy of the persistable
// variables — parameters and optimizer state, copied from the given scope,
// which serves as place 0), a feed is split across the places along dim 0,
// the SSA graph (ssa_graph.h) runs on a thread pool, gradients are summed
// across places by all-reduce handles so that every place applies the same
// update, and fetched variables come back concatenated along dim 0.
//
//   exe.Run(startup, &scope);                       // initialize once
//   OAR_ASSIGN_OR_RETURN(auto pe, ParallelExecutor::Create(CpuPlaces(2), loss.name(),
//                                                          main.desc(), &scope));
//   OAR_ASSIGN_OR_RETURN(auto out, pe->Run({loss.name()}, {{"x", xs}, {"y", ys}}));
//
// With several places each runs OpenBLAS with one thread. The places are
// all CPUs or all GPUs, each GPU once: among GPUs a gradient is summed by
// one NCCL call over every GPU (collective/nccl_places.h), queued on the
// GPUs' streams, so no host thread waits for it.
//
// Across trainers (nccl2 mode: num_trainers > 1, and a `collective` among
// them): each gradient is reduced onto place 0, all-reduced among the
// trainers there — on a thread of its own, in one order on every trainer,
// as soon as backward has written it (or its bucket, with
// fuse_all_reduce_ops), while backward goes on — and broadcast back to the
// other places; loss@GRAD is scaled by 1 / (places x trainers), so the sum
// is the mean over every example of the global batch.
//
// Thread-safety: externally synchronized (one Run at a time).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/thread_pool.h"
#include "common/framework/executor.h"
#include "trainer/build_strategy.h"
#include "trainer/collective/collective.h"
#include "trainer/collective/ordered_collectives.h"
#include "trainer/ssa_graph.h"

namespace oar {

class NcclPlaces;
class PreparedBlock;

class ParallelExecutor {
 public:
  // `scope` must hold the initialized persistables (run the startup program
  // first); it must outlive the executor. InvalidArgument for no places or a
  // loss that is not in the program, places that mix CPUs and GPUs or name
  // a GPU twice; FailedPrecondition for a GPU that is not visible. With `share_vars_from` (e.g. a test
  // program's executor sharing the train program's parameters) every place
  // uses that executor's persistables, which must outlive this one; `scope`
  // may then be null. `env` (the RPC client of a transpiled trainer program's
  // ops) must outlive the executor.
  static absl::StatusOr<std::unique_ptr<ParallelExecutor>> Create(
      std::vector<Place> places, const std::string& loss_name, const ProgramDesc& main, Scope* scope,
      BuildStrategy build = {}, ExecutionStrategy exec = {}, int num_trainers = 1, int trainer_id = 0,
      const ParallelExecutor* share_vars_from = nullptr, const RunEnv* env = nullptr, Collective* collective = nullptr);
  ~ParallelExecutor();

  // Splits `feed` across the places, runs one step, returns `fetch_list`
  // concatenated over places. Errors name the op and place that failed.
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<std::string>& fetch_list, const FeedMap& feed);
  // One feed per place (its length must equal the place count).
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<std::string>& fetch_list,
                                          const std::vector<FeedMap>& feeds);

  // Copies into place 0's scope (the caller's) the persistables that only
  // another place updates — under Reduce, the optimizer state of parameters
  // that place owns — so that saving the caller's scope saves current
  // values. Call between steps.
  absl::Status GatherToPlace0();

  // Copies place 0's persistables (the caller's scope) to every other
  // place, after the caller changed them outside Run (an elastic sync
  // trainer's step without data pulls the parameters into its scope).
  // Call between steps. FailedPrecondition for an executor whose places
  // share another's persistables (share_vars_from).
  absl::Status SpreadFromPlace0();

  // Drops every place's local scope of temporaries now.
  void DropLocalExeScopes();

  size_t num_places() const { return places_.size(); }
  // The scope holding place p's persistables (place 0's is the caller's).
  Scope* place_scope(size_t p) const { return place_scopes_[p]; }
  int num_trainers() const { return num_trainers_; }
  int trainer_id() const { return trainer_id_; }

 private:
  struct Compiled;  // one per (feed names, fetch names)
  ParallelExecutor() = default;
  absl::StatusOr<Compiled*> GetOrCompile(const std::vector<std::string>& feed_names,
                                         const std::vector<std::string>& fetch_list);
  // parallel_executor_run.cc: the step's graph on the pool (several
  // places) or on the calling thread (one place).
  absl::Status RunGraph(Compiled* c);
  absl::Status RunGraphOnCaller(Compiled* c);
  // Sums `grad` over places: slice `chunk` of `chunks` of a dense one (all of a
  // sparse one, by chunk 0), onto every place (to < 0) or onto place `to`.
  // parallel_executor_places.cc.
  absl::Status AllReduce(const std::string& grad, int to = -1, size_t chunk = 0, size_t chunks = 1);
  absl::Status AllReduceSparse(const std::vector<Variable*>& vars, int to);
  absl::Status Broadcast(const std::string& param, size_t from);
  // The persistables of place 0's scope into places 1.. (as Create makes
  // them; nothing when the places share another executor's).
  absl::Status CopyPersistablesFromPlace0();
  // `t` (a variable's tensor on place p) moved to places_[p] if elsewhere.
  absl::Status MoveToItsPlace(Tensor* t, size_t p, const std::string& name) const;
  // A kCrossAllReduce handle's work: its gradients on place 0 summed over
  // the trainers (dense ones packed into one buffer; a sparse one's rows and
  // values gathered and joined in rank order).
  absl::Status CrossAllReduce(const OpHandle& h);
  absl::Status CrossAllReduceUntimed(const OpHandle& h);

  std::vector<Place> places_;
  std::string loss_name_;
  std::unique_ptr<ProgramDesc> program_;
  BuildStrategy build_;
  ExecutionStrategy exec_;
  int num_trainers_ = 1;
  int trainer_id_ = 0;
  const RunEnv* env_ = nullptr;
  Collective* cross_ = nullptr;  // nccl2 mode
  std::unique_ptr<OrderedCollectives> ordered_;
  std::shared_ptr<NcclPlaces> nccl_;  // several GPU places: their clique (shared with share_vars_from)
  std::map<size_t, Tensor> buckets_;  // packing buffers, by cross_index, reused across steps
  Scope* scope_ = nullptr;
  std::vector<Scope*> place_scopes_;  // [0] is scope_; the rest are its kids
  bool owns_place_scopes_ = true;     // false when shared from another executor
  std::vector<Scope*> local_scopes_;  // per place, kids of place_scopes_
  int runs_since_drop_ = 0;
  std::map<std::string, std::unique_ptr<Compiled>> compiled_;
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace oar
