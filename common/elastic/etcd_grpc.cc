#include "common/elastic/etcd_grpc.h"

#include "absl/strings/str_cat.h"

namespace oar::elastic {

absl::Status FromGrpc(const grpc::Status& s, const std::string& endpoint, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  const std::string text = absl::StrCat("etcd at ", endpoint, ": ", what, ": ", s.error_message());
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(
          absl::StrCat("etcd at ", endpoint, " cannot be reached (", what, "): ", s.error_message()));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::DeadlineExceededError(text);
    case grpc::StatusCode::NOT_FOUND:
      return absl::NotFoundError(text);
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
      return absl::InvalidArgumentError(text);
    case grpc::StatusCode::CANCELLED:
      return absl::CancelledError(text);
    default:
      return absl::InternalError(text);
  }
}

EtcdKv KvOf(const pb::KeyValue& kv) {
  return {kv.key(), kv.value(), kv.create_revision(), kv.mod_revision(), kv.lease()};
}

EtcdRange RangeOf(const pb::RangeResponse& r) {
  EtcdRange out;
  out.revision = r.header().revision();
  for (const auto& kv : r.kvs()) out.kvs.push_back(KvOf(kv));
  return out;
}

// A context bounded by `timeout` that waits for a channel still connecting
// (etcd restarting) instead of failing at once.
std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx->set_wait_for_ready(true);
  return ctx;
}

}  // namespace oar::elastic
