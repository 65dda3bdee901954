// ParameterServer: one pserver, as Fluid's listen_and_serv op defines it
// (the op is a thin wrapper, listen_and_serv_op.cc): the handler that
// validates each request and dispatches it to the protocol objects that
// own the pserver's state, each with its own lock and tested alone —
// what may be received, served and reset: VarStore (var_store.h); which
// calls were already applied: ReplayGuard (replay_guard.h); the sync
// step's phases: StepBarrier, driven by SyncLoop (sync_loop.h); blocks run
// before the barrier: EarlyBlocks (early_blocks.h); parameters lent over
// shared memory: ParamLending (param_lending.h); trainers heard and
// completed, and the async loop: TrainerActivity (trainer_activity.h); a
// trainer's ABORT: AbortProtocol (abort_protocol.h); a restored pserver's
// resync: ResyncGate (resync_gate.h).
//
// sync: the first phase serves the trainers' initial parameter pull until
// every trainer's FETCH_BARRIER; then each step receives gradients (merged
// as they arrive, see VarStore) until every live trainer's BATCH_BARRIER,
// runs the optimize blocks (the LR-decay block first), then serves Gets
// until every live trainer's FETCH_BARRIER (StepBarrier). A block whose
// gradient every live trainer has sent runs at once, while the others still
// arrive, and its merged gradient is freed (parameter_server_sync.cc): the
// result is the same as at the barrier, and the pserver holds received
// gradients only while their blocks wait. COMPLETE@RECV from a trainer
// lowers the fan-in and zeroes what it left behind; Run returns when every
// trainer has completed.
//
// Restart: a pserver restored from its checkpoint (config.restored) answers
// ABORTED to each trainer until that trainer has resent its current step
// (oar_replay messages, then RESYNC@RECV); the clients do that by
// themselves. Parameters roll back to the checkpoint on this pserver only.
//
// async: each arriving gradient runs its optimize block at once, in a child
// scope of its own; Gets return current values. The LR-decay block runs once
// per trainer step (on the gradient of the first optimize block). Run
// returns when every trainer has completed, and fails naming the trainers
// that sent nothing for timeout_ms (--rpc_deadline).
//
// Distributed lookup tables (sparse_tables.h): a PrefetchVariable of the
// ids `prefetch_compress_in_tmp_<i>` runs that name's prefetch block
// (lookup_sparse_table) in a scope of its own and answers the block's
// output named by the request's out_varname; rows absent from the table
// are created there. Prefetches run beside the optimize blocks, which
// update the table's rows without locks (Hogwild, as Fluid's pservers).
// A table is not served by Get.
//
// Every request is checked before anything is allocated: trainer_id <
// Fanin, the variable's header against its declaration (VarStore::Admit),
// its size against the transport's cap (MaxRequestBytes); a Get names a
// parameter this pserver serves. A bad message is answered INVALID_ARGUMENT
// naming variable and trainer, and the server keeps serving. A call that
// carries a sequence number is applied once; its duplicate gets the first
// answer.
//
// Locks, in the order they are taken: optimize_mu_ (a sync optimize pass; a
// checkpoint) → lr_once_mu_ (the step's one LR-decay run) → lr_mu_
// (writer: the LR-decay block; reader: async optimize blocks, which read
// the rate) → ParamLending's (the lent parameters moving out before a block
// runs, under each one's block lock in turn, one at a time) → block_mu_[id]
// in ascending id (writer: the block runs; reader: serving a parameter it
// writes). EarlyBlocks' lock (which only starts work on the pool) →
// StepBarrier's and VarStore's; StepBarrier, VarStore, ReplayGuard,
// AbortProtocol and state_mu_ locks are leaves: nothing is taken under them.
//
// A trainer that fails says ABORT@RECV with its reason; the pserver then
// answers every other call with that reason and Run fails with it
// (abort_protocol.h; parameter_server_abort.cc checks the message).
//
// Shutdown order: Stop() (from any thread, e.g. on SIGTERM) → the step in
// progress finishes, barrier waits are released → Run returns → the
// destructor shuts the listener down (handlers drained) → pools join.
//
// Thread-safety: Start and Run from one thread; Stop from any; the handler
// methods run concurrently on the transport's threads.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/base/job_settings.h"
#include "common/base/thread_pool.h"
#include "common/framework/executor.h"
#include "common/framework/prepared_block.h"
#include "common/framework/run_env.h"
#include "common/profiler/profiler.h"
#include "common/rpc/transport.h"
#include "pserver/abort_protocol.h"
#include "pserver/early_blocks.h"
#include "pserver/param_lending.h"
#include "pserver/replay_guard.h"
#include "pserver/resync_gate.h"
#include "pserver/step_barrier.h"
#include "pserver/trainer_activity.h"
#include "pserver/var_store.h"

