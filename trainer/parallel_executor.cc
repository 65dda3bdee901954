#include "trainer/parallel_executor.h"
#include "trainer/parallel_executor_compiled.h"

#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/base/status.h"
#include "common/device/device_memory.h"
#include "common/device/gpu_info.h"
#include "common/framework/prepared_block.h"
#include "common/framework/tensor_io.h"
#include "common/metrics/metrics.h"
#include "trainer/collective/nccl_places.h"
#include "trainer/feed_split.h"
#include "trainer/fuse_elewise_add_act_pass.h"

namespace oar {

namespace {

// All CPUs, or all GPUs each named once; every GPU visible.
absl::Status CheckPlaces(const std::vector<Place>& places) {
  std::set<int> gpus;
  for (const Place& p : places) {
    if (p.is_gpu() != places[0].is_gpu()) {
      return absl::InvalidArgumentError(absl::StrCat("ParallelExecutor: places mix ", places[0].ToString(), " and ",
                                                     p.ToString(), "; give CPU places only or GPUs only"));
    }
    if (p.is_gpu() && !gpus.insert(p.device).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ParallelExecutor: ", p.ToString(), " is given twice; each place needs a GPU of its own"));
    }
  }
  for (int g : gpus) OAR_RETURN_IF_ERROR(Annotate(RequireGpu(g), "ParallelExecutor"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParallelExecutor>> ParallelExecutor::Create(
    std::vector<Place> places, const std::string& loss_name, const ProgramDesc& main, Scope* scope, BuildStrategy build,
    ExecutionStrategy exec, int num_trainers, int trainer_id, const ParallelExecutor* share_vars_from,
    const RunEnv* env, Collective* collective) {
  if (places.empty()) return absl::InvalidArgumentError("ParallelExecutor needs at least one place");
  if (share_vars_from != nullptr) {
    if (share_vars_from->places_.size() != places.size()) {
      return absl::InvalidArgumentError(absl::StrCat("share_vars_from has ", share_vars_from->places_.size(),
                                                     " places, this executor ", places.size()));
    }
    if (scope != nullptr && scope != share_vars_from->scope_) {
      return absl::InvalidArgumentError("share_vars_from runs in another scope than the one given");
    }
    scope = share_vars_from->scope_;
  }
  if (scope == nullptr) return absl::InvalidArgumentError("ParallelExecutor needs a scope");
  if (exec.num_iteration_per_run < 1 || exec.num_iteration_per_drop_scope < 1) {
    return absl::InvalidArgumentError(absl::StrCat("num_iteration_per_run (", exec.num_iteration_per_run,
                                                   ") and num_iteration_per_drop_scope (",
                                                   exec.num_iteration_per_drop_scope, ") must be >= 1"));
  }
  if (!loss_name.empty() && main.Block(0).FindVar(loss_name) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("loss '", loss_name, "' is not a variable of the program"));
  }
  if (num_trainers < 1 || trainer_id < 0 || trainer_id >= num_trainers) {
    return absl::InvalidArgumentError(absl::StrCat("trainer_id ", trainer_id, " is not in [0, ", num_trainers, ")"));
  }
  OAR_RETURN_IF_ERROR(CheckPlaces(places));
  if (places[0].is_gpu() && exec.num_threads != 0 && exec.num_threads != static_cast<int>(places.size())) {
    return absl::InvalidArgumentError(absl::StrCat("ParallelExecutor: num_threads ", exec.num_threads, " over ",
                                                   places.size(),
                                                   " GPUs; a GPU's ops run on one thread of their "
                                                   "own (0 or one per GPU)"));
  }
  if (num_trainers > 1 && places.size() > 1 && places[0].is_gpu()) {
    return absl::UnimplementedError(absl::StrCat(
        "ParallelExecutor: nccl2 mode with ", places.size(),
        " GPUs in one trainer is not supported (a second NCCL communicator on a GPU beside the process's clique "
        "may deadlock): run one trainer per GPU"));
  }
  std::unique_ptr<ParallelExecutor> pe(new ParallelExecutor());
  pe->places_ = std::move(places);
  pe->loss_name_ = loss_name;
  pe->program_ = std::make_unique<ProgramDesc>(main);
  pe->build_ = build;
  pe->exec_ = exec;
  pe->num_trainers_ = num_trainers;
  pe->trainer_id_ = trainer_id;
  pe->env_ = env;
  if (num_trainers > 1) {
    Collective* c = collective;
    if (c == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("ParallelExecutor: ", num_trainers, " trainers but no collective to all-reduce across them"));
    }
    if (c->size() != num_trainers || c->rank() != trainer_id) {
      return absl::InvalidArgumentError(absl::StrCat("ParallelExecutor: trainer ", trainer_id, " of ", num_trainers,
                                                     ", but the collective is rank ", c->rank(), " of ", c->size()));
    }
    pe->cross_ = c;
    pe->ordered_ = std::make_unique<OrderedCollectives>();
  }
  pe->scope_ = scope;
  const size_t n = pe->places_.size();
  // Place 0 uses the caller's scope; the others get copies of its
  // persistables, or share those of `share_vars_from`.
  pe->place_scopes_.push_back(scope);
  pe->owns_place_scopes_ = share_vars_from == nullptr;
  for (size_t p = 1; p < n && !pe->owns_place_scopes_; ++p)
    pe->place_scopes_.push_back(share_vars_from->place_scopes_[p]);
  for (size_t p = 1; p < n && pe->owns_place_scopes_; ++p) pe->place_scopes_.push_back(&scope->NewScope());
  OAR_RETURN_IF_ERROR(pe->CopyPersistablesFromPlace0());
  if (n > 1 && pe->places_[0].is_gpu()) {
    if (share_vars_from != nullptr && share_vars_from->nccl_ != nullptr) {
      pe->nccl_ = share_vars_from->nccl_;
    } else {
      std::vector<int> devices;
      for (const Place& p : pe->places_) devices.push_back(p.device);
      OAR_ASSIGN_OR_RETURN(pe->nccl_, NcclPlaces::Create(devices));
    }
  }
  // The copies to the GPUs have landed before any step writes a source.
  for (const Place& p : pe->places_) OAR_RETURN_IF_ERROR(Annotate(SyncPlace(p), p.ToString()));
  pe->local_scopes_.assign(n, nullptr);
  pe->pool_ = std::make_unique<ThreadPool>(exec.num_threads > 0 ? exec.num_threads : static_cast<int>(n));
  return pe;
}

ParallelExecutor::~ParallelExecutor() {
  pool_.reset();
  DropLocalExeScopes();
  for (size_t p = 1; p < place_scopes_.size() && owns_place_scopes_; ++p) scope_->DeleteScope(place_scopes_[p]);
}

void ParallelExecutor::DropLocalExeScopes() {
  for (auto& [key, c] : compiled_) {
    for (auto& b : c->blocks) b->Unbind();
  }
  for (size_t p = 0; p < local_scopes_.size(); ++p) {
    if (local_scopes_[p] != nullptr) place_scopes_[p]->DeleteScope(local_scopes_[p]);
    local_scopes_[p] = nullptr;
  }
  runs_since_drop_ = 0;
}

absl::StatusOr<ParallelExecutor::Compiled*> ParallelExecutor::GetOrCompile(const std::vector<std::string>& feed_names,
                                                                           const std::vector<std::string>& fetch_list) {
  const std::string key = absl::StrCat(absl::StrJoin(feed_names, ","), "|", absl::StrJoin(fetch_list, ","));
  auto& slot = compiled_[key];
  if (slot != nullptr) return slot.get();
  for (const auto& f : fetch_list) {
    if (program_->Block(0).FindVar(f) == nullptr) {
      compiled_.erase(key);
      return absl::NotFoundError(absl::StrCat("fetch target '", f, "' is not a variable of the program"));
    }
  }
  const size_t n = places_.size();
  ProgramDesc with_io(*program_);
  AddFeedFetchOps(&with_io, feed_names, fetch_list);
  // Scale loss@GRAD so that the all-reduced sum is the mean over all samples.
  if (build_.gradient_scale_strategy != BuildStrategy::GradientScaleStrategy::kCustomized && !loss_name_.empty()) {
    const float scale = build_.gradient_scale_strategy == BuildStrategy::GradientScaleStrategy::kOne
                            ? 1.0f
                            : 1.0f / static_cast<float>(n * static_cast<size_t>(num_trainers_));
    BlockDesc* b = with_io.MutableBlock(0);
    for (size_t i = 0; i < b->OpSize(); ++i) {
      const OpDesc& op = b->Op(i);
      if (op.type == "fill_constant" && op.Output("Out") == std::vector<std::string>{GradVarName(loss_name_)}) {
        b->MutableOp(i)->SetAttr("value", scale);
      }
    }
  }
  if (build_.fuse_elewise_add_act_ops) FuseElewiseAddAct(with_io.MutableBlock(0));
  auto c = std::make_unique<Compiled>();
  c->feed_names = feed_names;
  for (size_t p = 0; p < n; ++p) {
    auto block = PreparedBlock::Create(with_io, 0, OpRegistry::Global(), places_[p], env_,
                                       {.front = feed_names.size(), .back = fetch_list.size()});
    if (!block.ok()) {
      compiled_.erase(key);
      return block.status();
    }
    c->blocks.push_back(*std::move(block));
  }
  const GradientMode mode = n == 1 ? GradientMode::kNone
                            : build_.reduce_strategy == BuildStrategy::ReduceStrategy::kReduce
                                ? GradientMode::kReduce
                                : GradientMode::kAllReduce;
  CrossTrainer cross;
  cross.enabled = cross_ != nullptr;
  if (build_.fuse_all_reduce_ops) {
    cross.bucket_bytes = static_cast<int64_t>(build_.fuse_parameter_memory_size * (1 << 20));
  }
  c->graph = BuildSsaGraph(c->blocks[0]->block(), n, mode, cross);
  if (!build_.debug_graphviz_path.empty()) {
    OAR_RETURN_IF_ERROR(
        Annotate(WriteFileAtomically(build_.debug_graphviz_path, ToGraphviz(c->graph)), "debug_graphviz_path"));
  }
  slot = std::move(c);
  return slot.get();
}

absl::Status ParallelExecutor::CrossAllReduce(const OpHandle& h) {
  // Wall time in all-reduces across trainers (oar_trainer_collective_seconds_total):
  // what `oar launch` reports beside each nccl2 trainer's step time. These
  // run on the collectives' thread, so the time overlaps the places' compute.
  static metrics::Counter* const seconds =
      metrics::Default()
          .AddCounter("oar_trainer_collective_seconds_total",
                      "Wall time in all-reduces across trainers (nccl2 mode), overlapping compute")
          ->With({});
  const absl::Time start = absl::Now();
  absl::Status s = CrossAllReduceUntimed(h);
  seconds->Add(absl::ToDoubleSeconds(absl::Now() - start));
  return s;
}

absl::Status ParallelExecutor::CrossAllReduceUntimed(const OpHandle& h) {
  std::vector<Variable*> vars;
  for (const auto& g : h.vars) {
    Variable* v = local_scopes_[0]->FindVar(g);
    if (v == nullptr || !v->IsInitialized()) {
      return absl::FailedPreconditionError(absl::StrCat("all_reduce across trainers: gradient '", g, "' has no value"));
    }
    vars.push_back(v);
  }
  if (vars.size() == 1 && vars[0]->IsType<SelectedRows>()) {  // sparse: every trainer's rows, in rank order
    SelectedRows* sr = vars[0]->GetMutable<SelectedRows>();
    Tensor rows;
    int64_t* r = rows.mutable_data<int64_t>({static_cast<int64_t>(sr->rows.size())});
    std::copy(sr->rows.begin(), sr->rows.end(), r);
    std::vector<Tensor> all_rows, all_values;
    OAR_RETURN_IF_ERROR(cross_->AllGather(rows, &all_rows, h.var + "@ROWS"));
    OAR_RETURN_IF_ERROR(cross_->AllGather(sr->value, &all_values, h.var));
    SelectedRows merged;
    merged.height = sr->height;
    int64_t n = 0;
    for (const Tensor& t : all_rows) n += t.numel();
    DDim d = sr->value.dims().size() > 0 ? sr->value.dims() : DDim{0};
    d[0] = n;
    merged.value.Resize(d);
    char* dst = static_cast<char*>(merged.value.mutable_data(sr->value.dtype()));
    for (size_t k = 0; k < all_rows.size(); ++k) {
      if (all_values[k].dims().size() != d.size() || all_values[k].dims()[0] != all_rows[k].numel()) {
        return absl::InvalidArgumentError(absl::StrCat("all_reduce across trainers: trainer ", k, " sent '", h.var,
                                                       "' with ", all_rows[k].numel(), " rows and values ",
                                                       all_values[k].dims().ToString()));
      }
      const int64_t* rk = all_rows[k].data<int64_t>();
      merged.rows.insert(merged.rows.end(), rk, rk + all_rows[k].numel());
      if (all_values[k].nbytes() > 0) std::memcpy(dst, all_values[k].raw_data(), all_values[k].nbytes());
      dst += all_values[k].nbytes();
    }
    *sr = std::move(merged);
    return absl::OkStatus();
  }
  if (vars.size() == 1) {
    if (!vars[0]->IsType<Tensor>()) return absl::InvalidArgumentError(absl::StrCat("'", h.var, "' is not a tensor"));
    return cross_->AllReduce(vars[0]->GetMutable<Tensor>(), h.var);
  }
  // A bucket: packed into one buffer (kept across steps), reduced, unpacked.
  int64_t total = 0;
  for (size_t k = 0; k < vars.size(); ++k) {
    if (!vars[k]->IsType<Tensor>() || vars[k]->Get<Tensor>().dtype() != vars[0]->Get<Tensor>().dtype()) {
      return absl::InvalidArgumentError(absl::StrCat("bucket of '", h.var, "': '", h.vars[k], "' does not pack"));
    }
    total += vars[k]->Get<Tensor>().numel();
  }
  const DataType dt = vars[0]->Get<Tensor>().dtype();
  const std::string name = absl::StrCat("bucket(", h.var, " +", vars.size() - 1, ")");
  // The bucket lives where the gradients do (a GPU's: packed on its stream,
  // reduced in place by NCCL).
  const Place at = vars[0]->Get<Tensor>().place();
  if (at.is_cpu() && cross_->AllReducesBucketsInPlace()) {  // no packing
    std::vector<Tensor*> bucket;
    for (Variable* v : vars) bucket.push_back(v->GetMutable<Tensor>());
    return cross_->AllReduceBucket(bucket, name);
  }
  Tensor& buf = buckets_[h.cross_index];
  buf.Resize({total});
  char* packed = static_cast<char*>(buf.mutable_data(dt, at));
  for (Variable* v : vars) {
    const Tensor& t = v->Get<Tensor>();
    OAR_RETURN_IF_ERROR(CopyBytes(at, packed, t.place(), t.raw_data(), t.nbytes()));
    packed += t.nbytes();
  }
  OAR_RETURN_IF_ERROR(cross_->AllReduce(&buf, name));
  const char* from = static_cast<const char*>(buf.raw_data());
  for (Variable* v : vars) {
    Tensor* t = v->GetMutable<Tensor>();
    OAR_RETURN_IF_ERROR(CopyBytes(t->place(), t->raw_data(), at, from, t->nbytes()));
    from += t->nbytes();
  }
  return absl::OkStatus();
}

absl::Status ParallelExecutor::GatherToPlace0() {
  for (const auto& [key, c] : compiled_) {
    // Ops that run on one place only (owned optimize ops) and not on place 0.
    std::map<size_t, std::set<size_t>> places_of;
    for (const OpHandle& h : c->graph.ops) {
      if (h.kind == OpHandle::Kind::kCompute) places_of[h.op_index].insert(h.place);
    }
    const BlockDesc& block = c->blocks[0]->block();
    for (const auto& [index, places] : places_of) {
      if (places.size() != 1 || *places.begin() == 0) continue;
      const size_t from = *places.begin();
      for (const auto& name : block.Op(index).OutputArgNames()) {
        const VarDesc* v = block.FindVar(name);
        if (v == nullptr || !v->persistable) continue;
        const Variable* src = place_scopes_[from]->FindVar(name);
        if (src == nullptr || !src->IsType<Tensor>()) continue;
        Tensor* dst = place_scopes_[0]->Var(name)->GetMutable<Tensor>();
        if (places_[0].is_gpu()) {
          OAR_RETURN_IF_ERROR(
              Annotate(src->Get<Tensor>().CopyTo(places_[0], dst), absl::StrCat("gathering '", name, "'")));
        } else {
          dst->CopyFrom(src->Get<Tensor>());
        }
      }
    }
  }
  // The copies between GPUs have landed before the next step writes a source.
  for (const Place& p : places_) OAR_RETURN_IF_ERROR(Annotate(SyncPlace(p), p.ToString()));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> ParallelExecutor::Run(const std::vector<std::string>& fetch_list,
                                                          const FeedMap& feed) {
  OAR_ASSIGN_OR_RETURN(std::vector<FeedMap> feeds, SplitFeed(feed, places_.size()));
  return Run(fetch_list, feeds);
}

absl::StatusOr<std::vector<Tensor>> ParallelExecutor::Run(const std::vector<std::string>& fetch_list,
                                                          const std::vector<FeedMap>& feeds) {
  const size_t n = places_.size();
  OAR_RETURN_IF_ERROR(CheckFeedList(feeds, n));
  std::vector<std::string> feed_names;
  for (const auto& [name, t] : feeds[0]) feed_names.push_back(name);
  for (size_t p = 1; p < n; ++p) {
    std::vector<std::string> names;
    for (const auto& [name, t] : feeds[p]) names.push_back(name);
    if (names != feed_names) {
      return absl::InvalidArgumentError(absl::StrCat("feed for place ", p, " names [", absl::StrJoin(names, ", "),
                                                     "], place 0's names [", absl::StrJoin(feed_names, ", "), "]"));
    }
  }
  OAR_ASSIGN_OR_RETURN(Compiled * c, GetOrCompile(feed_names, fetch_list));
  for (size_t p = 0; p < n; ++p) {
    TensorList* list = place_scopes_[p]->Var(kFeedVarName)->GetMutable<TensorList>();
    list->clear();
    for (const auto& [name, t] : feeds[p]) list->push_back(t);
    if (local_scopes_[p] == nullptr) local_scopes_[p] = &place_scopes_[p]->NewScope();
    OAR_RETURN_IF_ERROR(c->blocks[p]->Bind(place_scopes_[p], local_scopes_[p]));
  }
  auto run_graph = [&] { return n == 1 ? RunGraphOnCaller(c) : RunGraph(c); };
  absl::Status s = run_graph();
  for (int it = 1; it < exec_.num_iteration_per_run && s.ok(); ++it) {
    for (size_t p = 0; p < n; ++p) place_scopes_[p]->Var(kFetchVarName)->GetMutable<TensorList>()->clear();
    s = run_graph();
  }
  std::vector<std::vector<Tensor>> fetched(n);
  for (size_t p = 0; p < n && s.ok(); ++p) {
    place_scopes_[p]->Var(kFeedVarName)->GetMutable<TensorList>()->clear();
    TensorList* list = place_scopes_[p]->Var(kFetchVarName)->GetMutable<TensorList>();
    fetched[p].assign(std::make_move_iterator(list->begin()), std::make_move_iterator(list->end()));
    list->clear();
    fetched[p].resize(fetch_list.size());
  }
  // As Executor::Run: a run's GPU work ends with it, so an asynchronous
  // kernel error is this run's, not the next one's.
  for (const Place& place : places_) {
    if (place.is_gpu() && s.ok()) s = Annotate(SyncPlace(place), place.ToString());
  }
  if (++runs_since_drop_ >= exec_.num_iteration_per_drop_scope || !s.ok()) DropLocalExeScopes();
  OAR_RETURN_IF_ERROR(s);
  return MergeFetched(fetched);
}

}  // namespace oar
