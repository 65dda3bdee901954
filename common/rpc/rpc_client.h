// RpcClient: the trainer's side of SendRecvService, over any Transport.
// Every call is async and returns a handle whose Wait() gives its result.
//
//   GrpcTransport grpc;
//   RpcClient client(&grpc);
//   auto sent = client.AsyncSendVar("10.0.0.2:6174", "fc_w@GRAD.block0", &var, {.trainer_id = 1});
//   OAR_RETURN_IF_ERROR(sent->Wait());
//
// Deadlines and retries: a call, all its attempts included, ends within
// deadline_ms of its start (ClientOptions, else the transport's RpcOptions).
// An attempt that fails UNAVAILABLE (connection refused, reset, an injected
// drop) or RESOURCE_EXHAUSTED (a busy server) is retried, up to retry_times
// times, after a doubling
// backoff (50 ms to 2 s). A failure names the RPC, the variable and the
// endpoint.
//
// Idempotence: each call carries a sequence number (VariableMessage.oar_seq,
// counted per trainer id and endpoint, the same on every retry of the call,
// with a random per-process incarnation in its high bits). A pserver applies
// a (trainer, seq) once and answers a duplicate — a retry whose first attempt
// did arrive — as it answered the first, so a retried gradient is not
// applied twice and a retried barrier is not counted for another step.
//
// A reply is parsed and checked before it is written into the caller's
// variable, so a malformed reply leaves the variable as it was.
//
// A pserver restarted from its checkpoint answers ABORTED until the trainer
// has resent its current step (StepJournal); the client does that by itself
// and then retries the call, so sync training goes on across the restart.
//
// Thread-safety: every method may be called concurrently; a handle's Wait()
// from one thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/framework/run_env.h"
#include "common/rpc/step_journal.h"
#include "common/rpc/transport.h"

namespace oar::rpc {

struct SendOptions {
  int64_t trainer_id = 0;
  std::string out_varname = {};
  std::string table_name = {};
  bool raw_bytes = false;  // send a uint8 tensor as NCCL_ID raw bytes
  bool replay = false;     // a replay of the step to a restarted pserver (StepJournal)
  int64_t step = 0;        // VariableMessage.oar_step (RESYNC@RECV)
  int64_t abort_origin = 0;  // VariableMessage.oar_abort_origin (ABORT@RECV)
  // A BATCH_BARRIER written before its sends were answered
  // (SendBatchBarriers): a refusal for having overtaken one is retried once.
  bool ahead_of_sends = false;
  // Get: see AsyncGetView.
  bool reply_may_view = false;
  // Send: the payload may go as where it lies in memory the client lends a
  // server on its host that agreed (OutgoingMessage::lend_payload says
  // what the caller and the server each guarantee).
  bool lend_payload = false;
  // This call's deadline and retries, when > 0 and >= 0 (else the client's).
  int deadline_ms = 0;
  int retry_times = -1;
};

class RpcCall {
 public:
  virtual ~RpcCall() = default;
  // Blocks until the call (and its retries) finish: at most the call's
  // deadline after it started. Returns the final status; idempotent.
  virtual absl::Status Wait() = 0;
};

// Waits for every call, in turn; the error to report is CallErrors' (a
// server's refusal before a server that then could not be reached).
absl::Status WaitAll(const std::vector<std::shared_ptr<RpcCall>>& calls);

struct ClientOptions {
  int deadline_ms = 0;   // 0: the transport's options().deadline_ms
  int retry_times = -1;  // -1: the transport's options().retry_times
  // The trainers of the job as this client's trainer counts them, said in
  // every message (VariableMessage.oar_trainers) so a pserver started with
  // another count refuses at once; 0: not said.
  int64_t trainers = 0;
  // How this client's trainer trains, said in every message
  // (VariableMessage.oar_sync_mode): 1 sync, 2 async, 0 not said.
  int64_t sync_mode = 0;
  // The settings the job's trainers must share (common/base/job_settings.h),
  // said in the first call of each trainer id to each endpoint
  // (VariableMessage.oar_job_settings); "": not said.
  std::string job_settings = {};
  // The high bits of every sequence number (rpc::IncarnationOf): 0 draws a
  // new one. A client that speaks for a process whose own client is gone
  // (a failed trainer's ABORT, cli/trainer_failure.h) passes that client's.
  uint64_t incarnation = 0;
  // A server that cannot be reached (UNAVAILABLE: refused, reset, not
  // resolvable) is tried again until the call's deadline, whatever
  // retry_times allows: a checkpointing job's pserver may be restarting
  // (Kubernetes takes seconds to bring a pod back). Said once per endpoint,
  // and again once it answers. False: retry_times bounds it (fail fast).
  bool await_restarts = false;
  // SendBatchBarriers always waits for the sends' answers first (an
  // elastic sync job: a barrier any pserver holds must mean that every
  // pserver holds the trainer's gradients of the step; a job with one
  // pserver need not: there the barrier follows the sends on the connection).
  bool barrier_after_sends = false;
};

class RpcClient {
 public:
  using Options = ClientOptions;
  // `transport` must outlive the client.
  explicit RpcClient(Transport* transport, Options options = {});
  ~RpcClient();

