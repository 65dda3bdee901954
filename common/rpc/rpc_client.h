// RpcClient: the trainer's side of SendRecvService. One gRPC channel per
// endpoint (message size uncapped, 16 MiB frames); every call is async and
// returns a handle whose Wait() gives its result. A call has a deadline of
// FLAGS_rpc_deadline ms and is retried up to FLAGS_rpc_retry_times on
// UNAVAILABLE or DEADLINE_EXCEEDED, with doubling backoff; a failure names
// the RPC, the variable and the endpoint.
//
//   RpcClient* c = RpcClient::Global();
//   auto sent = c->AsyncSendVar("10.0.0.2:6174", "fc_w@GRAD.block0", &var, {.trainer_id = 1});
//   OAR_RETURN_IF_ERROR(sent->Wait());
//
// Retrying is safe for this protocol: a pserver stores a trainer's variable
// by name and counts barriers per trainer id, so a repeat changes nothing.
//
// Thread-safety: every method may be called concurrently; a handle's Wait()
// from one thread.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/var_serde.h"

namespace grpc {
class Channel;
}

namespace oar::rpc {

struct ClientOptions {
  int deadline_ms = 0;   // 0: FLAGS_rpc_deadline
  int retry_times = -1;  // -1: FLAGS_rpc_retry_times
  std::string auth_token;  // sent with every call when set
  std::string tls_ca;      // PEM root certificates file; TLS when set
  static ClientOptions FromFlagsAndEnv();
};

class RpcCall {
 public:
  virtual ~RpcCall() = default;
  // Blocks until the call (and its retries) finish; bounded by the deadline
  // times (retries + 1) plus the backoff.
  virtual absl::Status Wait() = 0;
};

class RpcClient {
 public:
  explicit RpcClient(ClientOptions options = ClientOptions::FromFlagsAndEnv());
  ~RpcClient();
  // The process-wide client the trainer ops use.
  static RpcClient* Global();

  // `var` (and the tensor memory it references) must stay unchanged until Wait
  // returns.
  std::shared_ptr<RpcCall> AsyncSendVar(const std::string& ep, const std::string& name, const Variable* var,
                                        const SendOptions& options = {});
  // Fills `*out` with the server's variable `name`.
  std::shared_ptr<RpcCall> AsyncGetVar(const std::string& ep, const std::string& name, Variable* out,
                                       int64_t trainer_id = 0, bool no_barrier = false);
  std::shared_ptr<RpcCall> AsyncPrefetchVar(const std::string& ep, const std::string& name, const Variable* ids,
                                            const std::string& table, Variable* out, int64_t trainer_id = 0);
  std::shared_ptr<RpcCall> AsyncSendBatchBarrier(const std::string& ep, int64_t trainer_id);
  std::shared_ptr<RpcCall> AsyncSendFetchBarrier(const std::string& ep, int64_t trainer_id);
  std::shared_ptr<RpcCall> AsyncSendComplete(const std::string& ep, int64_t trainer_id);
  std::shared_ptr<RpcCall> AsyncCheckpointNotify(const std::string& ep, const std::string& dir, int64_t trainer_id);

  // Waits until every endpoint accepts connections, for at most timeout_ms
  // in all; the error lists the endpoints that never did.
  absl::Status WaitServerReady(const std::vector<std::string>& endpoints, int timeout_ms);

  // Calls a trainer's ops started without waiting (send and recv in sync
  // training, as Fluid's do); the trainer's next barrier, or COMPLETE,
  // waits for them first and reports the first that failed.
  void AddPending(int64_t trainer_id, std::shared_ptr<RpcCall> call);
  absl::Status WaitPending(int64_t trainer_id);

  // Sends COMPLETE@RECV, once, to every endpoint that `trainer_id` has
  // called through this client (-1: every trainer id that has called
  // anything, each as itself). An endpoint that is no longer reachable is
  // logged as a warning, not an error.
  absl::Status SendCompleteToAll(int64_t trainer_id = -1);

 private:
  std::shared_ptr<grpc::Channel> Channel(const std::string& ep);
  std::shared_ptr<RpcCall> Start(RpcKind kind, const std::string& ep, const std::string& name,
                                 absl::StatusOr<grpc::ByteBuffer> request, Variable* out, int64_t trainer_id);

  ClientOptions options_;
  absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels_ ABSL_GUARDED_BY(mu_);
  // Endpoints each trainer id has called (COMPLETE goes to these, as it).
  std::map<int64_t, std::set<std::string>> contacted_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::vector<std::shared_ptr<RpcCall>>> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace oar::rpc