namespace oar {

struct PserverConfig {
  std::string endpoint;  // host:port (port 0: any free port)
  int fanin = 1;         // trainers
  bool sync_mode = true;
  std::vector<int> optimize_blocks;             // block ids, not counting the LR-decay block
  std::map<std::string, int> grad_to_block_id;  // "fc_w@GRAD.block0" → block id
  int lr_decay_block_id = -1;
  // Distributed lookup table: "prefetch_compress_in_tmp_0" → the block
  // whose lookup_sparse_table answers PrefetchVariable for those ids.
  std::map<std::string, int> prefetch_var_to_block_id;
  int pserver_id = 0;
  int timeout_ms = 0;  // barrier and idle bound; 0: the transport's options().deadline_ms
  // Once a failed trainer's ABORT stopped the job and every live trainer
  // was told: how long to wait on for their own ABORTs (an `oar run`
  // trainer that heard the reason echoes it as it stops; a trainer that
  // does not, such as a library user's, costs the pserver this wait).
  int abort_echo_grace_ms = 2000;
  // Threads, bounds, auth and TLS (rpc::ServeOptions of the transport's
  // options); the endpoint is filled from `endpoint`.
  rpc::ServerOptions server;
  rpc::Transport* transport = nullptr;  // serves the requests; must outlive the server
  // The scope was restored from this pserver's checkpoint while the job
  // runs on: sync mode starts at the gradients of the trainers' current
  // step, and each trainer resends that step before anything else
  // (rpc/step_journal.h).
  bool restored = false;
  int64_t restored_step = 0;  // the optimize passes the restored state holds
  // Times each optimize op and each request handled ("rpc:<method>"); null:
  // none. Must outlive the server.
  Profiler* profiler = nullptr;
  // An elastic async job: its trainers as etcd lists them (RunEnv::
  // trainer_members; TrainerActivity::set_members). Null: 0..fanin-1.
  std::function<TrainerMembers()> trainer_members = nullptr;
  // With trainer_members in sync mode, an elastic sync job: how the
  // pservers agree on the steps of a trainer that left (RunEnv::
  // agree_on_leave; DepartureWatch). Trainers join the steps with
  // JOIN_HOLD@RECV and JOIN@RECV; each step applies the mean gradient of
  // the trainers that contributed to it.
  AgreeOnLeave agree_on_leave = nullptr;
};

// Where a pserver saves on CheckpointNotify(dir) and restores from:
// dir/pserver_<pserver_id>, so the pservers of a job share one directory.
std::string PserverCheckpointDir(const std::string& dir, int pserver_id);
// The pserver program with only its state persistable: parameters and
// optimizer state that hold a value in `scope`, not gradients. What a
// checkpoint holds.
ProgramDesc PserverState(const ProgramDesc& program, Scope* scope, const std::map<std::string, int>& grad_to_block_id);
// Loads <own_dir>'s checkpoint into `scope` (after the startup program
// ran); returns the step it was taken at.
absl::StatusOr<int64_t> LoadPserverCheckpoint(Executor& exe, Scope* scope, const std::string& own_dir,
                                              const ProgramDesc& program, const PserverConfig& config);

// Parses Fluid's `grad_to_block_id` attribute entries ("name:id").
absl::StatusOr<std::map<std::string, int>> ParseGradToBlockId(const std::vector<std::string>& entries);

// What a pserver did (tests compare these with what the trainers sent).
struct PserverStats {
  int64_t gradients_applied = 0;  // received and stored (sync) or optimized (async)
  int64_t duplicates = 0;         // calls answered as their first copy was
  int64_t steps = 0;              // sync optimize passes
};

class ParameterServer : public rpc::RpcHandler {
 public:
  // `program` is the pserver program; `scope` holds its initialized
  // persistables (the pserver startup program ran there). Both outlive this.
  static absl::StatusOr<std::unique_ptr<ParameterServer>> Create(PserverConfig config, const ProgramDesc& program,
                                                                 Scope* scope, Place place = Place{});
  ~ParameterServer() override;

