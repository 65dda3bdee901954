// StreamClient: the calling half of Oar's stream transports. One connection
// per route (a TCP address or a same-host shared-memory socket; ClientConn),
// made on first use with the auth handshake and shared by every call to
// it; calls are multiplexed over it by id, many in flight, each request's
// payload written from the tensor's memory and each reply's read straight
// into the caller's tensor or a pooled buffer that DecodeInto hands over.
// A caller that will wait for its call may read the reply itself (a
// ReplyReader; see client_conn.h for who reads when).
//
// Each call ends exactly once: with the reply, the server's error, its
// deadline (DEADLINE_EXCEEDED, found by a sweep every kSweep — not a timer
// armed and cancelled per call, which would wake a thread per call; a
// late reply is skipped), or the connection's failure (UNAVAILABLE naming
// the peer; the next call connects again). Retries are the RpcClient's
// business. Over shm, a Send that may lend its payload goes as where it
// lies in memory this client lends the server (lent_sends.h).
//
//   StreamClient client(options);   // RpcOptions: token, TLS roots, shm settings, I/O timeout
//   OAR_RETURN_IF_ERROR(client.Call(RpcKind::kGet, {.kind = Route::kTcp, .address = "10.0.0.2:41234",
//                                                   .endpoint = "10.0.0.2:6174"}, request, deadline, done));
//
// Thread-safety: safe for concurrent use. The destructor fails the calls in
// flight (CANCELLED) and joins the connections' readers; a ReplyReader may
// outlive it (its Await then returns at once).
#pragma once

#include <list>
#include <map>
#include <memory>
#include <string>

#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/rpc/stream/wake_debts.h"
#include "common/rpc/transport.h"

namespace oar::rpc::stream {

class ClientConn;
class LentSends;

struct Route {
  enum Kind { kTcp, kShm } kind = kTcp;
  std::string address;   // kTcp: host:port; kShm: "@socket-name"
  std::string endpoint;  // the server's gRPC endpoint, for messages
  std::string Key() const { return (kind == kTcp ? "tcp " : "shm ") + address; }
};

class StreamClient {
 public:
  // options.tls_ca: a PEM file of root certificates; when set, TCP routes
  // are TLS (TlsStream) and the server's certificate is checked against it.
  explicit StreamClient(const RpcOptions& options);
  ~StreamClient();

  // Starts the call on the route's connection (made first if need be) and
  // returns OK: `done` was taken and runs exactly once. An error when no
  // connection could be made: `done` is left untouched for the caller.
  // `reader` non-null: the caller will wait for the call, and may get the
  // means to read its reply itself there (see ClientConn).
  absl::Status Call(RpcKind kind, const Route& route, std::shared_ptr<const OutgoingMessage> request,
                    absl::Time deadline, CallDone&& done, std::unique_ptr<ReplyReader>* reader = nullptr);
  // Connects (and handshakes) now if not yet connected.
  absl::Status Connect(const Route& route, absl::Time deadline);
  // Wakes every server a claimed call left asleep (wake_debts.h): for a
  // caller about to wait on something else.
  void PayDebts() { debts_->PayAll(); }

 private:
  struct Slot;
  absl::StatusOr<std::shared_ptr<ClientConn>> Get(const Route& route, absl::Time deadline);

  static constexpr absl::Duration kSweep = absl::Milliseconds(20);
  const RpcOptions options_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::list<std::shared_ptr<ClientConn>> retired_ ABSL_GUARDED_BY(mu_);  // broken: joined later
  absl::Notification stop_;
  const std::shared_ptr<WakeDebts> debts_ = std::make_shared<WakeDebts>();
  // What this client lends the servers it reaches over shm (lent_sends.h):
  // made with the first such connection (options_.shm_lend_sends).
  std::shared_ptr<LentSends> LentMemory();
  absl::Mutex lent_mu_;
  std::shared_ptr<LentSends> lent_ ABSL_GUARDED_BY(lent_mu_);
  bool lent_tried_ ABSL_GUARDED_BY(lent_mu_) = false;
  std::thread sweeper_;  // expires calls past their deadline; joined first in the destructor
};

}  // namespace oar::rpc::stream
