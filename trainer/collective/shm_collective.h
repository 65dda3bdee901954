// ShmCollective: the Collective backend for trainer processes of one host —
// one shared segment (shm_segment.h) that every rank maps, holding a
// control block (shm_barrier.h), each rank's operation header and two
// slots of `slot_bytes` per rank. Tensors move through memory, never
// through the kernel's socket buffers: on one host this is what NCCL's and
// gloo's shared-memory transports do, and what the pserver path's shm
// transport does for pserver mode.
//
// An operation runs in rounds of at most one slot per rank. AllReduce: each
// rank copies its piece into its slot; after a barrier, rank r adds slice r
// of every other slot into its own (the others in rank order); after a
// second barrier, each copies every slice into its tensor — so each element
// is summed once and every rank ends with the same bits. A small piece is
// summed whole by each rank (in rank order: the same bits) after one
// barrier. A bucket of gradients moves the same way, each gradient copied
// straight to and from the slots (AllReduceBucket). Broadcast: the root
// copies in, the others copy out. AllGather: every rank's shape in its
// header, then its bytes through its slot. Rounds alternate between the
// two slots, so a rank refills a slot only after the barrier that proves
// every rank is done reading it: no closing barrier per operation.
//
// Every operation's first round carries a header (operation, sequence
// number, name, dtype, element count) that each rank checks against rank
// 0's: programs that disagree fail on every rank with an error naming the
// variable and both ranks. Waits are bounded and name the peer that did not
// arrive, exited or left (shm_barrier.h). After an error the communicator
// is broken for every rank.
//
// A job gets one through JoinOverSharedMemory (join over a formed TCP ring,
// which falls back to that ring when the ranks are not all on this host).
//
// Thread-safety: a rank's ShmCollective is used by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/collective/collective.h"
#include "trainer/collective/shm_barrier.h"
#include "trainer/collective/shm_segment.h"
#include "trainer/collective/tcp_ring.h"

namespace oar {

class ShmCollective final : public Collective {
 public:
  // Bytes of the segment for n ranks.
  static size_t SegmentBytes(int n, size_t slot_bytes);
  // Lays out a zeroed segment (rank 0, before the others map it).
  static void Init(char* segment, int n, uint64_t nonce);

  // Rank `options.rank` over `segment` (laid out by Init, with `nonce`).
  static absl::StatusOr<std::unique_ptr<ShmCollective>> Create(std::unique_ptr<ShmSegment> segment, uint64_t nonce,
                                                               ShmRankOptions options, size_t slot_bytes);

  int rank() const override { return barrier_.rank(); }
  int size() const override { return barrier_.size(); }
  std::string backend() const override { return "shm"; }
  absl::Status AllReduce(Tensor* t, const std::string& name) override;
  // Each gradient straight to and from the slots: no packing.
  bool AllReducesBucketsInPlace() const override { return true; }
  absl::Status AllReduceBucket(const std::vector<Tensor*>& bucket, const std::string& name) override;
  absl::Status Broadcast(Tensor* t, int root, const std::string& name) override;
  absl::Status AllGather(const Tensor& in, std::vector<Tensor>* out, const std::string& name) override;
  absl::Status Barrier() override;
  // Every rank waits at the same barriers, so one that did not arrive is
  // known exactly (any rank's timed-out wait records it for all).
  std::vector<int> Unanswered() const override { return barrier_.Late(); }

  struct Header;  // an operation's header in the segment (shm_collective.cc)
  struct Span {   // `count` elements at `data`: a tensor's, or one of a bucket's
    char* data;
    int64_t count;
  };

 private:
  ShmCollective(std::unique_ptr<ShmSegment> segment, ShmRankOptions options, size_t slot_bytes);
  Header* HeaderAt(int parity, int rank) const;
  char* Slot(int parity, int rank) const;
  // Starts round `round_` (returns its parity); the first round of an
  // operation writes this rank's header.
  int BeginRound(const Header* first);
  absl::Status CheckHeaders(int parity) const;
  // AllReduce of the concatenation of `spans` (elements of `dt`).
  absl::Status AllReduceSpans(const std::vector<Span>& spans, DataType dt, const std::string& name);
  absl::Status Fail(const absl::Status& s, const char* what, const std::string& name);

  std::unique_ptr<ShmSegment> segment_;  // outlives barrier_, which marks the rank gone in it
  ShmBarrier barrier_;
  size_t slot_bytes_;
  uint64_t round_ = 0;
  uint64_t seq_ = 0;
};

struct ShmJoinOptions {
  // auto: shared memory when every rank's endpoint is on this host and
  // every rank maps the segment, else the ring; tcp: the ring; shm: shared
  // memory or an error.
  std::string transport = "auto";
  size_t slot_bytes = 1 << 20;
  absl::Duration timeout = absl::Seconds(30);
};

// Called by every rank of `ring` (formed, over `endpoints`) at once: rank 0
// makes the segment and sends its PID, descriptor and a nonce over the
// ring; the others open it (shm_segment.h); when every rank has it, the
// shared-memory communicator (the ring is closed), else the ring back, or
// with transport "shm" an error naming the rank that could not and why.
absl::StatusOr<std::unique_ptr<Collective>> JoinOverSharedMemory(std::unique_ptr<TcpRing> ring,
                                                                 const std::vector<std::string>& endpoints,
                                                                 const ShmJoinOptions& options);

// True when every endpoint ("host:port") names this host: all on loopback,
// or all on one host.
bool EndpointsShareAHost(const std::vector<std::string>& endpoints);

}  // namespace oar
