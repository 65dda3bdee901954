#include "pserver/parameter_server.h"

#include "common/rpc/rpc_metrics.h"
#include "pserver/pserver_metrics.h"

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/api/io.h"
#include "common/base/status.h"
#include "common/base/thread_pool.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/rpc_metrics.h"
#include "glog/logging.h"
#include "pserver/pserver_metrics.h"

namespace oar {

absl::StatusOr<std::map<std::string, int>> ParseGradToBlockId(const std::vector<std::string>& entries) {
  std::map<std::string, int> out;
  for (const auto& e : entries) {
    const size_t colon = e.rfind(':');
    int id = -1;
    if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(e.substr(colon + 1), &id) || id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("grad_to_block_id entry '", e, "' is not name:block_id"));
    }
    out[e.substr(0, colon)] = id;
  }
  return out;
}

std::string PserverCheckpointDir(const std::string& dir, int pserver_id) {
  return absl::StrCat(dir, "/pserver_", pserver_id);
}

namespace {
constexpr char kStepVar[] = "@OAR_PSERVER_STEP@";  // a checkpoint's step
}  // namespace

ProgramDesc PserverState(const ProgramDesc& program, Scope* scope, const std::map<std::string, int>& grad_to_block_id) {
  // Parameters and optimizer state: not the gradients (Fluid declares the
  // merged ones persistable) and not what holds no value; and the step.
  ProgramDesc state(program);
  VarDesc* step = state.MutableBlock(0)->Var(kStepVar);
  step->dtype = DataType::kInt64;
  step->shape = {1};
  step->persistable = true;
  for (const auto& [name, v] : program.Block(0).vars()) {
    const Variable* var = scope->FindVar(name);
    const bool gradient = grad_to_block_id.count(name) > 0 || name.find("@GRAD") != std::string::npos;
    if (v.persistable && (gradient || var == nullptr || !var->IsInitialized())) {
      state.MutableBlock(0)->FindMutableVar(name)->persistable = false;
    }
  }
  return state;
}

absl::StatusOr<int64_t> LoadPserverCheckpoint(Executor& exe, Scope* scope, const std::string& own_dir,
                                              const ProgramDesc& program, const PserverConfig& config) {
  OAR_RETURN_IF_ERROR(load_checkpoint(exe, scope, own_dir, PserverState(program, scope, config.grad_to_block_id)));
  const Variable* step = scope->FindVar(kStepVar);
  if (step == nullptr || !step->IsType<Tensor>() || step->Get<Tensor>().dtype() != DataType::kInt64 ||
      step->Get<Tensor>().numel() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(own_dir, ": the checkpoint has no step"));
  }
  return step->Get<Tensor>().data<int64_t>()[0];
}