  // Binds and starts answering RPCs; returns the bound endpoint.
  absl::StatusOr<std::string> Start();
  // Serves until every trainer has completed, Stop(), or an error.
  absl::Status Run();
  void Stop();
  PserverStats stats() const;

  // Times each request into the pserver's metrics (pserver_metrics.h).
  absl::Status Handle(rpc::RpcKind kind, const rpc::IncomingMessage& request, rpc::Reply* reply) override;
  // Run on the transport's own thread, saving a hand-off per message:
  // GetVariableNoBarrier and Gets in async mode, which take a short lock;
  // sends in sync mode (gradients and the BATCH/FETCH/COMPLETE control
  // messages), which store or count and wait at most for the optimize pass
  // in progress. Sync Gets wait for the other trainers, and async sends run
  // the optimize block: those stay on their pools.
  bool NeverBlocks(rpc::RpcKind kind) const override {
    return kind == rpc::RpcKind::kGetNoBarrier || (kind == rpc::RpcKind::kGet && !config_.sync_mode) ||
           (kind == rpc::RpcKind::kSend && config_.sync_mode);
  }
  // Sync Gets over a transport that can answer later (the stream
  // transports) are parked until the optimize pass ends and answered by the
  // loop thread that ends it (parameter_server_get.cc): no pool thread
  // waits, and none must be woken, per Get.
  bool Defers(rpc::RpcKind kind) const override { return kind == rpc::RpcKind::kGet && config_.sync_mode; }
  bool TryHandleDeferred(rpc::RpcKind kind, std::shared_ptr<const rpc::IncomingMessage> request,
                         const rpc::Respond& respond) override;
  uint64_t MaxRequestBytes() const override { return store_->MaxRequestBytes(); }

