// ClientConn: one connection of a StreamClient — its stream, the calls in
// flight on it (multiplexed by id, many at once), and who reads the replies.
//
// Who reads: one thread at a time holds the connection's read turn and
// reads whole frames, ending whichever call each answers. A caller that
// will wait for its call claims it (Call with `claim`) and gets a
// ReplyReader: its Await takes the turn and reads until its own reply came,
// so the kernel (or the ring's futex) wakes the caller itself, as it would
// wake a raw socket's reader — no hand-over from a reader thread. The
// connection's reader thread takes the turn only while nobody waits: at
// once for calls nobody claimed (Transport::Call's), and for claimed ones
// whose caller is not waiting yet when the sweep (every kSweep of the
// StreamClient) finds bytes to read — so a reply never sits unread for
// long, and a hang-up on an idle connection is noticed. A stream that
// cannot hand its reading over (TLS) is read by its reader thread alone.
//
// Wake-ups: a claimed call's request leaves the server asleep (WriteMore)
// and is owed in the client's WakeDebts; the first Await of any of the
// client's callers pays them all (wake_debts.h), so a burst of requests
// costs each server one wake-up.
//
// Each call ends exactly once: with the reply, the server's error, its
// deadline (Sweep; a late reply is skipped), or the connection's failure
// (UNAVAILABLE naming the peer; a call whose reply is being read into its
// caller's tensor ends when that read does).
//
// Thread-safety: every method is safe for concurrent use; a ReplyReader's
// Await from one thread at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/base/buffer_pool.h"
#include "common/rpc/stream/byte_stream.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/lent_sends.h"
#include "common/rpc/stream/wake_debts.h"
#include "common/rpc/transport.h"

namespace oar::rpc::stream {

class ClientConn : public std::enable_shared_from_this<ClientConn> {
 public:
  // `name`: for messages, "127.0.0.1:6174 over tcp 127.0.0.1:41234".
  // `debts` (may be null): a claimed call's request is then written with
  // the peer left asleep and owed there, and a caller's Await pays every
  // debt first (wake_debts.h). `lent` (may be null): the memory this
  // client lent the server, which mapped it — a request that may lend its
  // payload (OutgoingMessage::lend_payload) is copied into its slot there
  // and sent as where it lies (lent_sends.h).
  // `io_timeout`: how long the server may stall mid-frame (IoDeadline).
  ClientConn(std::unique_ptr<ByteStream> stream, std::string name, std::shared_ptr<WakeDebts> debts = nullptr,
             std::shared_ptr<LentSends> lent = nullptr, absl::Duration io_timeout = kDefaultIoTimeout);
  ~ClientConn();

  // Starts the reader thread.
  void Start();
  // Joins it (after Break).
  void Join();
  bool finished() const { return finished_.load(); }
  bool broken();

  // Writes the request. `claim`: the caller will wait for this call, and
  // gets the ReplyReader to do it with (null when the stream cannot hand
  // its reading over; its reader thread then reads the reply).
  std::unique_ptr<ReplyReader> Call(RpcKind kind, std::shared_ptr<const OutgoingMessage> request, absl::Time deadline,
                                    CallDone done, bool claim);
  // Ends the calls whose deadline passed (DEADLINE_EXCEEDED), and wakes
  // the reader thread when nobody reads and there are bytes to read.
  void Sweep(absl::Time now);
  // Fails every call in flight and closes the stream; later calls fail too.
  void Break(const absl::Status& why);
  // Wakes the peer for requests written with it left asleep.
  void Flush() { stream_->Flush(); }

 private:
  class Reader;
  struct Pending {
    CallDone done;
    absl::Time deadline;
    std::string var;
    Tensor* into = nullptr;  // OutgoingMessage::reply_into
    bool receiving = false;  // its reply's payload is being read into `into`
    bool claimed = false;    // its caller reads (Await) rather than the reader thread
    bool may_view = false;   // OutgoingMessage::reply_may_view
  };
  using PendingMap = std::map<uint64_t, Pending>;

  // Removes a call, keeping unclaimed_ right.
  Pending Take(PendingMap::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Finish(uint64_t id, absl::Status status, std::unique_ptr<IncomingMessage> reply);
  // Reads one frame and ends the call it answers; false when the stream
  // failed (the connection is broken). The caller holds the read turn.
  bool ReadFrame(absl::Time header_deadline);
  void ReaderLoop();
  bool ReaderMayRead() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ReplyReader's: read until call `id` ended or `until`.
  void Await(uint64_t id, absl::Time until);
  // A claimed call whose ReplyReader went: the reader thread reads it.
  void Unclaim(uint64_t id);

  const absl::Duration io_timeout_;
  std::unique_ptr<ByteStream> stream_;
  const std::string name_;
  const std::shared_ptr<WakeDebts> debts_;
  const std::shared_ptr<LentSends> lent_;
  const bool can_hand_over_;  // stream_->CanWaitReadable()
  const bool defers_;         // claimed calls' requests go out with WriteMore
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
  absl::Mutex write_mu_;
  absl::Mutex mu_;
  PendingMap pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::string why_ ABSL_GUARDED_BY(mu_);
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // some thread holds the read turn
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;       // threads in Await
  int unclaimed_ ABSL_GUARDED_BY(mu_) = 0;     // calls in flight that nobody will Await
  bool kick_ ABSL_GUARDED_BY(mu_) = false;     // the sweep found bytes nobody is reading
  std::thread reader_;
  std::atomic<bool> finished_{false};
};

}  // namespace oar::rpc::stream
