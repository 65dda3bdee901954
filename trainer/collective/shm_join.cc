// JoinOverSharedMemory and EndpointsShareAHost (shm_collective.h): the
// ranks of a formed TCP ring agree, over that ring, whether to move their
// tensors through one shared segment instead.
#include <unistd.h>

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/rpc/rpc_options.h"
#include "glog/logging.h"
#include "trainer/collective/shm_collective.h"

namespace oar {
namespace {

std::string HostOf(const std::string& endpoint) {
  std::string host = endpoint.substr(0, endpoint.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

bool Loopback(const std::string& host) {
  return absl::StartsWith(host, "127.") || host == "localhost" || host == "::1";
}

Tensor Int64s(std::vector<int64_t> v) { return MakeTensor<int64_t>({static_cast<int64_t>(v.size())}, v); }

}  // namespace

bool EndpointsShareAHost(const std::vector<std::string>& endpoints) {
  if (endpoints.empty()) return false;
  bool all_loopback = true, one_host = true;
  for (const std::string& ep : endpoints) {
    all_loopback &= Loopback(HostOf(ep));
    one_host &= HostOf(ep) == HostOf(endpoints[0]);
  }
  return all_loopback || one_host;
}

absl::StatusOr<std::unique_ptr<Collective>> JoinOverSharedMemory(std::unique_ptr<TcpRing> ring,
                                                                 const std::vector<std::string>& endpoints,
                                                                 const ShmJoinOptions& options) {
  const int n = ring->size(), me = ring->rank();
  ShmJoinOptions o = options;
  if (o.timeout <= absl::ZeroDuration()) o.timeout = absl::Milliseconds(rpc::RpcOptions{}.deadline_ms);
  if (o.transport != "auto" && o.transport != "tcp" && o.transport != "shm") {
    return absl::InvalidArgumentError(absl::StrCat("collective transport '", o.transport, "': auto, tcp or shm"));
  }
  if (static_cast<int>(endpoints.size()) != n) {
    return absl::InvalidArgumentError(absl::StrCat(endpoints.size(), " endpoints for a ring of ", n));
  }
  if (n == 1) return std::unique_ptr<Collective>(std::move(ring));
  // Every rank keeps the ring, saying why; with transport "shm", an error.
  auto keep_ring = [&](const std::string& why) -> absl::StatusOr<std::unique_ptr<Collective>> {
    if (o.transport == "shm")
      return absl::FailedPreconditionError(absl::StrCat("--collective_transport=shm, but ", why));
    LOG(INFO) << "nccl2: the " << n << " trainers all-reduce over the TCP ring: " << why;
    return std::unique_ptr<Collective>(std::move(ring));
  };
  // 1. Does every rank want it? (A rank told --collective_transport=tcp, or
  // whose peers are on other hosts, says no.)
  const bool local = EndpointsShareAHost(endpoints);
  Tensor willing = Int64s({o.transport != "tcp" && local ? 1 : 0});
  OAR_RETURN_IF_ERROR(Annotate(ring->AllReduce(&willing, "shm: willing"), "joining over shared memory"));
  if (willing.data<int64_t>()[0] < n) {
    return keep_ring(local
                         ? "a trainer runs with --collective_transport=tcp"
                         : absl::StrCat("the trainers are not all on this host (", absl::StrJoin(endpoints, ","), ")"));
  }
  // 2. Rank 0 makes the segment and says where it is: PID, descriptor, nonce.
  const size_t bytes = ShmCollective::SegmentBytes(n, o.slot_bytes);
  std::unique_ptr<ShmSegment> segment;
  absl::Status mine = absl::OkStatus();
  Tensor where = Int64s({-1, -1, 0});
  if (me == 0) {
    auto made = ShmSegment::Make(bytes);
    if (made.ok()) {
      segment = *std::move(made);
      const uint64_t nonce = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
      ShmCollective::Init(segment->data(), n, nonce);
      where = Int64s({::getpid(), segment->fd(), static_cast<int64_t>(nonce)});
    } else {
      mine = made.status();
    }
  }
  OAR_RETURN_IF_ERROR(Annotate(ring->Broadcast(&where, 0, "shm: where"), "joining over shared memory"));
  const int64_t* w = where.data<int64_t>();
  const uint64_t nonce = static_cast<uint64_t>(w[2]);
  // 3. The others open it; every rank says whether it has it.
  if (me != 0 && w[0] > 0) {
    auto opened = ShmSegment::Open(static_cast<pid_t>(w[0]), static_cast<int>(w[1]), bytes);
    if (opened.ok()) {
      segment = *std::move(opened);
      mine = ShmBarrier::Check(segment->data(), n, nonce);
    } else {
      mine = opened.status();
    }
  } else if (me != 0) {
    mine = absl::UnavailableError("rank 0 could not make the shared segment");
  }
  std::vector<Tensor> all;
  OAR_RETURN_IF_ERROR(
      Annotate(ring->AllGather(Int64s({mine.ok() ? 1 : 0}), &all, "shm: joined"), "joining over shared memory"));
  std::vector<std::string> failed;
  for (int q = 0; q < n; ++q) {
    if (all[static_cast<size_t>(q)].data<int64_t>()[0] != 1)
      failed.push_back(absl::StrCat("rank ", q, " (", endpoints[q], ")"));
  }
  if (!failed.empty()) {
    // This rank's own reason where it failed; rank 0's failure is everyone's.
    return keep_ring(w[0] <= 0 ? absl::StrCat("rank 0 (", endpoints[0], ") could not make the shared segment",
                                              me == 0 ? absl::StrCat(": ", mine.message()) : "")
                               : absl::StrCat(absl::StrJoin(failed, ", "), " could not map the shared segment",
                                              mine.ok() ? "" : absl::StrCat(": ", mine.message())));
  }
  // Every rank has mapped it: the descriptor can go. Each records its PID
  // (ShmCollective's barrier) before the ring's last barrier, so no rank
  // waits on a peer whose PID it cannot see yet.
  segment->CloseFd();
  OAR_ASSIGN_OR_RETURN(std::unique_ptr<ShmCollective> shm,
                       ShmCollective::Create(std::move(segment), nonce,
                                             {.rank = me, .endpoints = endpoints, .timeout = o.timeout}, o.slot_bytes));
  OAR_RETURN_IF_ERROR(Annotate(ring->Barrier(), "joining over shared memory"));
  LOG(INFO) << "nccl2: the " << n << " trainers all-reduce through shared memory (" << bytes / 1024 << " KiB)";
  return std::unique_ptr<Collective>(std::move(shm));
}

}  // namespace oar
