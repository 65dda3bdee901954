#include "trainer/gen_nccl_id_op.h"

#include <chrono>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status.h"
#include "common/config.h"
#include "common/ops/op_util.h"
#include "common/rpc/rpc_client.h"
#include "common/rpc/transport.h"
#if OAR_HAVE_NCCL
#include <nccl.h>
#endif

namespace oar {
namespace {

constexpr char kNcclIdName[] = "NCCLID";

absl::Status MakeId(uint8_t* out) {
#if OAR_HAVE_NCCL
  static_assert(sizeof(ncclUniqueId) == kNcclIdBytes);
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    return absl::InternalError(absl::StrCat("gen_nccl_id: ncclGetUniqueId: ", ncclGetErrorString(r)));
  std::memcpy(out, &id, kNcclIdBytes);
#else
  std::random_device rd;
  for (int i = 0; i < kNcclIdBytes; ++i) out[i] = static_cast<uint8_t>(rd());
#endif
  return absl::OkStatus();
}

// Serves one NCCLID from trainer 0, then nothing else.
class IdReceiver : public rpc::RpcHandler {
 public:
  absl::Status Handle(rpc::RpcKind kind, const rpc::IncomingMessage& request, rpc::Reply*) override {
    const rpc::MessageHeader& h = request.header();
    if (kind != rpc::RpcKind::kSend || h.name() != kNcclIdName) {
      return absl::InvalidArgumentError(absl::StrCat("gen_nccl_id: this endpoint only takes ", kNcclIdName, ", not ",
                                                     rpc::KindName(kind), " '", h.name(), "'"));
    }
    if (h.payload_bytes != kNcclIdBytes ||
        (h.kind != rpc::PayloadKind::kRawBytes && h.kind != rpc::PayloadKind::kTensor)) {
      return absl::InvalidArgumentError(
          absl::StrCat("gen_nccl_id: an NCCL id has ", kNcclIdBytes, " bytes, got ", h.Describe()));
    }
    std::vector<uint8_t> id(kNcclIdBytes);
    request.CopyPayload(id.data());
    absl::MutexLock l(&mu_);
    id_ = std::move(id);
    return absl::OkStatus();
  }
  bool NeverBlocks(rpc::RpcKind) const override { return true; }
  // The id, or empty after timeout_ms.
  std::vector<uint8_t> Wait(int timeout_ms) {
    absl::MutexLock l(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](std::vector<uint8_t>* id) { return !id->empty(); }, &id_),
                         absl::Milliseconds(timeout_ms));
    return id_;
  }

 private:
  absl::Mutex mu_;
  std::vector<uint8_t> id_ ABSL_GUARDED_BY(mu_);
};

absl::Status GenNcclIdKernel(const ExecutionContext& ctx) {
  const auto endpoint = ctx.Attr<std::string>("endpoint");
  const auto others = ctx.Attr<std::vector<std::string>>("endpoint_list");
  const int tid = ctx.Attr<int32_t>("trainer_id");
  if (ctx.Attr<int32_t>("nccl_comm_num") != 1) {
    return absl::UnimplementedError(
        absl::StrCat("gen_nccl_id: nccl_comm_num ", ctx.Attr<int32_t>("nccl_comm_num"),
                     " (several communicators per trainer) is not supported; Oar uses one"));
  }
  if (ctx.Attr<bool>("use_hierarchical_allreduce")) {
    return absl::UnimplementedError(
        "gen_nccl_id: use_hierarchical_allreduce (inter- and intra-node NCCL rings) is not supported; Oar's "
        "hierarchy is a trainer's places, then the trainers");
  }
  const RunEnv* env = ctx.env();
  if (env == nullptr || env->rpc == nullptr || env->transport == nullptr) {
    return absl::FailedPreconditionError(
        "gen_nccl_id: no RPC client or transport; run the startup program with an executor given a RunEnv");
  }
  const int deadline_ms = env->rpc->deadline_ms();
  Tensor* out = ctx.Output("NCCLID", 0);
  uint8_t* id = out->mutable_data<uint8_t>(DDim{kNcclIdBytes});
  if (tid == 0) {
    OAR_RETURN_IF_ERROR(MakeId(id));
    OAR_RETURN_IF_ERROR(Annotate(env->rpc->WaitServerReady(others, deadline_ms), "gen_nccl_id: trainers"));
    Variable v;
    *v.GetMutable<Tensor>() = *out;
    std::vector<std::shared_ptr<rpc::RpcCall>> calls;
    for (const auto& ep : others) {
      calls.push_back(env->rpc->AsyncSendVar(ep, kNcclIdName, &v, {.trainer_id = 0, .raw_bytes = true}));
    }
    return rpc::WaitAll(calls);
  }
  IdReceiver receiver;
  OAR_ASSIGN_OR_RETURN(auto server,
                       env->transport->Listen(rpc::ServeOptions(env->transport->options(), endpoint), &receiver));
  const std::vector<uint8_t> got = receiver.Wait(deadline_ms);
  server->Shutdown();
  if (got.empty()) {
    return absl::DeadlineExceededError(absl::StrCat("gen_nccl_id: trainer ", tid, " on ", endpoint,
                                                    " got no NCCL id from trainer 0 within ", deadline_ms,
                                                    " ms (FLAGS_rpc_deadline)"));
  }
  std::memcpy(id, got.data(), kNcclIdBytes);
  return absl::OkStatus();
}

}  // namespace

void RegisterGenNcclIdOp(OpRegistry* r) {
  r->Register("gen_nccl_id")
      .HostSide()
      .Output("NCCLID")
      .Attr("endpoint", std::string())
      .Attr("endpoint_list", std::vector<std::string>{})
      .Attr("trainer_id", int32_t{0})
      .Attr("nccl_comm_num", int32_t{1})
      .Attr("use_hierarchical_allreduce", false)
      .Attr("hierarchical_allreduce_inter_nranks", int32_t{0})
      .SetInferShape(NoShapeInference)
      .SetKernelDtype(AnyKernelDtype)
      .Kernel<float>(GenNcclIdKernel);
}

}  // namespace oar
