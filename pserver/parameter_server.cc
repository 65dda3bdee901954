#include "pserver/parameter_server.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/api/io.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "glog/logging.h"

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

ParameterServer::ParameterServer(PserverConfig config, const ProgramDesc& program, Scope* scope, Place place)
    : config_(std::move(config)), program_(program), scope_(scope), place_(place) {}

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(PserverConfig config,
                                                                         const ProgramDesc& program, Scope* scope,
                                                                         Place place) {
  if (config.fanin < 1) return absl::InvalidArgumentError(absl::StrCat("Fanin must be >= 1, got ", config.fanin));
  OAR_RETURN_IF_ERROR(rpc::CheckEndpoint(config.endpoint));
  if (config.timeout_ms <= 0) config.timeout_ms = FLAGS_rpc_deadline;
  const int nblocks = static_cast<int>(program.NumBlocks());
  auto check_block = [&](int id, const std::string& what) {
    if (id <= 0 || id >= nblocks) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", id, " is not a sub-block of the pserver program (",
                                                     nblocks, " blocks)"));
    }
    return absl::OkStatus();
  };
  for (int id : config.optimize_blocks) OAR_RETURN_IF_ERROR(check_block(id, "optimize block"));
  for (const auto& [g, id] : config.grad_to_block_id) OAR_RETURN_IF_ERROR(check_block(id, "grad_to_block_id of '" + g + "': block"));
  if (config.lr_decay_block_id >= 0) OAR_RETURN_IF_ERROR(check_block(config.lr_decay_block_id, "lr_decay_block_id"));

  std::unique_ptr<ParameterServer> ps(new ParameterServer(std::move(config), program, scope, place));
  const BlockDesc& global = program.Block(0);
  for (const auto& [name, v] : global.vars()) {
    if (scope->FindVar(name) != nullptr) continue;  // e.g. parameters, in an ancestor scope
    Variable* var = scope->Var(name);
    if (v.type == paddle::framework::proto::VarType::SELECTED_ROWS) var->GetMutable<SelectedRows>();
  }
  std::vector<int> ids = ps->config_.optimize_blocks;
  if (ps->config_.lr_decay_block_id > 0) ids.push_back(ps->config_.lr_decay_block_id);
  for (const auto& [g, id] : ps->config_.grad_to_block_id) ids.push_back(id);
  for (int id : ids) {
    if (ps->blocks_.count(id)) continue;
    OAR_ASSIGN_OR_RETURN(ps->blocks_[id], PreparedBlock::Create(program, id, OpRegistry::Global(), place));
    ps->block_mu_[id] = std::make_unique<absl::Mutex>();
    for (size_t i = 0; i < program.Block(id).OpSize(); ++i) {
      for (const auto& p : program.Block(id).Op(i).Input("Param")) ps->params_.insert(p);
      for (const auto& out : program.Block(id).Op(i).OutputArgNames()) {
        const VarDesc* v = global.FindVar(out);
        if (v != nullptr && v->persistable) ps->param_block_[out] = id;
      }
    }
  }
  int first = nblocks;
  for (const auto& [g, id] : ps->config_.grad_to_block_id) {
    if (id < first) {
      first = id;
      ps->first_grad_ = g;
    }
  }
  if (ps->config_.optimize_blocks.size() > 1) {
    const size_t threads = std::min<size_t>(ps->config_.optimize_blocks.size(),
                                            std::max(1u, std::thread::hardware_concurrency()));
    ps->optimize_pool_ = std::make_unique<ThreadPool>(static_cast<int>(threads));
  }
  if (ps->config_.sync_mode) {
    ps->barrier_ = std::make_unique<StepBarrier>(ps->config_.fanin, absl::Milliseconds(ps->config_.timeout_ms));
  }
  {
    absl::MutexLock l(&ps->state_mu_);
    ps->last_message_ = absl::Now();
  }
  return ps;
}

ParameterServer::~ParameterServer() {
  Stop();
  server_.reset();  // shuts down: in-flight handlers finish (their waits were released)
}

absl::StatusOr<std::string> ParameterServer::Start() {
  rpc::ServerOptions o = config_.server;
  o.endpoint = config_.endpoint;
  OAR_ASSIGN_OR_RETURN(server_, rpc::RpcServer::Start(o, this));
  bound_endpoint_ = server_->endpoint();
  return bound_endpoint_;
}