ParameterServer::ParameterServer(PserverConfig config, const ProgramDesc& program, Scope* scope, Place place)
    : config_(std::move(config)),
      program_(program),
      scope_(scope),
      place_(place),
      abort_(config_.fanin),
      activity_(config_.fanin),
      resync_(config_.restored && config_.sync_mode, config_.restored_step, config_.fanin) {}

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(PserverConfig config,
                                                                         const ProgramDesc& program, Scope* scope,
                                                                         Place place) {
  if (config.fanin < 1) return absl::InvalidArgumentError(absl::StrCat("Fanin must be >= 1, got ", config.fanin));
  if (config.transport == nullptr) return absl::InvalidArgumentError("ParameterServer needs a transport");
  OAR_RETURN_IF_ERROR(rpc::CheckEndpoint(config.endpoint));
  if (config.timeout_ms <= 0) config.timeout_ms = config.transport->options().deadline_ms;
  if (config.trainer_members && config.sync_mode && !config.agree_on_leave) {
    return absl::InvalidArgumentError(
        "an elastic sync pserver needs agree_on_leave: how the pservers agree on the steps of a trainer that left");
  }
  const int nblocks = static_cast<int>(program.NumBlocks());
  auto check_block = [&](int id, const std::string& what) {
    if (id <= 0 || id >= nblocks) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", id, " is not a sub-block of the pserver program (", nblocks, " blocks)"));
    }
    return absl::OkStatus();
  };
  for (int id : config.optimize_blocks) OAR_RETURN_IF_ERROR(check_block(id, "optimize block"));
  for (const auto& [g, id] : config.grad_to_block_id)
    OAR_RETURN_IF_ERROR(check_block(id, "grad_to_block_id of '" + g + "': block"));
  if (config.lr_decay_block_id >= 0) OAR_RETURN_IF_ERROR(check_block(config.lr_decay_block_id, "lr_decay_block_id"));
  for (const auto& [v, id] : config.prefetch_var_to_block_id) {
    OAR_RETURN_IF_ERROR(check_block(id, "prefetch_var_name_to_block_id of '" + v + "': block"));
  }

  std::unique_ptr<ParameterServer> ps(new ParameterServer(std::move(config), program, scope, place));
  const PserverConfig& c = ps->config_;
  if (c.trainer_members) ps->activity_.set_members(c.trainer_members);
  OAR_ASSIGN_OR_RETURN(ps->store_,
                       VarStore::Create(program, scope, c.fanin, c.sync_mode, c.grad_to_block_id, ps->ElasticSync()));
  for (const auto& [g, id] : c.grad_to_block_id) ++ps->receivables_of_[id];
  ps->block_env_.profiler = c.profiler;
  ps->guard_ = std::make_unique<ReplayGuard>(c.fanin);
  const BlockDesc& global = program.Block(0);
  for (const auto& [name, v] : global.vars()) {
    if (scope->FindVar(name) != nullptr) continue;  // e.g. parameters, in an ancestor scope
    Variable* var = scope->Var(name);
    if (v.type == paddle::framework::proto::VarType::SELECTED_ROWS) var->GetMutable<SelectedRows>();
  }
  // The blocks whose leading `sum` the store does as gradients arrive run
  // without it (the program itself keeps Fluid's ops).
  ProgramDesc runnable(program);
  for (int id : ps->store_->merged_blocks()) runnable.MutableBlock(static_cast<size_t>(id))->RemoveOps(0, 1);
  std::vector<int> ids = c.optimize_blocks;
  if (c.lr_decay_block_id > 0) ids.push_back(c.lr_decay_block_id);
  for (const auto& [g, id] : c.grad_to_block_id) ids.push_back(id);
  for (const auto& [v, id] : c.prefetch_var_to_block_id) ids.push_back(id);
  for (int id : ids) {
    if (ps->blocks_.count(id)) continue;
    OAR_ASSIGN_OR_RETURN(ps->blocks_[id],
                         PreparedBlock::Create(runnable, id, OpRegistry::Global(), place, &ps->block_env_));
    ps->block_mu_[id] = std::make_unique<absl::Mutex>();
    for (size_t i = 0; i < program.Block(id).OpSize(); ++i) {
      for (const auto& out : program.Block(id).Op(i).OutputArgNames()) {
        const VarDesc* v = global.FindVar(out);
        if (v != nullptr && v->persistable && id != c.lr_decay_block_id) ps->param_block_[out] = id;
      }
    }
  }
  int first = nblocks;
  for (const auto& [g, id] : c.grad_to_block_id) {
    if (id < first) {
      first = id;
      ps->first_grad_ = g;
    }
  }
  if (c.sync_mode) {  // blocks run side by side, as their gradients complete
    const size_t threads =
        std::clamp<size_t>(c.optimize_blocks.size(), 1, std::max(1u, std::thread::hardware_concurrency()));
    ps->optimize_pool_ = std::make_unique<ThreadPool>(static_cast<int>(threads));
    ps->block_env_.intra_op = ps->optimize_pool_.get();  // a large parameter's update over the pool too
    ps->early_ = std::make_unique<EarlyBlocks>(ps->optimize_pool_.get());
  }
  ParameterServer* self = ps.get();
  ps->lending_ = std::make_unique<ParamLending>(
      scope,
      [self](const std::string& param) -> absl::Mutex* {
        auto owner = self->param_block_.find(param);
        return owner == self->param_block_.end() ? nullptr : self->block_mu_.at(owner->second).get();
      },
      [self] { return self->Name(); });
  if (ps->ElasticSync()) {
    if (c.restored) {
      return absl::UnimplementedError(
          "an elastic sync job's pserver restored from a checkpoint: its trainers' steps are agreed in etcd "
          "from the job's start; start a new job (--job_id) from the checkpoint instead");
    }
    ps->barrier_ = std::make_unique<StepBarrier>(c.fanin, absl::Milliseconds(c.timeout_ms),
                                                 StepBarrier::Elastic{.min_trainers = c.trainer_members().min});
  } else if (c.sync_mode) {
    ps->barrier_ = std::make_unique<StepBarrier>(c.fanin, absl::Milliseconds(c.timeout_ms),
                                                 c.restored ? static_cast<int>(c.restored_step) : 0);
  }
  return ps;
}

