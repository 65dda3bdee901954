// Conversion between gRPC's status and absl::Status, at the edge only (the
// grpc_* files); the codes are the same numbers in both.
//
// Thread-safety: stateless.
#pragma once

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "common/rpc/status_payloads.h"

namespace oar::rpc {

// The status's typed facts (status_payloads.h) travel in error_details.
inline absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  DecodePayloads(s.error_details(), &out);
  return out;
}

inline grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()), EncodePayloads(s));
}

}  // namespace oar::rpc
