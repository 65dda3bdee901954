// Executor: runs a block of a program on one place, with Fluid's semantics.
//
//   Executor exe(CPUPlace());
//   Scope scope;
//   OAR_RETURN_IF_ERROR(exe.Run(startup, &scope).status());
//   OAR_ASSIGN_OR_RETURN(auto out, exe.Run(main, &scope, {{"x", xs}}, {"loss"}));
//
// Run() adds Fluid's feed/fetch ops ("feed"/"fetch" variables, `col` attr) to a
// private copy of the program, prepares it once (ops checked, defaults filled,
// kernels resolved) and caches the result per (program, feed names, fetch
// names); editing the program through its accessors invalidates the entry.
// Persistable variables live in `scope`; temporaries in a local child scope
// that is dropped every `num_iteration_per_drop_scope` runs.
//
// Thread-safety: externally synchronized (one Run at a time per Executor).
// Several Executors may share a Scope only if they touch disjoint variables.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "common/device/place.h"
#include "common/framework/op_registry.h"
#include "common/framework/program_desc.h"
#include "common/framework/run_env.h"
#include "common/framework/scope.h"

namespace oar {

using FeedMap = std::map<std::string, Tensor>;

struct ExecutorOptions {
  // Drop the local scope of temporaries after this many runs (Fluid's
  // ExecutionStrategy.num_iteration_per_drop_scope). Keeping it lets each
  // step reuse the previous step's buffers instead of page-faulting in fresh
  // ones; 1 drops after every run, as Fluid's plain Executor did.
  int num_iteration_per_drop_scope = 100;
  // The network objects its ops use (RPC client, transport); must outlive
  // the executor. Null: ops that need the network fail with a clear error.
  const RunEnv* env = nullptr;
};

// A block ready to run: ops validated and bound to kernels. Built by
// Executor::Prepare; owns a copy of the program, so later edits to the
// caller's program do not affect it.
class PreparedBlock;

class Executor {
 public:
  explicit Executor(Place place = CPUPlace(), ExecutorOptions options = {},
                    const OpRegistry* registry = &OpRegistry::Global());
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Feeds `feed`, runs block 0, returns copies of `fetch_list` in order.
  // Errors (InvalidArgument / NotFound) name the feed, the fetch target or the
  // failing op with its block, index, type and slot.
  absl::StatusOr<std::vector<Tensor>> Run(const ProgramDesc& program, Scope* scope, const FeedMap& feed = {},
                                          const std::vector<std::string>& fetch_list = {});

  // Validates and binds block `block_id` of `program` (a copy is kept).
  absl::StatusOr<std::unique_ptr<PreparedBlock>> Prepare(const ProgramDesc& program, int block_id) const;
  // Runs a prepared block over `scope` (variables must already be set).
  absl::Status RunPrepared(PreparedBlock* block, Scope* scope);

  const Place& place() const { return place_; }

  // Fluid's Executor.close(): a trainer's last call. With an RPC client in
  // its RunEnv, sends COMPLETE@RECV to every pserver that client talked to,
  // so the pservers stop waiting for this trainer. Returns the first error;
  // calling it again does nothing more.
  absl::Status Close();

 private:
  struct CacheEntry;
  absl::StatusOr<CacheEntry*> GetOrPrepare(const ProgramDesc& program, const std::vector<std::string>& feed_names,
                                           const std::vector<std::string>& fetch_list);

  // Forgets every prepared program (and its local scope).
  void DropCache();
  static constexpr size_t kMaxCachedPrograms = 64;

  Place place_;
  ExecutorOptions options_;
  const OpRegistry* registry_;
  absl::flat_hash_map<std::string, std::unique_ptr<CacheEntry>> cache_;
};

// Adds Fluid's feed and fetch ops and variables to `program`'s block 0:
// one `feed` op per name (prepended, attr col = its index) and one `fetch` op
// per target (appended). Used by Executor::Run and by program export.
void AddFeedFetchOps(ProgramDesc* program, const std::vector<std::string>& feed_names,
                     const std::vector<std::string>& fetch_names);

}  // namespace oar