  Transport* transport() const { return transport_; }
  uint64_t incarnation() const { return incarnation_; }
  // Each call's deadline, all attempts included (resolved: never 0).
  int deadline_ms() const { return options_.deadline_ms; }

  // `var` is shared (not copied) until the call ends: its writer then gets a
  // fresh buffer, so the variable may be reused at once.
  std::shared_ptr<RpcCall> AsyncSendVar(const std::string& ep, const std::string& name, const Variable* var,
                                        const SendOptions& options = {});
  // Fills `*out` with the server's variable `name`: left unchanged on error,
  // except that a stream connection lost in the middle of the value may
  // leave it partly overwritten (the value is read straight into *out's
  // tensor when it fits; a retry overwrites it whole).
  std::shared_ptr<RpcCall> AsyncGetVar(const std::string& ep, const std::string& name, Variable* out,
                                       int64_t trainer_id = 0, bool no_barrier = false);
  // As AsyncGetVar (a barrier Get), but a value the server lends over shared
  // memory (a sync pserver that did not restart, to a trainer on its host)
  // arrives as a read-only view of the server's memory rather than a copy.
  // The server rewrites that memory only once every live trainer has sent
  // its next gradient for the parameter, so the view holds the value until
  // this trainer does (after that it changes under the view, unless this
  // trainer has completed: the server then stops lending). For values the
  // trainer reads within its step and then leaves alone: the slices of a
  // parameter that a recv op brings and concat joins.
  std::shared_ptr<RpcCall> AsyncGetView(const std::string& ep, const std::string& name, Variable* out,
                                        int64_t trainer_id);
  // The rows of `ids` (sent as `name`) from the pserver's prefetch block
  // for `name`, which computes `out_name`; into `*out`.
  std::shared_ptr<RpcCall> AsyncPrefetchVar(const std::string& ep, const std::string& name, const std::string& out_name,
                                            const Variable* ids, const std::string& table, Variable* out,
                                            int64_t trainer_id = 0);
  std::shared_ptr<RpcCall> AsyncSendBatchBarrier(const std::string& ep, int64_t trainer_id);
  std::shared_ptr<RpcCall> AsyncSendFetchBarrier(const std::string& ep, int64_t trainer_id);
  std::shared_ptr<RpcCall> AsyncSendComplete(const std::string& ep, int64_t trainer_id);
  // An elastic sync job's JOIN handshake (rpc_common.h): JOIN_HOLD@RECV,
  // whose answer (the step the pserver holds) goes to *held; JOIN@RECV at
  // `entry` as `member`.
  std::shared_ptr<RpcCall> AsyncSendJoinHold(const std::string& ep, int64_t trainer_id, int64_t* held);
  std::shared_ptr<RpcCall> AsyncSendJoin(const std::string& ep, int64_t trainer_id, int64_t entry,
                                         const std::string& member);
  // ABORT@RECV: this trainer failed (`why`); a pserver that serves it stops
  // the job. One short try (2 s, no retry): the pserver may be what failed.
  // It says neither the trainer count nor the mode, so that a trainer the
  // pservers refused for those can still stop them.
  // When `why` is a pserver's answer naming another trainer's failure
  // (rpc::JobStoppedBy), the ABORT says so (oar_abort_origin): this trainer
  // only passes that on.
  std::shared_ptr<RpcCall> AsyncSendAbort(const std::string& ep, int64_t trainer_id, const absl::Status& why);
  std::shared_ptr<RpcCall> AsyncCheckpointNotify(const std::string& ep, const std::string& dir, int64_t trainer_id);