void ParameterServer::Stop() {
  {
    absl::MutexLock l(&state_mu_);
    stopped_ = true;
  }
  if (barrier_) barrier_->Stop();
}

std::string ParameterServer::Who(int trainer_id) const {
  return absl::StrCat("pserver ", bound_endpoint_.empty() ? config_.endpoint : bound_endpoint_, " (trainer ",
                      trainer_id, ")");
}

absl::Status ParameterServer::Run() {
  if (server_ == nullptr) return absl::FailedPreconditionError("ParameterServer::Run before Start");
  absl::Status s = config_.sync_mode ? RunSync() : RunAsync();
  return s.ok() ? s : Annotate(s, absl::StrCat("pserver ", bound_endpoint_));
}

absl::Status ParameterServer::RunSync() {
  while (true) {
    absl::StatusOr<bool> more = barrier_->AwaitPhaseEnd();
    if (!more.ok()) {
      absl::MutexLock l(&state_mu_);
      if (stopped_ && absl::IsCancelled(more.status())) return absl::OkStatus();  // SIGTERM: clean exit
      return more.status();
    }
    if (!*more) return absl::OkStatus();  // every trainer completed
    if (barrier_->phase() != StepBarrier::Phase::kOptimize) continue;
    absl::Status s;
    {
      absl::MutexLock l(&optimize_mu_);
      s = RunOptimizeBlocks();
    }
    if (!s.ok()) {
      barrier_->Stop();
      return s;
    }
    barrier_->OptimizeDone();
  }
}

absl::Status ParameterServer::RunBlockLocked(int block_id, Scope* local) {
  absl::MutexLock l(block_mu_.at(block_id).get());
  PreparedBlock* b = blocks_.at(block_id).get();
  OAR_RETURN_IF_ERROR(b->Bind(scope_, local));
  absl::Status s = b->Run();
  if (local != scope_) b->Unbind();
  return s;
}

absl::Status ParameterServer::RunOptimizeBlocks() {
  if (config_.lr_decay_block_id > 0) OAR_RETURN_IF_ERROR(RunBlockLocked(config_.lr_decay_block_id, scope_));
  const auto& ids = config_.optimize_blocks;
  if (ids.size() <= 1) {
    for (int id : ids) OAR_RETURN_IF_ERROR(RunBlockLocked(id, scope_));
    return absl::OkStatus();
  }
  // Blocks touch disjoint parameters: run them side by side.
  absl::Mutex mu;
  absl::Status first;
  size_t left = ids.size();
  for (int id : ids) {
    optimize_pool_->Schedule([this, id, &mu, &first, &left] {
      absl::Status s = RunBlockLocked(id, scope_);
      absl::MutexLock l(&mu);
      first.Update(s);
      --left;
    });
  }
  absl::MutexLock l(&mu);
  mu.Await(absl::Condition(+[](size_t* n) { return *n == 0; }, &left));
  return first;
}

absl::Status ParameterServer::RunAsync() {
  absl::MutexLock l(&state_mu_);
  const absl::Duration idle = absl::Milliseconds(config_.timeout_ms);
  while (true) {
    auto done = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return stopped_ || static_cast<int>(completed_.size()) == config_.fanin;
    };
    state_mu_.AwaitWithTimeout(absl::Condition(+[](decltype(done)* d) { return (*d)(); }, &done),
                               absl::Milliseconds(100));
    if (done()) return absl::OkStatus();
    if (absl::Now() - last_message_ > idle) {
      std::vector<int> missing;
      for (int t = 0; t < config_.fanin; ++t) {
        if (!completed_.count(t)) missing.push_back(t);
      }
      return absl::DeadlineExceededError(absl::StrCat("no message from any trainer for ", absl::FormatDuration(idle),
                                                      "; trainer(s) ", absl::StrJoin(missing, ", "),
                                                      " never completed (FLAGS_rpc_deadline)"));
    }
  }
}

