#include "common/framework/executor.h"

#include "absl/synchronization/mutex.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/device/device_memory.h"
#include "common/device/gpu_info.h"
#include "common/framework/prepared_block.h"

namespace oar {

namespace proto = paddle::framework::proto;

struct Executor::CacheEntry {
  uint64_t version = 0;
  std::unique_ptr<PreparedBlock> block;
  std::vector<std::string> feed_names;  // column order of the feed list
  std::vector<std::string> fetch_names;
  Scope* scope = nullptr;
  std::weak_ptr<const Scope* const> scope_alive;  // expires with *scope
  Scope* local = nullptr;                         // owned by *scope
  int runs_since_drop = 0;

  bool ScopeAlive() const { return scope != nullptr && !scope_alive.expired(); }
  // Forgets the local scope, deleting it only if its parent still lives.
  void ReleaseLocal() {
    block->Unbind();
    if (local != nullptr && ScopeAlive()) scope->DeleteScope(local);
    local = nullptr;
  }
};

Executor::Executor(Place place, ExecutorOptions options, const OpRegistry* registry)
    : place_(place), options_(options), registry_(registry) {}

Executor::~Executor() { DropCache(); }

void Executor::DropCache() {
  for (auto& [key, entry] : cache_) {
    if (entry->block != nullptr) entry->ReleaseLocal();
  }
  cache_.clear();
}

void AddFeedFetchOps(ProgramDesc* program, const std::vector<std::string>& feed_names,
                     const std::vector<std::string>& fetch_names) {
  BlockDesc* b = program->MutableBlock(0);
  VarDesc* feed = b->Var(kFeedVarName);
  feed->type = proto::VarType::FEED_MINIBATCH;
  feed->persistable = true;
  VarDesc* fetch = b->Var(kFetchVarName);
  fetch->type = proto::VarType::FETCH_LIST;
  fetch->persistable = true;
  for (size_t i = 0; i < feed_names.size(); ++i) {
    OpDesc* op = b->PrependOp();
    op->type = "feed";
    op->SetInput("X", {kFeedVarName});
    op->SetOutput("Out", {feed_names[i]});
    op->SetAttr("col", static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < fetch_names.size(); ++i) {
    OpDesc* op = b->AppendOp();
    op->type = "fetch";
    op->SetInput("X", {fetch_names[i]});
    op->SetOutput("Out", {kFetchVarName});
    op->SetAttr("col", static_cast<int32_t>(i));
  }
}

absl::StatusOr<std::unique_ptr<PreparedBlock>> Executor::Prepare(const ProgramDesc& program, int block_id) const {
  return PreparedBlock::Create(program, block_id, *registry_, place_, options_.env);
}

absl::Status Executor::RunPrepared(PreparedBlock* block, Scope* scope) {
  Scope& local = scope->NewScope();
  absl::Status s = block->Bind(scope, &local);
  if (s.ok()) s = block->Run();
  block->Unbind();
  scope->DeleteScope(&local);
  return s;
}

absl::StatusOr<Executor::CacheEntry*> Executor::GetOrPrepare(const ProgramDesc& program,
                                                             const std::vector<std::string>& feed_names,
                                                             const std::vector<std::string>& fetch_list) {
  std::string key =
      absl::StrCat(program.id(), "|", absl::StrJoin(feed_names, ","), "|", absl::StrJoin(fetch_list, ","));
  if (cache_.size() >= kMaxCachedPrograms && !cache_.count(key)) DropCache();
  auto& entry = cache_[key];
  if (entry != nullptr && entry->version == program.version()) return entry.get();

  const BlockDesc& global = program.Block(0);
  for (const auto& name : feed_names) {
    if (global.FindVar(name) == nullptr) {
      cache_.erase(key);
      return absl::InvalidArgumentError(
          absl::StrCat("feed '", name, "' is not a variable of the program's global block"));
    }
  }
  for (const auto& name : fetch_list) {
    if (global.FindVar(name) == nullptr) {
      cache_.erase(key);
      return absl::NotFoundError(
          absl::StrCat("fetch target '", name, "' is not a variable of the program's global block"));
    }
  }
  ProgramDesc with_io(program);
  AddFeedFetchOps(&with_io, feed_names, fetch_list);
  auto prepared = PreparedBlock::Create(with_io, 0, *registry_, place_, options_.env,
                                        {.front = feed_names.size(), .back = fetch_list.size()});
  if (!prepared.ok()) {
    cache_.erase(key);
    return prepared.status();
  }
  if (entry != nullptr && entry->block != nullptr) entry->ReleaseLocal();
  entry = std::make_unique<CacheEntry>();
  entry->version = program.version();
  entry->block = *std::move(prepared);
  entry->feed_names = feed_names;
  entry->fetch_names = fetch_list;
  return entry.get();
}

namespace {

// Checks a fed tensor against its variable's declared dtype and shape.
absl::Status CheckFeed(const VarDesc& var, const Tensor& t) {
  auto expected = [&] { return absl::StrCat(DataTypeName(var.dtype), "[", absl::StrJoin(var.shape, ", "), "]"); };
  if (!t.initialized()) {
    return absl::InvalidArgumentError(absl::StrCat("feed '", var.name, "' holds no data"));
  }
  if (t.dtype() != var.dtype) {
    return absl::InvalidArgumentError(absl::StrCat("feed '", var.name, "': expected ", expected(), ", got ",
                                                   DataTypeName(t.dtype()), t.dims().ToString()));
  }
  if (var.shape.empty()) return absl::OkStatus();
  bool ok = static_cast<int>(var.shape.size()) == t.dims().size();
  for (int i = 0; ok && i < t.dims().size(); ++i) {
    ok = var.shape[i] < 0 || var.shape[i] == t.dims()[i];
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("feed '", var.name, "': expected ", expected(), ", got ",
                                                   DataTypeName(t.dtype()), t.dims().ToString()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> Executor::Run(const ProgramDesc& program, Scope* scope, const FeedMap& feed,
                                                  const std::vector<std::string>& fetch_list) {
  if (place_.is_gpu()) OAR_RETURN_IF_ERROR(RequireGpu(place_.device));
  std::vector<std::string> feed_names;
  for (const auto& [name, t] : feed) feed_names.push_back(name);
  OAR_ASSIGN_OR_RETURN(CacheEntry * entry, GetOrPrepare(program, feed_names, fetch_list));

  const BlockDesc& global = program.Block(0);
  TensorList* feed_list = scope->Var(kFeedVarName)->GetMutable<TensorList>();
  feed_list->clear();
  for (const auto& [name, t] : feed) {
    OAR_RETURN_IF_ERROR(CheckFeed(*global.FindVar(name), t));
    feed_list->push_back(t);
  }

  // A different scope — or a new one at the address of a destroyed one —
  // starts over.
  if (entry->scope != scope || !entry->ScopeAlive()) {
    entry->ReleaseLocal();
    entry->scope = scope;
    entry->scope_alive = scope->LivenessToken();
  }
  if (entry->local == nullptr) {
    entry->block->Unbind();
    entry->local = &scope->NewScope();
    entry->runs_since_drop = 0;
  }
  OAR_RETURN_IF_ERROR(entry->block->Bind(scope, entry->local));
  absl::Status s = entry->block->Run();
  // A GPU's kernels run behind the host: wait for them, so a run's errors
  // are its own and the caller may read what it wrote.
  if (s.ok()) s = SyncPlace(place_);
  if (++entry->runs_since_drop >= options_.num_iteration_per_drop_scope || !s.ok()) entry->ReleaseLocal();
  feed_list->clear();
  OAR_RETURN_IF_ERROR(s);

  // Hand the fetched tensors over (not shared), so the next run cannot
  // overwrite what the caller holds.
  std::vector<Tensor> out;
  if (!fetch_list.empty()) {
    TensorList* fetched = scope->FindVar(kFetchVarName)->GetMutable<TensorList>();
    out.assign(std::make_move_iterator(fetched->begin()),
               std::make_move_iterator(fetched->begin() + static_cast<std::ptrdiff_t>(fetch_list.size())));
    fetched->clear();
  }
  return out;
}

absl::Status Executor::Close() {
  if (options_.env == nullptr || !options_.env->on_close) return absl::OkStatus();
  return options_.env->on_close();
}

}  // namespace oar
