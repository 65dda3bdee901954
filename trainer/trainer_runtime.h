// TrainerRuntime: what a trainer process does with its (transpiled)
// programs: owns its network objects (a transport made of Options::rpc —
// wrapped by its fault schedule when one is set — or the one given, and the
// RPC client over it), waits (bounded by the RPC deadline) until every
// pserver accepts connections, runs the startup program (which pulls the
// parameters), then one step per Step() call — on one CPU place with the
// Executor, or data-parallel over several with the ParallelExecutor, whose
// SSA graph runs the RPC ops once, on place 0, after the places' gradients
// are all-reduced — and Close() says COMPLETE to every pserver. In nccl2
// mode there are no pservers: the trainers join one collective and the
// ParallelExecutor all-reduces gradients across them (see Options::nccl2).
//
//   OAR_ASSIGN_OR_RETURN(auto rt, TrainerRuntime::Create(trainer, startup, {.loss = "mean_0.tmp_0"}));
//   OAR_ASSIGN_OR_RETURN(float loss, rt->Step({{"x", xs}, {"y", ys}}));
//   OAR_RETURN_IF_ERROR(rt->Close());
//
// Thread-safety: one thread drives a runtime.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/base/job_settings.h"
#include "common/device/place.h"
#include "common/framework/executor.h"
#include "common/framework/scope.h"
#include "common/rpc/rpc_client.h"
#include "trainer/communicator.h"
#include "trainer/geo_communicator.h"
#include "trainer/parallel_executor.h"

namespace oar {

class Profiler;  // common/profiler/profiler.h

class TrainerRuntime {
 public:
  struct Options {
    std::string loss;           // the loss variable, fetched every step
    std::vector<Place> places;  // empty or one: the plain Executor
    BuildStrategy build;
    std::vector<std::string> pservers;    // waited for before the startup program
    bool sync_mode = true;                // pserver mode: how the pservers train (told to them in every call)
    // Null: one the runtime makes of `rpc` (rpc::MakeTransport). Otherwise
    // it must outlive the runtime, and `rpc` is not read.
    rpc::Transport* transport = nullptr;
    rpc::RpcOptions rpc;
    // nccl2 mode: no pservers; the startup program's gen_nccl_id gives every
    // trainer the same id, from which they join one collective (the TCP ring
    // among trainer_endpoints on CPUs), take trainer 0's parameters, and the
    // ParallelExecutor all-reduces gradients across them every step.
    bool nccl2 = false;
    int trainers = 1;
    int trainer_id = 0;
    std::vector<std::string> trainer_endpoints;
    // nccl2 on CPUs, how the trainers all-reduce (JoinOptions::transport).
    std::string collective_transport = "auto";
    // nccl2 mode, elastic: Create joins no ring (the startup program holds
    // no gen_nccl_id); the caller gives each ring to Regroup.
    bool elastic_ring = false;
    // What every trainer of the job must share (common/base/job_settings.h):
    // compared by the pservers at the first call (pserver mode) or among
    // the trainers when they join (nccl2 mode); a difference fails the
    // trainer, naming it. Empty: not compared.
    JobSettings settings;
    // The incarnation of the trainer's RPC calls (rpc::ClientOptions); 0:
    // a new one. A process that may speak for the trainer after the runtime
    // is gone (its ABORT) draws it first and passes it here.
    uint64_t incarnation = 0;
    // Pserver mode: an unreachable pserver is awaited until --rpc_deadline
    // (rpc::ClientOptions::await_restarts): the job checkpoints, so one
    // that died comes back from its checkpoint.
    bool await_pserver_restarts = false;
    // Run on the trainer's scope right after the startup program (and, in
    // nccl2 mode, before trainer 0's values are broadcast), e.g. to load
    // saved parameters.
    std::function<absl::Status(Executor& exe, Scope* scope)> after_startup;
    // Pserver mode: how the trainer waits for the pservers to answer (an
    // elastic job's also stops when the job ends meanwhile); unset: up to
    // the client's deadline (rpc::RpcClient::WaitServerReady).
    std::function<absl::Status(rpc::RpcClient* client)> wait_for_pservers;
    // Pserver mode: run once the pservers answer, before the startup
    // program pulls the parameters (an elastic sync job's trainer joins
    // the pservers' steps there, through the runtime's own client).
    std::function<absl::Status(rpc::RpcClient* client)> before_pull;
    // rpc::ClientOptions::barrier_after_sends (an elastic sync job).
    bool barrier_after_sends = false;
    // Async pserver mode with Fluid's communicator (a program transpiled
    // with sync_mode=false and runtime_split_send_recv, or half_async): its
    // send ops queue, a background thread merges and sends, and Close()
    // sends what is queued before COMPLETE. Unset: the ops call the pservers.
    std::optional<CommunicatorOptions> communicator;
    // GEO-SGD (a program transpiled with geo_sgd_mode): the parameters the
    // trainer exchanges with the pservers, and how often. Empty: none.
    std::vector<GeoParam> geo_params;
    GeoOptions geo;
    // Times every op of the training steps (not the startup); null: none.
    Profiler* profiler = nullptr;
  };
  static absl::StatusOr<std::unique_ptr<TrainerRuntime>> Create(ProgramDesc main, const ProgramDesc& startup,
                                                                Options options);

