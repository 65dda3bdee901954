#include "trainer/trainer_runtime.h"

#include "common/rpc/fault_injection.h"
#include "common/rpc/grpc_transport.h"
#include "common/status.h"

namespace oar {

absl::StatusOr<std::unique_ptr<TrainerRuntime>> TrainerRuntime::Create(ProgramDesc main, const ProgramDesc& startup,
                                                                        Options options) {
  std::unique_ptr<TrainerRuntime> rt(new TrainerRuntime());
  rt->options_ = std::move(options);
  rt->main_ = std::move(main);
  rpc::Transport* transport = rt->options_.transport;
  if (transport == nullptr) {
    rt->own_transport_ = std::make_unique<rpc::GrpcTransport>();
    transport = rt->own_transport_.get();
  }
  OAR_ASSIGN_OR_RETURN(transport, rpc::MaybeInjectFaults(transport, &rt->fault_transport_));
  rt->client_ = std::make_unique<rpc::RpcClient>(transport);
  rt->env_ = rpc::ClientEnv(rt->client_.get());
  rt->exe_ = std::make_unique<Executor>(CPUPlace(), ExecutorOptions{.env = &rt->env_});
  if (!rt->options_.pservers.empty()) {
    OAR_RETURN_IF_ERROR(Annotate(rt->client_->WaitServerReady(rt->options_.pservers, FLAGS_rpc_deadline),
                                 "waiting for the pservers (FLAGS_rpc_deadline)"));
  }
  OAR_RETURN_IF_ERROR(Annotate(rt->exe_->Run(startup, &rt->scope_).status(), "trainer startup program"));
  if (rt->options_.places.size() > 1) {
    OAR_ASSIGN_OR_RETURN(rt->pe_, ParallelExecutor::Create(rt->options_.places, rt->options_.loss, rt->main_,
                                                           &rt->scope_, rt->options_.build, {}, 1, 0, nullptr,
                                                           &rt->env_));
  }
  return rt;
}

absl::StatusOr<float> TrainerRuntime::Step(const FeedMap& feed) {
  std::vector<Tensor> out;
  if (pe_) {
    OAR_ASSIGN_OR_RETURN(out, pe_->Run({options_.loss}, feed));
  } else {
    OAR_ASSIGN_OR_RETURN(out, exe_->Run(main_, &scope_, feed, {options_.loss}));
  }
  if (out.empty() || out[0].dtype() != DataType::kFloat32 || out[0].numel() < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the loss '", options_.loss, "' is not a float32 tensor with a value"));
  }
  float loss = 0;  // with several places: the mean of their losses
  for (int64_t i = 0; i < out[0].numel(); ++i) loss += out[0].data<float>()[i] / static_cast<float>(out[0].numel());
  return loss;
}

absl::Status TrainerRuntime::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  return exe_->Close();
}

}  // namespace oar
