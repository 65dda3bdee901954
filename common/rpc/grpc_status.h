// Conversion between gRPC's status and absl::Status, at the edge only (the
// grpc_* files); the codes are the same numbers in both.
//
// Thread-safety: stateless.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace oar::rpc {

inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace oar::rpc