  // One step on `feed` (split across the places); the mean loss.
  absl::StatusOr<float> Step(const FeedMap& feed);
  // Says COMPLETE to the pservers (they stop waiting for this trainer); in
  // nccl2 mode, waits (bounded) for every trainer to get here.
  absl::Status Close();
  // nccl2 mode: every trainer says how many steps it has this epoch and all
  // take the fewest, so none waits for a collective the others never call
  // (Fluid hangs here). `everyone` gets each trainer's count. Without a
  // collective: `mine`.
  absl::StatusOr<int64_t> AgreeOnSteps(int64_t mine, std::vector<int64_t>* everyone);

  // The scope that holds the parameters after each step (place 0's).
  Scope* scope() { return &scope_; }
  Executor& executor() { return *exe_; }
  // The trainer program it steps.
  const ProgramDesc& program() const { return main_; }
  rpc::RpcClient* client() { return client_.get(); }
  // The communicator, when Options::communicator asked for one.
  Communicator* communicator() { return communicator_.get(); }
  // GEO-SGD's, when Options::geo_params named parameters.
  GeoCommunicator* geo() { return geo_.get(); }
  size_t num_places() const { return pe_ ? pe_->num_places() : 1; }
  // Several places: the scope's persistables copied to the executor's other
  // places, after a run outside it changed them (an elastic sync trainer's
  // idle step pulls the parameters into the scope). OK with one place.
  absl::Status SpreadScopeToPlaces() {
    return pe_ && pe_->num_places() > 1 ? pe_->SpreadFromPlace0() : absl::OkStatus();
  }
  // nccl2 mode: the backend the trainers all-reduce through ("shm",
  // "tcp-ring", "nccl"); empty without a collective.
  std::string collective_backend() const { return collective_ ? collective_->backend() : std::string(); }
  // nccl2 mode: the trainers' communicator, for the caller's own exchanges
  // between steps (the data layer's global shuffle); null without one.
  Collective* collective() { return collective_.get(); }
  // Elastic nccl2 (Options::elastic_ring): steps from now on all-reduce
  // over `ring`, in which this trainer has `ring->rank()` of
  // `ring->size()` (the loss scaled to match), once its trainers agree on
  // the job's settings (Options::settings). Drops the previous ring. The
  // new executor copies the scope's persistables to its other places, so a
  // commit restored into the scope before Regroup reaches every place.
  absl::Status Regroup(std::unique_ptr<Collective> ring);
  // Drops the ring (and the executor over it): steps run alone until the
  // next Regroup.
  void DropRing();

 private:
  TrainerRuntime() = default;
  absl::Status JoinCollective();
  // nccl2 mode: every trainer's options_.settings against trainer 0's.
  absl::Status AgreeOnSettings();

  Options options_;
  ProgramDesc main_;
  std::unique_ptr<rpc::Transport> own_transport_, fault_transport_;
  std::unique_ptr<rpc::RpcClient> client_;
  std::unique_ptr<Collective> collective_;      // nccl2 mode
  std::unique_ptr<Communicator> communicator_;  // async pserver mode, when asked
  std::unique_ptr<GeoCommunicator> geo_;        // GEO-SGD
  RunEnv env_;
  std::unique_ptr<Executor> exe_;
  Scope scope_;
  std::unique_ptr<ParallelExecutor> pe_;
  bool closed_ = false;
};

}  // namespace oar
