#include "common/rpc/rpc_common.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/flag_refusal.h"
#include "gflags/gflags.h"

DEFINE_int32(rpc_deadline, 180000, "deadline of one RPC and of every barrier wait, in ms");
DEFINE_validator(rpc_deadline, [](const char*, int32_t v) {
  if (v > 0) return true;
  return oar::RefuseFlagValue("give a positive number of milliseconds");
});
DEFINE_bool(rpc_shm_lend_params, true,
            "a sync pserver keeps the parameters it serves in shared memory and lends it to the trainers it serves "
            "over shm; a Get's reply then says where the value lies and the trainer copies it from there (one copy "
            "instead of two, and none on the pserver); a trainer with this false does not take the loan");
DEFINE_bool(rpc_shm_lend_sends, true,
            "the other way: a trainer offers the pservers on its host the memory its gradients are sent from, and a "
            "sync pserver takes it; a Send then says where the value lies and the pserver reads it there (the "
            "trainer copies it once, as into the ring, and the pserver copies nothing); false on a trainer: it "
            "offers nothing; on a pserver: it does not take the loan");
DEFINE_int64(rpc_shm_send_region_bytes, int64_t{1} << 30,
             "address space a trainer sets aside for the gradients it lends (--rpc_shm_lend_sends); only the pages "
             "its gradients use take memory; a gradient that no longer fits is sent through the ring");
DEFINE_int32(rpc_retry_times, 3,
             "retries of an RPC that failed UNAVAILABLE or RESOURCE_EXHAUSTED, all within its --rpc_deadline");
DEFINE_int32(rpc_send_thread_num, 12, "pserver threads handling SendVariable");
DEFINE_int32(rpc_get_thread_num, 12, "pserver threads handling GetVariable");
DEFINE_int32(rpc_prefetch_thread_num, 12, "pserver threads handling PrefetchVariable");
DEFINE_string(rpc_tls_cert, "", "PEM certificate of this server (TLS when set with --rpc_tls_key)");
DEFINE_string(rpc_tls_key, "", "PEM private key of this server");
DEFINE_string(rpc_tls_ca, "", "PEM root certificates that clients trust (TLS on the client side when set)");
DEFINE_int64(rpc_max_message_bytes, 0,
             "largest request a server reads; 0: a pserver derives it from the largest variable it receives");
DEFINE_int32(rpc_max_queued_requests, 256,
             "requests of one RPC kind waiting for a handler thread before new ones are answered RESOURCE_EXHAUSTED");
DEFINE_int64(rpc_max_inflight_request_bytes, 32 << 20,
             "gradient bytes a server holds read at once; further sends wait unread (flow control holds them at the "
             "sender); 0: no bound");

DEFINE_int32(rpc_wait_spin_us, -1,
             "how long a caller waiting for a reply over gRPC (or a TLS stream) spins before it sleeps (a sleeping "
             "thread's wake-up costs tens of microseconds on some hosts; over the tcp and shm streams the caller "
             "reads its reply itself); -1: 50 on hosts of 4 or more cores, 0 on smaller ones");

namespace oar::rpc {

namespace {
constexpr int kSpinUs = 50;
}  // namespace

int SpinMicros(int flag_value) {
  static const int kDefault = std::thread::hardware_concurrency() >= 4 ? kSpinUs : 0;
  return flag_value >= 0 ? flag_value : kDefault;
}

int JobSpinMicros(int processes, int cpus) { return processes <= cpus && cpus >= 2 ? kSpinUs : 0; }

const std::string& MethodPath(RpcKind kind) {
  static const std::string kPaths[kNumRpcKinds] = {
      "/sendrecv.SendRecvService/SendVariable", "/sendrecv.SendRecvService/GetVariable",
      "/sendrecv.SendRecvService/GetVariableNoBarrier", "/sendrecv.SendRecvService/PrefetchVariable",
      "/sendrecv.SendRecvService/CheckpointNotify"};
  return kPaths[static_cast<int>(kind)];
}

const char* KindName(RpcKind kind) {
  static const char* kNames[kNumRpcKinds] = {"SendVariable", "GetVariable", "GetVariableNoBarrier", "PrefetchVariable",
                                             "CheckpointNotify"};
  return kNames[static_cast<int>(kind)];
}

std::string AuthTokenFromEnv() {
  const char* t = std::getenv("OAR_AUTH_TOKEN");
  return t ? t : "";
}

bool Retryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kDeadlineExceeded ||
         s.code() == absl::StatusCode::kResourceExhausted;
}

bool IsRefusal(const absl::Status& s) {
  return !s.ok() && !Retryable(s) && s.code() != absl::StatusCode::kAborted && s.code() != absl::StatusCode::kCancelled;
}

absl::Status CheckEndpoint(const std::string& endpoint) {
  const size_t colon = endpoint.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 || !absl::SimpleAtoi(endpoint.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("endpoint '", endpoint, "' is not host:port"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadTlsFile(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("--", flag, ": cannot read '", path, "'"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace oar::rpc
