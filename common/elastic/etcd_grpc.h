// The gRPC side of EtcdClient, shared by its files (etcd_client.cc: keys
// and leases; etcd_watch.cc: watches): the stubs of etcd's services, its
// gRPC codes as Status, deadline-bounded contexts and the retry of a call
// whose connection broke under it. Internal to common/elastic.
//
// Thread-safety: as EtcdClient's (gRPC stubs are thread-safe).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/elastic/etcd_client.h"
#include "grpcpp/grpcpp.h"
#include "proto/etcd_rpc.grpc.pb.h"

namespace oar::elastic {

namespace pb = etcdserverpb;

struct EtcdClient::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Watch::Stub> watch;
};

// gRPC's status as ours, naming the server and what was asked.
absl::Status FromGrpc(const grpc::Status& s, const std::string& endpoint, const std::string& what);
EtcdKv KvOf(const pb::KeyValue& kv);
EtcdRange RangeOf(const pb::RangeResponse& r);

// A context bounded by `timeout` that waits for a channel still connecting
// (etcd restarting) instead of failing at once.
std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout);

// `call(ctx)` until it is answered or `timeout` has passed: a call cut off
// by a connection that broke under it (etcd restarting) is made again, and
// `*again` says so (a write may then have been applied by the first try).
template <typename Call>
grpc::Status Retrying(absl::Duration timeout, Call call, bool* again = nullptr) {
  const absl::Time until = absl::Now() + timeout;
  for (bool first = true;; first = false) {
    if (!first && again != nullptr) *again = true;
    auto ctx = Context(until - absl::Now());
    const grpc::Status s = call(ctx.get());
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE || absl::Now() + absl::Milliseconds(100) >= until) return s;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

}  // namespace oar::elastic
