// ShmStream: a ByteStream between two processes on one host through two
// ShmRings (one each way) in a memfd that the client creates and hands to
// the server over a Unix-domain socket (SCM_RIGHTS). The socket stays open
// and carries nothing more but, at most once each way, a region one end
// lends the other (shared_region.h, lent_sends.h; announced in the
// handshake): its hang-up
// is how each side learns that the other died (a futex in shared memory
// would wait forever for a dead process).
//
// Same-host detection is the socket itself: the server offers an abstract
// socket name (transport_select.h); a client that can connect to it shares
// the server's network namespace, hence its host. The auth handshake then
// runs over the rings like over TCP (stream_conn.h).
//
//   OAR_ASSIGN_OR_RETURN(auto s, ShmStream::Connect("@oar-123-6174", "shm 127.0.0.1:6174", deadline));
//
// Thread-safety: as ByteStream.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/stream/byte_stream.h"
#include "common/rpc/stream/shared_region.h"
#include "common/rpc/stream/shm_ring.h"

namespace oar::rpc::stream {

// How one end of a shm connection behaves (from RpcOptions' shm_* fields).
struct ShmOptions {
  uint64_t ring_bytes = 2 << 20;  // each way; the client's choice, which the server takes
  int spin_us = -1;               // a wait's spin before it sleeps; -1: SpinMicros' default
  bool batch_wakeups = false;     // DefersWakeups()
};

class ShmStream final : public ByteStream {
 public:
  // Client side: connects to the abstract socket `name` ("@..."), creates
  // and sends the rings (o.ring_bytes each way). Unavailable when nobody
  // listens there (another host, or no shm offered).
  static absl::StatusOr<std::unique_ptr<ShmStream>> Connect(const std::string& name, const std::string& peer,
                                                            absl::Time deadline, const ShmOptions& o = {});
  // Server side: receives the rings on the accepted socket `fd` (owned from
  // here on) and maps them; InvalidArgument when what came is not a ring
  // pair of a sane size.
  static absl::StatusOr<std::unique_ptr<ShmStream>> Accept(int fd, const std::string& peer, absl::Time deadline,
                                                           const ShmOptions& o = {});
  ~ShmStream() override;

  absl::Status Read(void* dst, size_t n, absl::Time deadline) override;
  absl::Status Write(const std::vector<ConstPiece>& pieces, absl::Time deadline) override;
  absl::Status WriteMore(const std::vector<ConstPiece>& pieces, absl::Time deadline) override;
  void Flush() override { out_->WakeDeferred(); }
  bool DefersWakeups() const override { return batch_wakeups_; }
  void Close() override;
  const std::string& peer() const override { return peer_; }
  bool CanWaitReadable() const override { return true; }
  absl::Status WaitReadable(absl::Time deadline) override;
  bool Readable() override { return in_->Readable() || !PeerAlive().ok(); }
  bool WritableNow(size_t n) override { return out_->Writable() >= n; }
  bool CanLendRegions() const override { return true; }
  absl::Status LendRegion(const SharedRegion& region) override;
  absl::Status MapLentRegion(absl::Time deadline) override;
  absl::Status DropLentRegion(absl::Time deadline) override;
  std::shared_ptr<const SharedRegion> lent_region() const override { return borrowed_; }

 private:
  ShmStream(int socket_fd, void* memory, size_t mapped, size_t ring_bytes, bool client, std::string peer,
            const ShmOptions& o);
  // OK while the peer's socket is open.
  absl::Status PeerAlive() const;
  absl::Status Named(absl::Status s) const;

  int socket_fd_;
  void* memory_;
  size_t mapped_;
  std::unique_ptr<ShmRing> in_, out_;
  std::string peer_;
  const bool batch_wakeups_;
  std::atomic<bool> closed_{false};
  std::shared_ptr<const SharedRegion> borrowed_;  // this end's map of what the peer lent
};

}  // namespace oar::rpc::stream
