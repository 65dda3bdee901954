// Names shared by the RPC client, servers and transports: the RPC kinds and
// their method paths (Fluid's sendrecv.SendRecvService), the reserved
// control-message variable names, how long a waiter spins (the options
// themselves are rpc_options.h). gRPC's own types stay in grpc_status.h and
// the grpc_* files.
//
// Thread-safety: constants and stateless functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/rpc/rpc_options.h"

namespace oar::rpc {

enum class RpcKind { kSend, kGet, kGetNoBarrier, kPrefetch, kCheckpointNotify };
constexpr int kNumRpcKinds = 5;

// Microseconds a waiting thread spins before it sleeps, for a spin option's
// value: the value, or for -1 this host's default — 50 on hosts of 4 or
// more cores, 0 on smaller ones (where a spinning waiter takes the core the
// thread it waits for needs).
int SpinMicros(int option_value);
// The spin for the processes of one job that share this host's `cpus`
// (`oar launch`, and the benches that stand in for it): 50 when each has a
// CPU of its own — the one it waits for runs elsewhere, and a futex wake-up
// costs more than the wait — and 0 when they outnumber the CPUs.
int JobSpinMicros(int processes, int cpus);
// One pause of a spin loop.
inline void SpinPause() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// "/sendrecv.SendRecvService/SendVariable", ...
const std::string& MethodPath(RpcKind kind);
const char* KindName(RpcKind kind);

// Control messages: SendVariable of a header-only variable with these names.
inline constexpr char kBatchBarrier[] = "BATCH_BARRIER@RECV";
inline constexpr char kFetchBarrier[] = "FETCH_BARRIER@RECV";
inline constexpr char kComplete[] = "COMPLETE@RECV";
inline constexpr char kCheckpointSave[] = "SAVE@CHECKPOINTNOTIFY";
// Oar's: ends a trainer's replay of its step to a restarted pserver.
inline constexpr char kResync[] = "RESYNC@RECV";
// Oar's: a trainer that failed tells its pservers why (the reason in
// out_varname), so the job stops at once instead of at FLAGS_rpc_deadline.
inline constexpr char kAbort[] = "ABORT@RECV";
// Oar's, an elastic sync job's JOIN handshake: JOIN_HOLD@RECV asks a
// pserver to hold the serve phase of the step it answers (oar_step);
// JOIN@RECV then names the highest of those steps (oar_step), from which
// every pserver counts the trainer, and its member value (out_varname).
inline constexpr char kJoinHold[] = "JOIN_HOLD@RECV";
// In an elastic sync pserver's refusal of a trainer it took out of the job
// (its lease ran out): such a trainer's failure is its own, and it does not
// stop the job (it sends no ABORT@RECV).
inline constexpr char kLeftTheJob[] = "which has left the job";
inline constexpr char kJoin[] = "JOIN@RECV";

// The metadata key carrying OAR_AUTH_TOKEN.
inline constexpr char kAuthMetadataKey[] = "oar-auth-token";
// OAR_AUTH_TOKEN from the environment ("" when unset).
std::string AuthTokenFromEnv();

// True for the failures a client retries (with backoff, within the call's
// deadline): UNAVAILABLE, DEADLINE_EXCEEDED of one attempt, RESOURCE_EXHAUSTED.
bool Retryable(const absl::Status& s);

// An error that says why a call was refused (a server's answer, or the
// client's own check of the request or reply): not one of the retried
// ones, not ABORTED (a restarted pserver, which the client recovers from),
// not CANCELLED (a call a stopping server or transport dropped unanswered).
bool IsRefusal(const absl::Status& s);

// The error to report of several calls waited in turn: the first refusal
// if any, else the first error. A server that refused one call and then
// stopped leaves the calls waited before that answer was read unreachable;
// its answer is the reason, the unreachable server only its consequence.
//
// Thread-safety: one thread.
class CallErrors {
 public:
  void Update(const absl::Status& s) {
    if (s.ok()) return;
    if (first_.ok()) first_ = s;
    if (refusal_.ok() && IsRefusal(s)) refusal_ = s;
  }
  const absl::Status& status() const { return refusal_.ok() ? first_ : refusal_; }

 private:
  absl::Status first_, refusal_;
};

// "host:port" split; InvalidArgument naming the endpoint otherwise.
absl::Status CheckEndpoint(const std::string& endpoint);

// Reads a whole file (TLS material); NotFound naming the flag and path.
absl::StatusOr<std::string> ReadTlsFile(const std::string& flag, const std::string& path);

}  // namespace oar::rpc
