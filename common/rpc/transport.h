// Transport: how trainers and pservers reach each other, in Oar's types. The
// RPC client (rpc_client.h: sequence numbers, retries, pending calls) and the
// servers (ParameterServer, the gen_nccl_id receiver) are written once against
// this interface; implementations carry the calls:
//   GrpcTransport       Fluid's sendrecv.SendRecvService over gRPC (grpc_transport.h)
//   InProcessTransport  handlers in this process, no sockets (inprocess_transport.h)
//   FaultInjectingTransport  a wrapper that drops, delays, duplicates and
//                            fails calls by a seeded schedule (fault_injection.h)
// Ops get the client (and through it the transport) from their executor's
// RunEnv (common/framework/run_env.h), never from a process-wide singleton.
//
//   GrpcTransport grpc;
//   auto listener = grpc.Listen({.endpoint = "127.0.0.1:0"}, &handler);   // serve
//   RpcClient client(&grpc);                                              // call
//
// Thread-safety: implementations are safe for concurrent use.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/message.h"
#include "common/rpc/rpc_common.h"

namespace oar::rpc {
namespace stream {
class SharedRegion;  // stream/shared_region.h
}  // namespace stream

// What a handler answers: a variable (Get, Prefetch) or nothing.
struct Reply {
  std::string name;
  Variable var;  // may share the served tensor's buffer (its writer then allocates a new one)
  // The handler vouches that var's payload is not written before the
  // requester has read this reply (a sync pserver's barrier Get: a
  // parameter is next written by an optimize block that needs this
  // trainer's next gradient for it, which the trainer computes only after
  // it has read its Gets): a transport may then let the requester read it
  // in place (ServerOptions::lend) rather than copy it into the reply.
  bool stable = false;
  int64_t step = 0;  // VariableMessage.oar_step of the reply (RESYNC@RECV)
};

// Answers one request: exactly once, from any thread (a deferred answer).
using Respond = std::function<void(absl::Status status, Reply reply)>;

class RpcHandler {
 public:
  virtual ~RpcHandler() = default;
  // Serves one request. Its header was checked by the transport
  // (ParseHeader); its payload has not been copied anywhere yet. An error
  // goes back to the caller as the call's status. UNAVAILABLE must mean
  // that the request changed nothing: the client retries it, and a
  // pserver's ReplayGuard runs that retry afresh.
  virtual absl::Status Handle(RpcKind kind, const IncomingMessage& request, Reply* reply) = 0;
  // True when Handle for this kind never waits long (no barrier, no long
  // lock): a transport may then run it on its own I/O thread instead of
  // handing it to a pool. By default every kind goes through its pool.
  virtual bool NeverBlocks(RpcKind /*kind*/) const { return false; }
  // True when requests of this kind may be answered later, by whichever
  // thread makes the answer ready (a sync Get, answered by the thread that
  // ends the optimize pass), instead of holding a pool thread that waits
  // and must then be woken: a transport that can answer later offers each
  // such request to TryHandleDeferred on its own I/O thread first.
  virtual bool Defers(RpcKind /*kind*/) const { return false; }
  // Takes `request` without blocking and returns true: `respond` then runs
  // exactly once, inline or later on another thread. Returns false, having
  // done nothing, when it cannot take the request without blocking; the
  // transport then serves it the usual way (Handle on a pool thread).
  // Every request taken is answered before its listener is destroyed.
  virtual bool TryHandleDeferred(RpcKind /*kind*/, std::shared_ptr<const IncomingMessage> /*request*/,
                                 const Respond& /*respond*/) {
    return false;
  }
  // The largest request this handler can accept, in bytes (0: no bound of
  // its own). Transports refuse larger messages before reading them whole.
  virtual uint64_t MaxRequestBytes() const { return 0; }
};

struct ServerOptions {
  std::string endpoint = {};  // host:port; port 0 picks a free one; binds to host only
  int send_threads = 12, get_threads = 12, prefetch_threads = 12;  // handler threads per kind
  std::string auth_token = {};                                     // "": no check
  std::string tls_cert = {}, tls_key = {};                         // PEM file paths; TLS when both are set
  // Requests larger than this are refused unread (RESOURCE_EXHAUSTED);
  // 0: the handler's MaxRequestBytes().
  uint64_t max_message_bytes = 0;
  // Requests waiting for a handler thread, per RPC kind, beyond which new
  // ones are answered RESOURCE_EXHAUSTED (clients back off and retry).
  int max_queued_requests = 256;
  // Bytes of gradient requests held read at once (ReadGate, grpc_server);
  // 0: no bound.
  int64_t max_inflight_request_bytes = 32 << 20;
  // Shared memory holding values the handler serves (a sync pserver's
  // parameters), lent to the clients that reach this server over shared
  // memory: a stable Reply whose payload lies in it is answered with
  // where, not with the bytes. Null: nothing lent. Other transports ignore it.
  std::shared_ptr<const stream::SharedRegion> lend = {};
  // Clients on this host (shm) may lend the payloads of their Sends: the
  // handler then gets a read-only view of the client's memory (which keeps
  // it mapped) instead of a copy, and the client writes that memory again
  // when it next sends the same variable. Set only by a handler that is
  // done with a value by then (a sync pserver: a trainer sends a gradient
  // again only after its Gets of the step, answered after the optimize
  // blocks that read it; stream/lent_sends.h). Other transports ignore it.
  bool map_lent_sends = false;
};

// A server's options as `rpc` configures them (threads, bounds, TLS, the
// auth token), serving `endpoint`.
ServerOptions ServeOptions(const RpcOptions& rpc, std::string endpoint);

// A served endpoint. Destroying it stops serving: no new calls; calls in
// progress finish or are cancelled (their handlers must not wait forever:
// the owner releases their waits first).
class Listener {
 public:
  virtual ~Listener() = default;
  // host:port with the port actually bound.
  virtual const std::string& endpoint() const = 0;
  virtual void Shutdown() = 0;
};

// A request: its header and the variable whose payload it carries (shares
// the tensor's buffer, so the payload stays alive while any attempt reads it).
struct OutgoingMessage {
  MessageHeader header;
  Variable var;
  // Get: the caller's tensor, which a transport may read the reply's payload
  // straight into (no copy out of a receive buffer) once the reply's header
  // has been checked: a dense tensor named as requested, of this tensor's
  // dtype and byte size, whose buffer no other tensor shares. The caller
  // touches the tensor only after the attempt's `done` ran and keeps one
  // attempt carrying it in flight at a time; a transport that sends a
  // request again on its own (an injected duplicate) drops it. A connection
  // lost in the middle of such a payload fails the attempt with the tensor
  // partly overwritten (a retry overwrites it whole). Null: none.
  Tensor* reply_into = nullptr;
  // Get: a value the server lends (ServerOptions::lend) may arrive as a
  // read-only view of the server's memory instead of a copy (RpcClient::
  // AsyncGetView says for how long it holds). Otherwise it is copied.
  bool reply_may_view = false;
  // Send of a dense tensor: the caller sends the same variable (as the
  // same trainer id) to this server again only once the call ended, so a
  // transport may copy it into memory it lends the server and send where
  // it lies (stream/lent_sends.h), where the server agreed. That the
  // server is done with the value by the next send is the server's
  // protocol to guarantee (ServerOptions::map_lent_sends: a sync pserver).
  // Otherwise it is sent.
  // A transport that sends a request again on its own, past the call (an
  // injected duplicate), drops it: that copy would overwrite the slot.
  bool lend_payload = false;
};

// The outcome of one attempt: OK with the reply (Get, Prefetch: a variable;
// other kinds: a header-only message), or the error.
using CallDone = std::function<void(absl::Status status, std::unique_ptr<IncomingMessage> reply)>;

// The means for the thread that waits for an attempt to read its reply off
// the connection itself, rather than sleep until a transport thread has
// read it and woken it (a thread hop per call; on a small VM, a wake-up
// costs as much as the network round trip). Dropping it without Await hands
// the reply back to the transport's own threads.
//
// Thread-safety: Await from one thread at a time.
class ReplyReader {
 public:
  virtual ~ReplyReader() = default;
  // Reads the connection (other calls' replies on it too, ending them)
  // until this attempt's `done` has run or is running on another thread,
  // or `until` passed; the caller then waits for `done` as usual.
  virtual void Await(absl::Time until) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // What this transport was configured with; its clients (RpcClient) and
  // the servers started on it read their deadline, retries and bounds here.
  const RpcOptions& options() const { return options_; }
  // "grpc", "in-process", "faulty(grpc)"...
  virtual std::string Name() const = 0;
  // Starts one attempt of `kind` to `ep` and returns; `done` runs exactly
  // once, on a transport thread or inline. The transport gives up at
  // `deadline` (DEADLINE_EXCEEDED). Retries are the caller's business.
  virtual void Call(RpcKind kind, const std::string& ep, std::shared_ptr<const OutgoingMessage> request,
                    absl::Time deadline, CallDone done) = 0;
  // Call, for a caller that will wait for the attempt: a transport that can
  // let the waiting thread read the reply itself returns the means for it
  // (ReplyReader); null (the default) when `done` comes from its threads.
  virtual std::unique_ptr<ReplyReader> CallForWaiter(RpcKind kind, const std::string& ep,
                                                     std::shared_ptr<const OutgoingMessage> request,
                                                     absl::Time deadline, CallDone done) {
    Call(kind, ep, std::move(request), deadline, std::move(done));
    return nullptr;
  }
  // Whether a server of this transport can lend shared memory to its
  // clients (ServerOptions::lend): worth building one only then.
  virtual bool LendsSharedMemory() const { return false; }
  // Whether calls to `ep` made one after another reach its handler in that
  // order (one stream connection, read in order; true of the kinds a server
  // handles on its reader thread, as a sync pserver does its gradients and
  // barriers): a trainer may then write
  // its BATCH_BARRIER behind its sends without waiting for their answers
  // (the barrier's oar_sent count guards the cases where order is lost).
  virtual bool KeepsOrder(const std::string& /*ep*/) { return false; }
  // Blocks until `ep` accepts calls, at most until `deadline`;
  // DeadlineExceeded naming the endpoint otherwise.
  virtual absl::Status WaitReady(const std::string& ep, absl::Time deadline) = 0;
  // Serves `handler` (which must outlive the listener) on options.endpoint.
  virtual absl::StatusOr<std::unique_ptr<Listener>> Listen(const ServerOptions& options, RpcHandler* handler) = 0;

 protected:
  explicit Transport(RpcOptions options = {}) : options_(std::move(options)) {}

 private:
  const RpcOptions options_;
};

}  // namespace oar::rpc