ParameterServer::~ParameterServer() {
  Stop();
  listener_.reset();  // shuts down: in-flight handlers finish (their waits were released)
}

absl::StatusOr<std::string> ParameterServer::Start() {
  rpc::ServerOptions o = config_.server;
  o.endpoint = config_.endpoint;
  // A TLS server offers no shared memory.
  const bool shm = config_.transport->LendsSharedMemory() && o.tls_cert.empty();
  const rpc::RpcOptions& rpc = config_.transport->options();
  if (StableGets(rpc::RpcKind::kGet) && rpc.shm_lend_params && shm) o.lend = LendParams();
  // A trainer's next gradient for a parameter comes after its Gets of the
  // step, which wait for the optimize blocks that read this one (and a
  // batch barrier without it is refused): the sends a sync pserver gets
  // may be read where the trainer keeps them.
  o.map_lent_sends = StableGets(rpc::RpcKind::kGet) && rpc.shm_lend_sends && shm;
  OAR_ASSIGN_OR_RETURN(listener_, config_.transport->Listen(o, this));
  absl::MutexLock l(&endpoint_mu_);
  bound_endpoint_ = listener_->endpoint();
  return bound_endpoint_;
}

void ParameterServer::Stop() {
  {
    absl::MutexLock l(&state_mu_);
    stopped_ = true;
  }
  activity_.Wake();
  abort_.Stop();
  if (barrier_) barrier_->Stop();
}

PserverStats ParameterServer::stats() const {
  absl::MutexLock l(&state_mu_);
  PserverStats s = stats_;
  s.duplicates = guard_->duplicates();
  if (barrier_) s.steps = barrier_->step();
  return s;
}

std::string ParameterServer::Endpoint() const {
  absl::MutexLock l(&endpoint_mu_);
  return bound_endpoint_.empty() ? config_.endpoint : bound_endpoint_;
}

std::string ParameterServer::Name() const { return absl::StrCat("pserver ", Endpoint()); }

std::string ParameterServer::Who(int trainer_id) const { return absl::StrCat(Name(), " (trainer ", trainer_id, ")"); }

absl::Status ParameterServer::Run() {
  if (listener_ == nullptr) return absl::FailedPreconditionError("ParameterServer::Run before Start");
  absl::Status s = config_.sync_mode ? RunSync() : RunAsync();
  if (abort_.aborting()) {
    absl::Status why = abort_.Linger(activity_.completed(), absl::Milliseconds(config_.timeout_ms),
                                     absl::Milliseconds(config_.abort_echo_grace_ms));
    if (s.ok()) s = why;  // async: Run saw the job stop; a failure of its own (a timeout first) stays
  }
  return s.ok() ? s : Annotate(s, Name());
}