 private:
  ParameterServer(PserverConfig config, const ProgramDesc& program, Scope* scope, Place place);
  absl::Status RunSync();
  absl::Status RunAsync();
  std::string RestoredHint() const;
  // parameter_server_sync.cc: the sync step's blocks.
  absl::Status RunOptimizeBlocks();
  void MaybeRunEarly(const VarStore::Receivable& r);
  void ScheduleReady();
  // Starts r's block early (EarlyBlocks) when it is fed by r alone, the
  // step receives and every trainer not in `completed` has sent r.
  void TryStartEarly(const VarStore::Receivable& r, const std::set<int>& completed);
  absl::Status RunEarly(const VarStore::Receivable* r);
  absl::Status RunLrOnce();
  absl::Status HoldEarlyBlocks();
  void ResumeEarlyBlocks();
  absl::Status RunBlockLocked(int block_id, Scope* local);
  absl::Status RunLrBlock();
  // Async mode, before the optimize block of a gradient runs: the LR-decay
  // block has run once per arrival of first_grad_ (a trainer's step), and
  // at least once before any block reads the rate it computes (a trainer's
  // first gradients usually arrive before first_grad_).
  absl::Status RunLrBlockAsync(bool first_grad);
  // FAILED_PRECONDITION when the sender's job differs from this pserver's:
  // another trainer count (oar_trainers) or the other mode (oar_sync_mode).
  absl::Status CheckJobAgrees(const rpc::MessageHeader& h) const;
  // FAILED_PRECONDITION when a trainer's settings (oar_job_settings, said
  // in its first call) differ from the first trainer's, which it keeps.
  absl::Status CheckSettingsAgree(const rpc::MessageHeader& h, int trainer);
  absl::Status HandleRequest(rpc::RpcKind kind, const rpc::IncomingMessage& request, rpc::Reply* reply);
  // Keeps `s` as trainer `trainer_id`'s latest refusal (refused_) when it is
  // one (a bad or misplaced call, not a failure of the pserver's own). Takes
  // state_mu_: call with no lock held.
  void NoteRefusal(int64_t trainer_id, const absl::Status& s);
  // "; it refused trainer N: <why>" for each of refused_, for a timeout's error.
  std::string RefusalsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_mu_);
  absl::Status HandleSend(const rpc::IncomingMessage& request, int trainer);
  // parameter_server_abort.cc: a failed trainer's ABORT@RECV, checked and
  // handed to abort_ (abort_protocol.h), which answers every later call
  // with the reason; Run lingers in it (timeout_ms to tell each live
  // trainer, abort_echo_grace_ms for their echoes) before it returns.
  absl::Status HandleAbort(const rpc::MessageHeader& h, int trainer);
  // parameter_server_get.cc: Gets.
  // A Get of `kind`: its reply is marked stable when StableGets(kind).
  absl::Status HandleGet(rpc::RpcKind kind, const rpc::IncomingMessage& request, int trainer, bool barrier,
                         rpc::Reply* reply);
  // Whether a Get of `kind` is answered with a Reply the transport may let
  // the trainer read in place (rpc::Reply::stable): a sync pserver's
  // barrier Get. Its parameter is next written by an optimize block —
  // early, as its gradients complete, or after the barrier — that needs
  // every live trainer's next gradient for it (a batch barrier without it
  // is refused), and a trainer computes that only after its last read of
  // the value in the step (the copy out of the reply, or concat reading a
  // view). A trainer that completes stops counting: the parameters leave
  // the region before the next block runs (UnlendIfDue). A late or
  // duplicated reply is refused unread by the client. (Not a restored
  // pserver's: its resync replays steps.)
  bool StableGets(rpc::RpcKind kind) const {
    return kind == rpc::RpcKind::kGet && config_.sync_mode && !config_.restored;
  }
  // An elastic job's sync pserver (PserverConfig::agree_on_leave).
  bool ElasticSync() const { return config_.sync_mode && config_.trainer_members != nullptr; }
  // JOIN_HOLD@RECV (the step held, in the reply) and JOIN@RECV (its entry
  // step in oar_step, its member value in out_varname).
  absl::Status HandleJoin(const rpc::MessageHeader& h, int trainer, rpc::Reply* reply);
  // Lends the parameters the optimize blocks write (their ParamOut) to
  // trainers on this host (ServerOptions::lend, param_lending.h); null
  // (logged) when there are none or it fails.
  std::shared_ptr<const rpc::stream::SharedRegion> LendParams();
  // The parameter `name` as this pserver serves it, or why not.
  absl::StatusOr<const Variable*> ServedVar(const std::string& name, int trainer) const;
  // Times a request into the metrics from `arrived` to now (waits included)
  // and into the profiler from `began` (when this thread took it up: a
  // parked Get's span is its serving, on the thread that served it).
  void RecordRequest(rpc::RpcKind kind, const rpc::IncomingMessage& request, absl::Time arrived, absl::Time began);
  absl::Status HandleCheckpoint(const rpc::IncomingMessage& request);
  absl::Status HandlePrefetch(const rpc::IncomingMessage& request, int trainer, rpc::Reply* reply);
  // A prefetch naming a parameter block as its table (Fluid 1.5+'s
  // remote_prefetch tables): that block's rows at the ids, read under the
  // lock of the block that updates it.
  absl::Status PrefetchBlockRows(const rpc::IncomingMessage& request, int trainer, rpc::Reply* reply);
  // resync_'s verdict (resync_gate.h) for this call; a trainer's RESYNC is
  // admitted to the barrier as fetched where the gate says so, and logged.
  absl::Status CheckSynced(rpc::RpcKind kind, const rpc::MessageHeader& h, int trainer, rpc::Reply* reply,
                           bool* covered);
  // "pserver <endpoint>", and with " (trainer <id>)": how errors and logs
  // name this server and the trainer a message came from.
  std::string Name() const;
  std::string Who(int trainer_id) const;
  // The bound endpoint once Start has bound it, the configured one before.
  std::string Endpoint() const;

