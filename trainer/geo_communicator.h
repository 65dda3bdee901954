// GeoCommunicator: the trainer's half of GEO-SGD (Fluid 1.6–1.8's
// GeoSgdCommunicator). The trainer trains with its own optimizer; every
// `need_push_nums` steps it exchanges each parameter with the pservers:
//   delta = (train - old) / trainers;  old += delta;  send <block>.delta
//   z = the pserver's block;  train += z - old;  old = z
// — for a sparse table only the rows its lookups touched since the last
// exchange (the ids the program's GEO send op hands over), sent as
// SelectedRows of the block's local rows. The pservers add each delta to
// the parameter (sum(block, block.delta)).
//
// Unlike Fluid's, which exchanges on a background thread while training
// goes on, the exchange runs on the training thread inside the send op of
// every need_push_nums-th step: a parameter never changes under a running
// op, and the exchange's cost — a send and a pull of every parameter —
// is spread over need_push_nums steps. A table's touched rows come back as
// Fluid's do, only they: a PrefetchVariable of the block (named as its
// table) for those local rows.
//
//   GeoCommunicator geo(params, &client, {.need_push_nums = 100, .trainers = 2});
//   env.geo = &geo;
//   OAR_RETURN_IF_ERROR(geo.Start(&scope));   // after the startup program
//   ... run steps ...
//   OAR_RETURN_IF_ERROR(geo.Flush());          // what changed since the last exchange
//
// Thread-safety: Step and Flush from the training threads, one at a time
// (an internal lock serializes them; AsyncExecutor threads share it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/framework/scope.h"
#include "common/framework/tensor.h"

namespace oar {
namespace rpc {
class RpcClient;
}

// A parameter GEO-SGD keeps in step with the pservers.
struct GeoParam {
  std::string name;                 // in the trainer's scope
  std::vector<std::string> blocks;  // on the pservers: "w.block0", ... or the name
  std::vector<std::string> epmap;   // where block i lives
  std::vector<int64_t> rows;        // rows of block i
  bool sparse = false;              // a lookup table: only touched rows travel
  int32_t trainer_id = 0;
};

struct GeoOptions {
  int need_push_nums = 100;  // steps between exchanges (geo_sgd_need_push_nums)
  int trainers = 1;          // deltas are divided by it
  // An elastic job: the trainers live now, asked at each exchange, divide
  // its deltas instead (at least 1), so the pservers move by the mean of
  // the live trainers' progress whatever the job's size. Null: `trainers`.
  std::function<int()> trainers_now = nullptr;
  // Told of every delta sent (the pserver variable and its value), on the
  // training thread: what a test replays.
  std::function<void(const std::string& var, const Variable& delta)> on_delta = nullptr;
};

class GeoCommunicator {
 public:
  GeoCommunicator(std::vector<GeoParam> params, rpc::RpcClient* client, GeoOptions options);

  // Snapshots every parameter of `scope` (Fluid's send(param_init)).
  absl::Status Start(Scope* scope);
  // One step: `ids` are the sparse tables' looked-up ids (by table name);
  // on every need_push_nums-th step, the exchange.
  absl::Status Step(const std::map<std::string, const Tensor*>& ids);
  // The exchange, if any step since the last one.
  absl::Status Flush();
  int64_t exchanges() const;

 private:
  absl::Status Exchange() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `scale`: 1 / the trainers dividing this exchange's deltas.
  absl::Status ExchangeDense(const GeoParam& p, Tensor* train, Tensor* old, float scale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ExchangeSparse(const GeoParam& p, Tensor* train, Tensor* old, float scale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<GeoParam> params_;
  rpc::RpcClient* const client_;
  const GeoOptions options_;
  mutable absl::Mutex mu_;
  Scope* scope_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::map<std::string, Tensor> old_ ABSL_GUARDED_BY(mu_);                 // by parameter
  std::map<std::string, std::set<int64_t>> touched_ ABSL_GUARDED_BY(mu_);  // by sparse table
  int64_t steps_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t exchanged_at_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t exchanges_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace oar
