#include "common/rpc/rpc_common.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace oar::rpc {

namespace {
constexpr int kSpinUs = 50;
}  // namespace

int SpinMicros(int option_value) {
  static const int kDefault = std::thread::hardware_concurrency() >= 4 ? kSpinUs : 0;
  return option_value >= 0 ? option_value : kDefault;
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
