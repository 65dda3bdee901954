// ServerConn: one accepted stream connection of a StreamServer — its reader
// thread (handshake, then request frames → checks → handler) and the lock
// its replies are written under. See stream_server.h for what is refused
// and how.
//
// A deferred request answered by another thread than the reader (the
// pserver's loop answering parked Gets) is written by that thread only
// when the stream can take it at once; else it joins the connection's
// queue, which one pool task at a time writes — so a peer that stopped
// reading holds up no one else's answer and at most one pool thread.
//
// Where the stream batches wake-ups (ByteStream::DefersWakeups), the reader
// thread answers with the client left asleep (WriteMore) while the client's
// next request is already in, so a burst of requests is
// answered with one wake-up: the last reply's, or the one the reader pays
// before it next waits for a request.
//
// Thread-safety: Close from any thread; the rest is internal to its reader
// and the pool threads serving its requests, or the handler's threads that
// answer deferred ones (both hold a shared_ptr).
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "common/rpc/handler_pools.h"
#include "common/rpc/read_gate.h"
#include "common/rpc/stream/byte_stream.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/received_message.h"
#include "common/rpc/stream/shared_region.h"
#include "common/rpc/transport.h"

namespace oar::rpc::stream {

// What a server's connections share.
struct ServerContext {
  RpcHandler* handler = nullptr;
  std::string token;
  std::string endpoint;      // for messages: "127.0.0.1:6174 (tcp)"
  uint64_t max_request = 0;  // bytes; 0: no cap
  HandlerPools* pools = nullptr;
  ReadGate* gate = nullptr;
  // Lent to shm clients that ask (shared_region.h); a stable reply's
  // payload that lies in it is answered with its offset. Null: none.
  const SharedRegion* region = nullptr;
  // A shm client's lent region is mapped, and its requests' payloads that
  // lie there reach the handler as read-only views of it
  // (ServerOptions::map_lent_sends).
  bool map_client_regions = false;
  // How long a peer may stall mid-frame (IoDeadline).
  absl::Duration io_timeout = kDefaultIoTimeout;
  // Requests read and not yet answered, over all connections: shutdown
  // lets them finish (as gRPC's Shutdown does) before it closes them.
  mutable std::atomic<int> in_flight{0};
};

class ServerConn : public std::enable_shared_from_this<ServerConn> {
 public:
  ServerConn(const ServerContext* ctx, std::unique_ptr<ByteStream> stream);
  ~ServerConn();
  // Starts the reader thread.
  void Start();
  // Ends the stream: the reader leaves, replies not yet written are lost.
  void Close();
  // Joins the reader (not from it).
  void Join();
  bool finished() const { return finished_.load(); }

 private:
  void ReadLoop();
  // Waits for a ReadGate slot; false when the caller's deadline passed or
  // the connection closed first.
  bool EnterGate(absl::Time deadline);
  // Offers a request to the handler's deferred path (RpcHandler::Defers);
  // true when the handler took it and will answer through Answer.
  bool TryDefer(RpcKind kind, uint64_t call_id, const std::shared_ptr<IncomingMessage>& request, bool holds_slot);
  void Serve(RpcKind kind, uint64_t call_id, absl::Time deadline, std::shared_ptr<IncomingMessage> request,
             bool holds_slot);
  void Answer(uint64_t call_id, const absl::Status& s, const Reply* reply);
  // Answer, when it can be written at once: false, having written nothing,
  // when another thread is writing or the stream has no room for it now.
  bool TryAnswerNow(uint64_t call_id, const absl::Status& s, const Reply* reply);
  // Writes the answer (write_mu_ held); with `only_if_room`, returns false
  // having written nothing when the stream cannot take it without waiting.
  bool WriteAnswerLocked(uint64_t call_id, const absl::Status& s, const Reply* reply, bool only_if_room)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Whether `reply` goes out as an offset in the region lent to this peer.
  bool InRegion(const Reply& reply) const;
  // Queues a deferred answer that could not be written at once; one pool
  // task at a time (DrainAnswers) writes this connection's queue, so a peer
  // that stopped reading holds at most one pool thread.
  void AnswerLater(RpcKind kind, uint64_t call_id, absl::Status s, Reply reply);
  void DrainAnswers();

  const ServerContext* ctx_;
  std::unique_ptr<ByteStream> stream_;
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
  absl::Mutex write_mu_;
  std::thread reader_;
  std::atomic<std::thread::id> reader_id_{};  // the reader thread's, while it runs
  struct Queued {
    uint64_t call_id = 0;
    absl::Status status;
    Reply reply;
  };
  absl::Mutex queue_mu_;
  std::deque<Queued> queued_ ABSL_GUARDED_BY(queue_mu_);
  bool draining_ ABSL_GUARDED_BY(queue_mu_) = false;  // a DrainAnswers task is scheduled or running
  std::atomic<bool> closing_{false}, finished_{false};
  // ctx_->region was lent to this peer: set by the reader thread in the
  // handshake, before it reads any request; the threads that answer read
  // it after they got a request from the reader (ordered by that hand-over).
  bool lent_ = false;
};

}  // namespace oar::rpc::stream
