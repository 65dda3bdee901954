#include "trainer/trainer_runtime.h"

#include "common/base/status.h"
#include "common/rpc/fault_injection.h"
#include "common/rpc/transport_select.h"
#include "trainer/collective/join_trainers.h"
#include "trainer/committed_state.h"

namespace oar {

absl::StatusOr<std::unique_ptr<TrainerRuntime>> TrainerRuntime::Create(ProgramDesc main, const ProgramDesc& startup,
                                                                       Options options) {
  std::unique_ptr<TrainerRuntime> rt(new TrainerRuntime());
  rt->options_ = std::move(options);
  rt->main_ = std::move(main);
  rpc::Transport* transport = rt->options_.transport;
  if (transport == nullptr) {
    OAR_ASSIGN_OR_RETURN(rt->own_transport_, rpc::MakeTransport(rt->options_.rpc));
    transport = rt->own_transport_.get();
  }
  OAR_ASSIGN_OR_RETURN(transport, rpc::MaybeInjectFaults(transport, &rt->fault_transport_));
  // Pserver mode: each message says the job's trainer count and whether it
  // trains sync, which every pserver checks against its own.
  const bool pserver_mode = !rt->options_.nccl2;
  rt->client_ = std::make_unique<rpc::RpcClient>(
      transport, rpc::ClientOptions{.trainers = pserver_mode ? rt->options_.trainers : 0,
                                    .sync_mode = !pserver_mode            ? 0
                                                 : rt->options_.sync_mode ? 1
                                                                          : 2,
                                    .job_settings = pserver_mode ? EncodeJobSettings(rt->options_.settings) : "",
                                    .incarnation = rt->options_.incarnation,
                                    .await_restarts = pserver_mode && rt->options_.await_pserver_restarts,
                                    .barrier_after_sends = rt->options_.barrier_after_sends});
  rt->env_ = rpc::ClientEnv(rt->client_.get());
  // One place: the startup program, the plain Executor (no all-reduce) and
  // the evaluation run on it, a GPU's too (send/recv on the host with
  // copies). Several GPUs: they run on the first, and the ParallelExecutor
  // sums among them through NCCL. A trainer on one GPU in nccl2 mode
  // all-reduces across trainers through NCCL in place; beside a clique of
  // several GPUs that second communicator could deadlock, so nccl2 mode
  // takes one GPU per trainer.
  const Options& opts = rt->options_;
  const bool gpus = !opts.places.empty() && opts.places[0].is_gpu();
  if (gpus && opts.places.size() > 1 && opts.nccl2 && opts.trainers > 1) {
    return absl::UnimplementedError(
        absl::StrCat("nccl2 trainer on ", opts.places.size(),
                     " GPUs: nccl2 mode takes one GPU per trainer; start a trainer per GPU"));
  }
  const Place place = opts.places.size() == 1 || gpus ? opts.places[0] : CPUPlace();
  rt->exe_ = std::make_unique<Executor>(place, ExecutorOptions{.env = &rt->env_});
  if (!rt->options_.pservers.empty()) {
    const absl::Status ready = rt->options_.wait_for_pservers
                                   ? rt->options_.wait_for_pservers(rt->client_.get())
                                   : rt->client_->WaitServerReady(rt->options_.pservers, rt->client_->deadline_ms());
    OAR_RETURN_IF_ERROR(Annotate(ready, "waiting for the pservers (--rpc_deadline)"));
    if (rt->options_.before_pull) OAR_RETURN_IF_ERROR(rt->options_.before_pull(rt->client_.get()));
  }
  OAR_RETURN_IF_ERROR(Annotate(rt->exe_->Run(startup, &rt->scope_).status(), "trainer startup program"));
  if (rt->options_.after_startup) OAR_RETURN_IF_ERROR(rt->options_.after_startup(*rt->exe_, &rt->scope_));
  const Options& o = rt->options_;
  if (o.nccl2 && o.trainers > 1 && !o.elastic_ring) {
    OAR_RETURN_IF_ERROR(rt->JoinCollective());
  }
  if (o.elastic_ring) rt->env_.on_close = nullptr;  // no pservers to say COMPLETE to
  rt->env_.profiler = o.profiler;  // from here on: the training steps
  if (o.communicator.has_value()) {
    OAR_ASSIGN_OR_RETURN(rt->communicator_, Communicator::Create(rt->main_, rt->client_.get(), *o.communicator));
    rt->env_.communicator = rt->communicator_.get();
    rt->communicator_->Start(&rt->scope_);
  }
  if (!o.geo_params.empty()) {
    if (o.places.size() > 1) {
      return absl::UnimplementedError(absl::StrCat("GEO-SGD exchanges one copy of the parameters; this trainer has ",
                                                   o.places.size(),
                                                   " places (--cpu_num): train each GEO-SGD trainer on one"));
    }
    rt->geo_ = std::make_unique<GeoCommunicator>(o.geo_params, rt->client_.get(), o.geo);
    rt->env_.geo = rt->geo_.get();
    OAR_RETURN_IF_ERROR(rt->geo_->Start(&rt->scope_));
  }
  if (o.places.size() > 1 || rt->collective_ != nullptr) {
    std::vector<Place> places = o.places.empty() ? std::vector<Place>{CPUPlace()} : o.places;
    OAR_ASSIGN_OR_RETURN(
        rt->pe_,
        ParallelExecutor::Create(places, o.loss, rt->main_, &rt->scope_, o.build, {}, rt->collective_ ? o.trainers : 1,
                                 rt->collective_ ? o.trainer_id : 0, nullptr, &rt->env_, rt->collective_.get()));
  }
  return rt;
}

absl::Status TrainerRuntime::JoinCollective() {
  const Variable* id = scope_.FindVar("NCCLID");
  const Place place = options_.places.size() == 1 ? options_.places[0] : CPUPlace();  // one GPU at most (Create)
  JoinOptions join;
  join.id = id != nullptr && id->IsType<Tensor>() ? &id->Get<Tensor>() : nullptr;
  join.rank = options_.trainer_id;
  join.endpoints = options_.trainer_endpoints;
  join.gpu = place.is_gpu();
  join.device = place.device;
  join.transport = options_.collective_transport;
  join.timeout = absl::Milliseconds(client_->deadline_ms());
  OAR_ASSIGN_OR_RETURN(collective_, JoinTrainers(join));
  env_.on_close = nullptr;  // no pservers to say COMPLETE to (the client only sent the id to trainers)
  OAR_RETURN_IF_ERROR(AgreeOnSettings());
  // Every trainer starts from trainer 0's parameters and optimizer state,
  // whatever its own initializers drew.
  for (const auto& name : PersistableTensors(main_, scope_)) {
    OAR_RETURN_IF_ERROR(collective_->Broadcast(scope_.Var(name)->GetMutable<Tensor>(), 0, name));
  }
  return absl::OkStatus();
}

absl::Status TrainerRuntime::Regroup(std::unique_ptr<Collective> ring) {
  DropRing();
  if (!options_.elastic_ring) return absl::FailedPreconditionError("Regroup is for an elastic nccl2 trainer");
  collective_ = std::move(ring);
  const std::vector<Place> places = options_.places.empty() ? std::vector<Place>{CPUPlace()} : options_.places;
  OAR_ASSIGN_OR_RETURN(
      pe_, ParallelExecutor::Create(places, options_.loss, main_, &scope_, options_.build, {}, collective_->size(),
                                    collective_->rank(), nullptr, &env_, collective_.get()));
  return AgreeOnSettings();  // a joiner started with other flags fails, naming them
}

void TrainerRuntime::DropRing() {
  pe_.reset();  // it all-reduces over the ring: first
  collective_.reset();
}

absl::Status TrainerRuntime::AgreeOnSettings() {
  const JobSettings& mine = options_.settings;
  if (mine.empty()) return absl::OkStatus();
  Tensor t;
  int64_t* v = t.mutable_data<int64_t>({static_cast<int64_t>(mine.size())});
  for (size_t i = 0; i < mine.size(); ++i) v[i] = mine[i].second;
  std::vector<Tensor> all;
  OAR_RETURN_IF_ERROR(Annotate(collective_->AllGather(t, &all, "the job's settings"), "comparing the job's settings"));
  auto settings_of = [&](size_t rank) {
    JobSettings s = mine;
    for (size_t i = 0; i < s.size() && static_cast<int64_t>(i) < all[rank].numel(); ++i) {
      s[i].second = all[rank].data<int64_t>()[i];
    }
    return s;
  };
  for (size_t r = 1; r < all.size(); ++r) {  // every trainer reaches the same verdict
    const std::string differ = Disagreement(settings_of(r), static_cast<int64_t>(r), settings_of(0), 0);
    if (!differ.empty()) return absl::FailedPreconditionError(differ);
  }
  return absl::OkStatus();
}

absl::StatusOr<float> TrainerRuntime::Step(const FeedMap& feed) {
  std::vector<Tensor> out;
  if (pe_) {
    OAR_ASSIGN_OR_RETURN(out, pe_->Run({options_.loss}, feed));
  } else {
    OAR_ASSIGN_OR_RETURN(out, exe_->Run(main_, &scope_, feed, {options_.loss}));
  }
  if (out.empty() || out[0].dtype() != DataType::kFloat32 || out[0].numel() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the loss '", options_.loss, "' is not a float32 tensor with a value"));
  }
  float loss = 0;  // with several places: the mean of their losses
  for (int64_t i = 0; i < out[0].numel(); ++i) loss += out[0].data<float>()[i] / static_cast<float>(out[0].numel());
  return loss;
}

absl::Status TrainerRuntime::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  absl::Status s;
  if (communicator_ != nullptr) {  // what is queued goes before COMPLETE; the last pull lands in the scope
    s = Annotate(communicator_->Stop(), "the communicator's last sends");
    if (s.ok()) s = communicator_->InstallReceived(&scope_);
    if (!s.ok()) return s;
  }
  if (geo_ != nullptr) OAR_RETURN_IF_ERROR(Annotate(geo_->Flush(), "GEO-SGD's last exchange"));
  s = exe_->Close();
  if (collective_ != nullptr) s.Update(Annotate(collective_->Barrier(), "the trainers' closing barrier"));
  return s;
}

absl::StatusOr<int64_t> TrainerRuntime::AgreeOnSteps(int64_t mine, std::vector<int64_t>* everyone) {
  everyone->assign(1, mine);
  if (collective_ == nullptr) return mine;
  Tensor t;
  t.mutable_data<int64_t>({1})[0] = mine;
  std::vector<Tensor> all;
  OAR_RETURN_IF_ERROR(Annotate(collective_->AllGather(t, &all, "steps this epoch"), "agreeing on the epoch's steps"));
  everyone->clear();
  int64_t least = mine;
  for (const Tensor& a : all) {
    everyone->push_back(a.data<int64_t>()[0]);
    least = std::min(least, everyone->back());
  }
  return least;
}

}  // namespace oar