absl::Status ParameterServer::Handle(rpc::RpcKind kind, rpc::Received& request, rpc::Reply* reply) {
  const int64_t tid = request.meta.trainer_id();
  if (tid < 0 || tid >= config_.fanin) {
    return absl::InvalidArgumentError(absl::StrCat("pserver ", bound_endpoint_, ": trainer_id ", tid,
                                                   " is not in [0, ", config_.fanin, ") (Fanin)"));
  }
  const int id = static_cast<int>(tid);
  {
    absl::MutexLock l(&state_mu_);
    last_message_ = absl::Now();
  }
  const std::string& name = request.meta.varname();
  switch (kind) {
    case rpc::RpcKind::kSend:
      if (name == rpc::kBatchBarrier) return barrier_ ? barrier_->BatchBarrier(id) : absl::OkStatus();
      if (name == rpc::kFetchBarrier) return barrier_ ? barrier_->FetchBarrier(id) : absl::OkStatus();
      if (name == rpc::kComplete) {
        if (barrier_) barrier_->Complete(id);
        absl::MutexLock l(&state_mu_);
        completed_.insert(id);
        LOG(INFO) << "pserver " << bound_endpoint_ << ": trainer " << id << " completed";
        return absl::OkStatus();
      }
      return HandleSend(request);
    case rpc::RpcKind::kGet: return HandleGet(request, config_.sync_mode, reply);
    case rpc::RpcKind::kGetNoBarrier: return HandleGet(request, false, reply);
    case rpc::RpcKind::kCheckpointNotify: return HandleCheckpoint(request);
    case rpc::RpcKind::kPrefetch:
      return absl::UnimplementedError("PrefetchVariable: distributed lookup tables are not supported yet");
  }
  return absl::InternalError("unknown RPC kind");
}

std::string ParameterServer::TargetName(const std::string& name, int64_t trainer_id) const {
  std::string per_trainer = absl::StrCat(name, ".trainer_", trainer_id);
  return program_.Block(0).FindVar(per_trainer) != nullptr ? per_trainer : name;
}

Variable ParameterServer::SpareBuffer(rpc::RpcKind kind, const sendrecv::VariableMessage& meta) {
  if (kind != rpc::RpcKind::kSend) return {};
  const std::string target = TargetName(meta.varname(), meta.trainer_id());
  absl::MutexLock l(&recv_mu_);
  auto it = spares_.find(target);
  if (it == spares_.end()) return {};
  Variable v = std::move(it->second);
  spares_.erase(it);
  return v;
}

absl::StatusOr<std::string> ParameterServer::Target(const std::string& name, int trainer_id,
                                                    const Variable& value) const {
  const std::string target = TargetName(name, trainer_id);
  const VarDesc* desc = program_.Block(0).FindVar(target);
  if (desc == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(Who(trainer_id), ": no variable '", name, "' to receive"));
  }
  // A name that carries a trainer suffix (as the transpiler names them)
  // must carry the sender's own id: one trainer must not fill another's slot.
  const size_t suffix = target.rfind(".trainer_");
  if (suffix != std::string::npos && target.substr(suffix + 9) != std::to_string(trainer_id)) {
    return absl::InvalidArgumentError(absl::StrCat(Who(trainer_id), ": '", name, "' belongs to another trainer"));
  }
  if (params_.count(target)) {  // Fluid's merged gradients are persistable too: only parameters are refused
    return absl::InvalidArgumentError(absl::StrCat(Who(trainer_id), ": '", name,
                                                   "' is a parameter here; trainers send gradients"));
  }
  const bool sparse = value.IsType<SelectedRows>();
  const Tensor& t = sparse ? value.Get<SelectedRows>().value : value.Get<Tensor>();
  auto mismatch = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(Who(trainer_id), ": '", name, "' ", what));
  };
  if (t.dtype() != desc->dtype) {
    return mismatch(absl::StrCat("has dtype ", DataTypeName(t.dtype()), ", the pserver's is ", DataTypeName(desc->dtype)));
  }
  const DDim& d = t.dims();
  const auto& want = desc->shape;
  bool ok = static_cast<size_t>(d.size()) == want.size();
  for (size_t i = sparse ? 1 : 0; ok && i < want.size(); ++i) ok = want[i] < 0 || want[i] == d[static_cast<int>(i)];
  if (sparse && ok && !want.empty() && want[0] >= 0 && value.Get<SelectedRows>().height != want[0]) ok = false;
  if (!ok) {
    return mismatch(absl::StrCat("has shape ", d.ToString(), sparse ? " (SelectedRows)" : "", ", the pserver's is [",
                                 absl::StrJoin(want, ", "), "]"));
  }
  return target;
}