absl::Status ParameterServer::RunBlockLocked(int block_id, Scope* local) {
  absl::MutexLock l(block_mu_.at(block_id).get());
  const absl::Time start = absl::Now();
  PreparedBlock* b = blocks_.at(block_id).get();
  OAR_RETURN_IF_ERROR(b->Bind(scope_, local));
  absl::Status s = b->Run();
  if (local != scope_) b->Unbind();
  GetPserverMetrics().optimize_duration->Observe(absl::ToDoubleSeconds(absl::Now() - start));
  return s;
}

absl::Status ParameterServer::RunLrBlock() {
  if (config_.lr_decay_block_id <= 0) return absl::OkStatus();
  absl::WriterMutexLock l(&lr_mu_);
  return RunBlockLocked(config_.lr_decay_block_id, scope_);
}

absl::Status ParameterServer::RunLrBlockAsync(bool first_grad) {
  if (config_.lr_decay_block_id <= 0) return absl::OkStatus();
  if (!first_grad && async_lr_ran_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::WriterMutexLock l(&lr_mu_);
  if (first_grad) ++async_lr_due_;
  if (async_lr_runs_ >= std::max<int64_t>(1, async_lr_due_)) return absl::OkStatus();
  ++async_lr_runs_;
  absl::Status s = RunBlockLocked(config_.lr_decay_block_id, scope_);
  if (s.ok()) async_lr_ran_.store(true, std::memory_order_release);
  return s;
}

// A trainer that completed before this pserver's restart told the old
// process, not this one: say so, as that is the likely cause of the wait.
std::string ParameterServer::RestoredHint() const {
  return absl::StrCat("; this pserver restarted from its step-", config_.restored_step,
                      " checkpoint, so a trainer that completed before the restart is not known to have completed");
}

std::string ParameterServer::RefusalsLocked() const {
  std::string out;
  for (const auto& [tid, refusal] : refused_) absl::StrAppend(&out, "; it refused trainer ", tid, ": ", refusal);
  return out;
}

absl::Status ParameterServer::RunAsync() {
  absl::Status s = activity_.AwaitAllCompleted(absl::Milliseconds(config_.timeout_ms), [this] {
    if (abort_.aborting()) return true;
    absl::MutexLock l(&state_mu_);
    return stopped_;
  });
  if (s.ok()) return s;
  absl::MutexLock l(&state_mu_);
  return absl::Status(s.code(), absl::StrCat(s.message(), config_.restored ? RestoredHint() : "", RefusalsLocked()));
}

absl::Status ParameterServer::HandleCheckpoint(const rpc::IncomingMessage& request) {
  const std::string& dir = request.header().meta.out_varname();
  if (dir.empty()) return absl::InvalidArgumentError("CheckpointNotify without a directory (out_varname)");
  if (barrier_) OAR_RETURN_IF_ERROR(HoldEarlyBlocks());  // a step boundary: no block of the next step has run
  absl::Cleanup resume = [this] {
    if (barrier_) ResumeEarlyBlocks();
  };
  absl::MutexLock opt(&optimize_mu_);
  absl::WriterMutexLock lr(&lr_mu_);
  std::vector<std::unique_ptr<absl::MutexLock>> locks;  // async: no block mid-update
  for (auto& [id, mu] : block_mu_) locks.push_back(std::make_unique<absl::MutexLock>(mu.get()));
  int64_t* step = scope_->Var(kStepVar)->GetMutable<Tensor>()->mutable_data<int64_t>(DDim{1});
  *step = barrier_ ? barrier_->step() : 0;
  const ProgramDesc saved = PserverState(program_, scope_, config_.grad_to_block_id);
  const std::string own = PserverCheckpointDir(dir, config_.pserver_id);
  absl::Status s = save_checkpoint(exe_, scope_, own, saved);
  if (s.ok()) LOG(INFO) << Name() << ": checkpoint saved to " << own;
  return Annotate(s, absl::StrCat(Name(), " checkpoint to ", own));
}

}  // namespace oar
