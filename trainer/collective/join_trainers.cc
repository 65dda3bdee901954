#include "trainer/collective/join_trainers.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/rpc/rpc_options.h"
#include "trainer/collective/nccl_collective.h"
#include "trainer/collective/shm_collective.h"
#include "trainer/collective/tcp_ring.h"

namespace oar {

std::string RingToken(const Tensor& id) {
  std::string token(32, '\0');
  const auto* p = static_cast<const unsigned char*>(id.raw_data());
  for (int k = 0; k < 4; ++k) {  // four differently seeded FNV-1a hashes of the whole id
    uint64_t h = 1469598103934665603ULL ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(k + 1));
    for (size_t i = 0; i < id.nbytes(); ++i) h = (h ^ p[i]) * 1099511628211ULL;
    std::memcpy(token.data() + 8 * k, &h, 8);
  }
  return token;
}

absl::StatusOr<std::unique_ptr<Collective>> JoinTrainers(const JoinOptions& o) {
  if (o.id == nullptr || !o.id->initialized() || o.id->nbytes() != 128) {
    return absl::FailedPreconditionError(
        "nccl2 mode: no 128-byte NCCLID in the scope; run the startup program with gen_nccl_id first");
  }
  const int n = static_cast<int>(o.endpoints.size());
  if (o.rank < 0 || o.rank >= n) {
    return absl::InvalidArgumentError(absl::StrCat("trainer id ", o.rank, " is not in [0, ", n, ")"));
  }
  const absl::Duration timeout =
      o.timeout > absl::ZeroDuration() ? o.timeout : absl::Milliseconds(rpc::RpcOptions{}.deadline_ms);
  const std::string transport = o.transport.empty() ? "auto" : o.transport;
  if (transport != "auto" && transport != "tcp" && transport != "shm") {
    return absl::InvalidArgumentError(absl::StrCat("--collective_transport=", transport, ": choose auto, tcp or shm"));
  }
  if (o.gpu && transport != "auto") {
    return absl::InvalidArgumentError(absl::StrCat("--collective_transport=", transport,
                                                   " is for trainers on CPUs: on GPUs they all-reduce through NCCL"));
  }
  if (o.gpu) {
    return CreateNcclCollective({.unique_id = static_cast<const uint8_t*>(o.id->raw_data()),
                                 .rank = o.rank,
                                 .size = n,
                                 .device = o.device,
                                 .timeout = timeout});
  }
  TcpRingOptions ring;
  ring.rank = o.rank;
  ring.endpoints = o.endpoints;
  ring.token = RingToken(*o.id);
  ring.timeout = timeout;
  auto r = TcpRing::Create(std::move(ring));
  if (!r.ok()) return r.status();
  return JoinOverSharedMemory(*std::move(r), o.endpoints, {.transport = transport, .timeout = timeout});
}

}  // namespace oar