  // Waits until every endpoint accepts connections, for at most timeout_ms
  // in all; the error lists the endpoints that never did. `stop`, when
  // given, is asked every half second while one does not answer: true ends
  // the wait with Cancelled (what it waited for will not come). Only a
  // server not up yet is tried again; one that answers wrongly is missing.
  absl::Status WaitServerReady(const std::vector<std::string>& endpoints, int timeout_ms,
                               const std::function<bool()>& stop = nullptr);

  // Calls a trainer's ops started without waiting (send and recv in sync
  // training, as Fluid's do); the trainer's next barrier, or COMPLETE,
  // waits for them first and reports the first that failed.
  void AddPending(int64_t trainer_id, std::shared_ptr<RpcCall> call);
  absl::Status WaitPending(int64_t trainer_id);
  // send_barrier: BATCH_BARRIER to each endpoint, after the trainer's
  // pending calls (its sends), then waits for all. To an endpoint whose
  // transport keeps order (Transport::KeepsOrder) the barrier is written at
  // once, behind the sends and before their answers — one round trip per
  // step instead of two; its count of them (oar_sent) makes the pserver
  // refuse it if it overtook one after all, and a refused barrier is sent
  // again once the sends were answered (even with retry_times 0: the
  // refusal is the protocol's, not a failure). Elsewhere it waits for the
  // sends first, as Fluid's send_barrier does.
  absl::Status SendBatchBarriers(int64_t trainer_id, const std::vector<std::string>& endpoints);

  // Sends COMPLETE@RECV, once, to every endpoint that `trainer_id` has
  // called through this client (-1: every trainer id that has called
  // anything, each as itself). An endpoint that is no longer reachable is
  // logged as a warning, not an error.
  absl::Status SendCompleteToAll(int64_t trainer_id = -1);

 private:
  std::shared_ptr<RpcCall> Start(RpcKind kind, const std::string& ep, const std::string& name, const Variable* var,
                                 const SendOptions& options, Variable* out, int64_t* reply_step = nullptr);
  friend class ClientCall;
  // After an ABORTED from a restarted `ep` (see StepJournal::Resync).
  absl::Status Recover(int64_t trainer, const std::string& ep, int64_t resyncs_seen);
  // Options::await_restarts: says once that `ep` cannot be reached and the
  // calls wait for it, and once that it answers again.
  void SayUnreachable(const std::string& ep, const absl::Status& why, int deadline_ms);
  void SayReachable(const std::string& ep);

  Transport* transport_;
  Options options_;
  const uint64_t incarnation_;  // high bits of every sequence number
  absl::Mutex mu_;
  std::map<std::pair<int64_t, std::string>, uint64_t> next_seq_ ABSL_GUARDED_BY(mu_);
  // Variables sent per (trainer id, endpoint) since the last BATCH_BARRIER.
  std::map<std::pair<int64_t, std::string>, int64_t> sent_since_barrier_ ABSL_GUARDED_BY(mu_);
  // Endpoints each trainer id has called (COMPLETE goes to these, as it).
  std::map<int64_t, std::set<std::string>> contacted_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::vector<std::shared_ptr<RpcCall>>> pending_ ABSL_GUARDED_BY(mu_);
  // The last refusal (an error not retried) per endpoint: told with a later
  // call's failure to reach it, as the likely cause (a pserver that stopped
  // the job says why, then goes).
  std::map<std::string, std::string> refused_ ABSL_GUARDED_BY(mu_);
  StepJournal journal_;
  // Endpoints awaited (await_restarts) since when.
  std::map<std::string, absl::Time> unreachable_since_ ABSL_GUARDED_BY(mu_);
};

// The bits of oar_seq above the per-endpoint counter: a sender's incarnation.
inline constexpr int kSeqCounterBits = 40;
// A fresh incarnation: random, nonzero, in the bits above the counter.
uint64_t NewIncarnation();
// The incarnation an oar_seq carries (0 for Fluid's clients, which send none).
inline constexpr uint64_t IncarnationOf(int64_t seq) {
  return static_cast<uint64_t>(seq) & ~((uint64_t{1} << kSeqCounterBits) - 1);
}

// The RunEnv of a trainer that calls through `client`: its ops use the
// client and its transport, and Executor::Close() says COMPLETE to every
// endpoint the client called.
RunEnv ClientEnv(RpcClient* client);

}  // namespace oar::rpc
