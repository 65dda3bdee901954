// TcpRing: the Collective backend for trainer processes on CPUs — a ring of
// persistent TCP connections over Boost.Asio. Rank r listens on
// endpoints[r], connects to rank r+1 and accepts rank r-1 (a handshake
// checks the job's token and the ranks), then keeps both connections for
// every operation (TCP_NODELAY, large socket buffers, buffers reused
// across calls).
//
// AllReduce of a large tensor is the bandwidth-optimal ring: a
// reduce-scatter then an all-gather, each n-1 steps in which a rank sends
// one of n slices to its successor while it receives another from its
// predecessor and adds it as it arrives, chunk by chunk; sizes need not
// divide by n, and a zero-size tensor is fine. A small one (below
// small_bytes) is all-gathered whole and summed in rank order. Two ranks
// (below pair_bytes, since both ways move the same bytes there) swap their
// tensors in one exchange, sent straight from the tensor, and each adds the
// other's: x + y and y + x are the same bits. Broadcast pipelines chunks around the ring;
// AllGather passes blocks of any size around it.
//
// Every operation opens with a header (operation, sequence number, tensor
// name, dtype, element count) that a rank checks against its
// predecessor's: programs that disagree fail with an error naming the
// variable and both ranks. A peer that closes its connection, or sends
// nothing until the operation's deadline, fails it naming the peer's rank
// and endpoint. Summing is the same for every rank, so all end with
// identical bits.
//
//   auto ring = TcpRing::Create({.rank = r, .endpoints = eps, .token = job_token});
//   OAR_RETURN_IF_ERROR((*ring)->AllReduce(&grad, "fc_0.w_0@GRAD"));
//
// Thread-safety: used by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainer/collective/collective.h"

namespace oar {

struct TcpRingOptions {
  int rank = 0;
  std::vector<std::string> endpoints;             // host:port of every rank, in rank order
  std::string token;                              // the same for every rank of the job (the rendezvous id)
  absl::Duration timeout = absl::ZeroDuration();  // connecting, and each operation; 0: RpcOptions' default deadline
  size_t chunk_bytes = 512 << 10;                 // the pipelining unit
  size_t small_bytes = 32 << 10;                  // all-reduces below this all-gather instead
  size_t pair_bytes = 4 << 20;                    // with two ranks, below this
};

class TcpRing final : public Collective {
 public:
  // Listens, connects both neighbours and checks them, within the timeout;
  // the error names the neighbour that did not connect or was refused.
  static absl::StatusOr<std::unique_ptr<TcpRing>> Create(TcpRingOptions options);
  ~TcpRing() override;

  int rank() const override;
  int size() const override;
  std::string backend() const override { return "tcp-ring"; }
  absl::Status AllReduce(Tensor* t, const std::string& name) override;
  absl::Status Broadcast(Tensor* t, int root, const std::string& name) override;
  absl::Status AllGather(const Tensor& in, std::vector<Tensor>* out, const std::string& name) override;
  absl::Status Barrier() override;

 private:
  class Impl;
  explicit TcpRing(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace oar