  PserverConfig config_;
  const ProgramDesc& program_;
  Scope* scope_;
  Place place_;
  std::unique_ptr<VarStore> store_;
  std::unique_ptr<ReplayGuard> guard_;
  std::unique_ptr<StepBarrier> barrier_;  // sync only
  RunEnv block_env_;                      // what the optimize blocks' ops see: the profiler
  std::map<int, std::unique_ptr<PreparedBlock>> blocks_;
  std::map<int, std::unique_ptr<absl::Mutex>> block_mu_;       // one per block
  std::map<std::string, int> param_block_;                     // persistable output → block writing it
  std::unique_ptr<ParamLending> lending_;                      // a sync pserver's parameters lent over shm
  absl::Mutex optimize_mu_;
  absl::Mutex lr_once_mu_;
  bool lr_ran_ ABSL_GUARDED_BY(lr_once_mu_) = false;  // this step's LR-decay run
  absl::Mutex lr_mu_;
  int64_t async_lr_due_ ABSL_GUARDED_BY(lr_mu_) = 0;   // first_grad_ arrivals (async)
  int64_t async_lr_runs_ ABSL_GUARDED_BY(lr_mu_) = 0;  // LR-decay runs (async)
  std::atomic<bool> async_lr_ran_{false};              // async_lr_runs_ > 0, read without the lock
  std::unique_ptr<EarlyBlocks> early_;                 // sync: this step's blocks that run before the barrier
  std::map<int, int> receivables_of_;                  // block → receivables feeding it
  std::string first_grad_;                     // async: its arrival advances the LR schedule
  std::unique_ptr<ThreadPool> optimize_pool_;  // sync, several optimize blocks
  std::unique_ptr<rpc::Listener> listener_;
  // Set by Start once the listener is bound; handlers may already be running
  // then (a restarted pserver's trainers are retrying), so read it with Endpoint().
  mutable absl::Mutex endpoint_mu_;
  std::string bound_endpoint_ ABSL_GUARDED_BY(endpoint_mu_);
  mutable absl::Mutex state_mu_;
  // The latest call refused per trainer id (a bad or misplaced variable,
  // another trainer count, an earlier run's call): told with a barrier's
  // timeout, as the likely reason a trainer never arrived. At most
  // kMaxRefusalsKept ids (a peer may claim any id).
  static constexpr size_t kMaxRefusalsKept = 8;
  std::map<int64_t, std::string> refused_ ABSL_GUARDED_BY(state_mu_);
  bool stopped_ ABSL_GUARDED_BY(state_mu_) = false;
  JobSettings job_settings_ ABSL_GUARDED_BY(state_mu_);  // the first trainer's
  int settings_from_ ABSL_GUARDED_BY(state_mu_) = -1;    // that trainer
  AbortProtocol abort_;                                  // a trainer's ABORT: the job stops
  TrainerActivity activity_;                             // heard and completed; the async loop waits on it
  ResyncGate resync_;                                    // restored (sync): who must resync first
  PserverStats stats_ ABSL_GUARDED_BY(state_mu_);
  Executor exe_;  // checkpoints
};

}  // namespace oar