absl::Status ParameterServer::HandleSend(rpc::Received& request) {
  const std::string name = request.meta.varname();
  const int id = static_cast<int>(request.meta.trainer_id());
  if (!request.var.IsInitialized()) {
    return absl::InvalidArgumentError(absl::StrCat(Who(id), ": '", name, "' carries no value"));
  }
  OAR_ASSIGN_OR_RETURN(std::string target, Target(name, id, request.var));
  if (config_.sync_mode) {
    OAR_RETURN_IF_ERROR(barrier_->BeforeGradient(id));
    absl::MutexLock l(&recv_mu_);
    Variable* dst = scope_->FindVar(target);
    if (dst == nullptr) dst = scope_->Var(target);
    std::swap(*dst, request.var);
    spares_[target] = std::move(request.var);  // the previous value's buffer takes the next payload
    return absl::OkStatus();
  }
  auto block = config_.grad_to_block_id.find(name);
  if (block == config_.grad_to_block_id.end()) {
    return absl::InvalidArgumentError(absl::StrCat(Who(id), ": no optimize block for '", name, "'"));
  }
  Scope* child = &scope_->NewScope();
  *child->Var(target) = std::move(request.var);
  absl::Status s;
  if (name == first_grad_ && config_.lr_decay_block_id > 0) s = RunBlockLocked(config_.lr_decay_block_id, scope_);
  if (s.ok()) s = RunBlockLocked(block->second, child);
  {
    absl::MutexLock l(&recv_mu_);
    spares_[target] = std::move(*child->Var(target));
  }
  scope_->DeleteScope(child);
  return s;
}

absl::Status ParameterServer::HandleGet(rpc::Received& request, bool barrier, rpc::Reply* reply) {
  const std::string& name = request.meta.varname();
  const int id = static_cast<int>(request.meta.trainer_id());
  const VarDesc* desc = program_.Block(0).FindVar(name);
  const Variable* v = desc != nullptr ? scope_->FindVar(name) : nullptr;
  if (v == nullptr || !v->IsInitialized()) {
    return absl::NotFoundError(absl::StrCat(Who(id), ": no variable '", name, "' to serve"));
  }
  if (barrier) OAR_RETURN_IF_ERROR(barrier_->BeforeGet(id));
  reply->name = name;
  // Async: the block updating this parameter may be running; take its lock.
  auto owner = config_.sync_mode ? param_block_.end() : param_block_.find(name);
  std::unique_ptr<absl::MutexLock> l;
  if (owner != param_block_.end()) l = std::make_unique<absl::MutexLock>(block_mu_.at(owner->second).get());
  reply->owned = *v;  // shares the buffer; the next update writes a new one
  return absl::OkStatus();
}

absl::Status ParameterServer::HandleCheckpoint(const rpc::Received& request) {
  const std::string& dir = request.meta.out_varname();
  if (dir.empty()) return absl::InvalidArgumentError("CheckpointNotify without a directory (out_varname)");
  absl::MutexLock opt(&optimize_mu_);
  std::vector<std::unique_ptr<absl::MutexLock>> locks;  // async: no block mid-update
  for (auto& [id, mu] : block_mu_) locks.push_back(std::make_unique<absl::MutexLock>(mu.get()));
  // Parameters and optimizer state: not the gradients (Fluid declares the
  // merged ones persistable) and not what holds no value yet.
  ProgramDesc saved(program_);
  for (const auto& [name, v] : program_.Block(0).vars()) {
    const Variable* var = scope_->FindVar(name);
    const bool gradient = config_.grad_to_block_id.count(name) > 0 || name.find("@GRAD") != std::string::npos;
    if (v.persistable && (gradient || var == nullptr || !var->IsInitialized())) {
      saved.MutableBlock(0)->FindMutableVar(name)->persistable = false;
    }
  }
  absl::Status s = save_checkpoint(exe_, scope_, dir, saved);
  if (s.ok()) LOG(INFO) << "pserver " << bound_endpoint_ << ": checkpoint saved to " << dir;
  return Annotate(s, absl::StrCat("pserver ", bound_endpoint_, " checkpoint to ", dir));
}

}  // namespace oar
