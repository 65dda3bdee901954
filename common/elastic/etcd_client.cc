#include "common/elastic/etcd_client.h"

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status.h"
#include "grpcpp/grpcpp.h"
#include "proto/etcd_rpc.grpc.pb.h"

namespace oar::elastic {
namespace {

namespace pb = etcdserverpb;

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

class GrpcWatch : public EtcdWatch {
 public:
  GrpcWatch(std::unique_ptr<grpc::ClientContext> ctx,
            std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream, std::string endpoint,
            EtcdClient::EventsFn on_events, EtcdClient::EndFn on_end)
      : ctx_(std::move(ctx)),
        stream_(std::move(stream)),
        endpoint_(std::move(endpoint)),
        on_events_(std::move(on_events)),
        on_end_(std::move(on_end)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~GrpcWatch() override {
    stopping_ = true;
    ctx_->TryCancel();
    thread_.join();
  }

 private:
  void Loop() {
    pb::WatchResponse r;
    absl::Status why;
    while (stream_->Read(&r)) {
      if (r.canceled() || r.compact_revision() != 0) {
        why = absl::AbortedError(absl::StrCat(
            "etcd at ", endpoint_, " cancelled the watch",
            r.compact_revision() != 0 ? absl::StrCat(" (revision compacted up to ", r.compact_revision(), ")") : "",
            r.cancel_reason().empty() ? "" : ": " + r.cancel_reason()));
        break;
      }
      if (r.events_size() == 0) continue;  // created, or progress
      std::vector<EtcdEvent> events;
      for (const auto& e : r.events()) events.push_back({e.type() == pb::Event::DELETE, KvOf(e.kv())});
      on_events_(events, r.header().revision());
    }
    if (stopping_) return;
    if (why.ok()) why = FromGrpc(stream_->Finish(), endpoint_, "watch");
    if (why.ok()) why = absl::UnavailableError(absl::StrCat("etcd at ", endpoint_, " ended the watch"));
    if (on_end_) on_end_(why);
  }

  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream_;
  std::string endpoint_;
  EtcdClient::EventsFn on_events_;
  EtcdClient::EndFn on_end_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace

struct EtcdClient::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Watch::Stub> watch;
};

std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const std::string& url, absl::Duration timeout) {
  std::string ep = url;
  if (absl::StartsWith(ep, "etcd://")) ep = ep.substr(7);
  if (ep.empty() || ep.find("://") != std::string::npos || ep.find(':') == std::string::npos ||
      ep.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("the etcd server '", url, "' is not etcd://HOST:PORT (etcd's client URL, without TLS)"));
  }
  auto stubs = std::make_unique<Stubs>();
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  stubs->channel = grpc::CreateCustomChannel(ep, grpc::InsecureChannelCredentials(), args);
  stubs->kv = pb::KV::NewStub(stubs->channel);
  stubs->lease = pb::Lease::NewStub(stubs->channel);
  stubs->watch = pb::Watch::NewStub(stubs->channel);
  return std::unique_ptr<EtcdClient>(new EtcdClient(ep, timeout, std::move(stubs)));
}

EtcdClient::EtcdClient(std::string endpoint, absl::Duration timeout, std::unique_ptr<Stubs> stubs)
    : endpoint_(std::move(endpoint)), timeout_(timeout), stubs_(std::move(stubs)) {}

EtcdClient::~EtcdClient() = default;

namespace {

// A context bounded by `timeout` that waits for a channel still connecting
// (etcd restarting) instead of failing at once.
std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  ctx->set_wait_for_ready(true);
  return ctx;
}

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

}  // namespace

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  pb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  pb::PutResponse resp;
  const grpc::Status s = Retrying(timeout_, [&](grpc::ClientContext* ctx) { return stubs_->kv->Put(ctx, req, &resp); });
  if (!s.ok()) return FromGrpc(s, endpoint_, absl::StrCat("put '", key, "'"));
  return resp.header().revision();
}

namespace {

// `*again`: it was sent twice (see Retrying).
absl::StatusOr<bool> Txn(pb::KV::Stub* kv, const pb::TxnRequest& req, absl::Duration timeout,
                         const std::string& endpoint, const std::string& what, bool* again) {
  pb::TxnResponse resp;
  const grpc::Status s = Retrying(
      timeout, [&](grpc::ClientContext* ctx) { return kv->Txn(ctx, req, &resp); }, again);
  if (!s.ok()) return FromGrpc(s, endpoint, what);
  return resp.succeeded();
}

pb::TxnRequest PutIf(const std::string& key, pb::Compare::CompareTarget target, int64_t revision,
                     const std::string& value, int64_t lease) {
  pb::TxnRequest req;
  pb::Compare* c = req.add_compare();
  c->set_key(key);
  c->set_result(pb::Compare::EQUAL);
  c->set_target(target);
  if (target == pb::Compare::CREATE) {
    c->set_create_revision(revision);
  } else {
    c->set_mod_revision(revision);
  }
  pb::PutRequest* put = req.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  return req;
}

}  // namespace

absl::StatusOr<bool> EtcdClient::Holds(const std::string& key, const std::string& value, int64_t lease) {
  OAR_ASSIGN_OR_RETURN(EtcdRange got, Get(key));
  return !got.kvs.empty() && got.kvs[0].value == value && got.kvs[0].lease == lease;
}

absl::StatusOr<bool> EtcdClient::Create(const std::string& key, const std::string& value, int64_t lease) {
  bool again = false;
  OAR_ASSIGN_OR_RETURN(const bool made, Txn(stubs_->kv.get(), PutIf(key, pb::Compare::CREATE, 0, value, lease),
                                            timeout_, endpoint_, absl::StrCat("create '", key, "'"), &again));
  if (made || !again) return made;
  return Holds(key, value, lease);  // the first try's, cut off before its answer
}

absl::StatusOr<bool> EtcdClient::CompareAndPut(const std::string& key, int64_t mod_revision, const std::string& value,
                                               int64_t lease) {
  bool again = false;
  OAR_ASSIGN_OR_RETURN(const bool put,
                       Txn(stubs_->kv.get(), PutIf(key, pb::Compare::MOD, mod_revision, value, lease), timeout_,
                           endpoint_, absl::StrCat("replace '", key, "' at revision ", mod_revision), &again));
  if (put || !again) return put;
  return Holds(key, value, lease);
}

absl::StatusOr<bool> EtcdClient::MoveIf(const std::string& from, const std::string& expected, const std::string& to,
                                        const std::string& value) {
  pb::TxnRequest req;
  pb::Compare* c = req.add_compare();
  c->set_key(from);
  c->set_result(pb::Compare::EQUAL);
  c->set_target(pb::Compare::VALUE);
  c->set_value(expected);
  pb::PutRequest* put = req.add_success()->mutable_request_put();
  put->set_key(to);
  put->set_value(value);
  req.add_success()->mutable_request_delete_range()->set_key(from);
  bool again = false;
  OAR_ASSIGN_OR_RETURN(const bool moved, Txn(stubs_->kv.get(), req, timeout_, endpoint_,
                                             absl::StrCat("move '", from, "' to '", to, "'"), &again));
  if (moved || !again) return moved;
  return Holds(to, value, 0);  // moved by the first try, cut off before its answer
}

namespace {

absl::StatusOr<EtcdRange> Range(pb::KV::Stub* kv, const std::string& key, const std::string& end,
                                absl::Duration timeout, const std::string& endpoint) {
  pb::RangeRequest req;
  req.set_key(key);
  req.set_range_end(end);
  pb::RangeResponse resp;
  const grpc::Status s = Retrying(timeout, [&](grpc::ClientContext* ctx) { return kv->Range(ctx, req, &resp); });
  if (!s.ok()) return FromGrpc(s, endpoint, absl::StrCat("read '", key, end.empty() ? "'" : "*'"));
  return RangeOf(resp);
}

absl::StatusOr<int64_t> DeleteRange(pb::KV::Stub* kv, const std::string& key, const std::string& end,
                                    absl::Duration timeout, const std::string& endpoint) {
  pb::DeleteRangeRequest req;
  req.set_key(key);
  req.set_range_end(end);
  pb::DeleteRangeResponse resp;
  const grpc::Status s = Retrying(timeout, [&](grpc::ClientContext* ctx) { return kv->DeleteRange(ctx, req, &resp); });
  if (!s.ok()) return FromGrpc(s, endpoint, absl::StrCat("delete '", key, end.empty() ? "'" : "*'"));
  return resp.deleted();
}

}  // namespace

absl::StatusOr<EtcdRange> EtcdClient::Get(const std::string& key) {
  return Range(stubs_->kv.get(), key, "", timeout_, endpoint_);
}
absl::StatusOr<EtcdRange> EtcdClient::GetPrefix(const std::string& prefix) {
  return Range(stubs_->kv.get(), prefix, PrefixEnd(prefix), timeout_, endpoint_);
}
absl::StatusOr<int64_t> EtcdClient::Delete(const std::string& key) {
  return DeleteRange(stubs_->kv.get(), key, "", timeout_, endpoint_);
}
absl::StatusOr<int64_t> EtcdClient::DeletePrefix(const std::string& prefix) {
  return DeleteRange(stubs_->kv.get(), prefix, PrefixEnd(prefix), timeout_, endpoint_);
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  pb::LeaseGrantRequest req;
  req.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)))));
  pb::LeaseGrantResponse resp;
  const grpc::Status s =
      Retrying(timeout_, [&](grpc::ClientContext* ctx) { return stubs_->lease->LeaseGrant(ctx, req, &resp); });
  if (!s.ok()) return FromGrpc(s, endpoint_, "grant a lease");
  if (!resp.error().empty()) {
    return absl::InternalError(absl::StrCat("etcd at ", endpoint_, " granted no lease: ", resp.error()));
  }
  return resp.id();
}

absl::Status EtcdClient::KeepAlive(int64_t lease) {
  auto ctx = Context(timeout_);
  auto stream = stubs_->lease->LeaseKeepAlive(ctx.get());
  pb::LeaseKeepAliveRequest req;
  req.set_id(lease);
  pb::LeaseKeepAliveResponse resp;
  const bool answered = stream->Write(req) && stream->Read(&resp);
  stream->WritesDone();
  const grpc::Status s = stream->Finish();
  const std::string what = absl::StrCat("renew lease ", lease);
  if (!answered)
    return s.ok() ? absl::UnavailableError(absl::StrCat("etcd at ", endpoint_, ": ", what, ": no answer"))
                  : FromGrpc(s, endpoint_, what);
  if (resp.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd at ", endpoint_, ": lease ", lease, " has expired"));
  }
  return absl::OkStatus();
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  pb::LeaseRevokeRequest req;
  req.set_id(lease);
  pb::LeaseRevokeResponse resp;
  return FromGrpc(
      Retrying(timeout_, [&](grpc::ClientContext* ctx) { return stubs_->lease->LeaseRevoke(ctx, req, &resp); }),
      endpoint_, absl::StrCat("revoke lease ", lease));
}

absl::StatusOr<std::unique_ptr<EtcdWatch>> EtcdClient::WatchPrefix(const std::string& prefix, int64_t start_revision,
                                                                   EventsFn on_events, EndFn on_end) {
  auto ctx = std::make_unique<grpc::ClientContext>();  // no deadline: a watch lasts
  ctx->set_wait_for_ready(true);
  auto stream = stubs_->watch->Watch(ctx.get());
  pb::WatchRequest req;
  pb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(prefix);
  create->set_range_end(PrefixEnd(prefix));
  create->set_start_revision(start_revision);
  pb::WatchResponse created;
  // The server confirms the watch before any event; bounded by the timeout.
  std::atomic<bool> confirmed{false};
  std::thread guard([&, deadline = absl::Now() + timeout_] {
    while (!confirmed.load() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    if (!confirmed.load()) ctx->TryCancel();
  });
  const bool ok = stream->Write(req) && stream->Read(&created);
  confirmed = true;
  guard.join();
  if (!ok || !created.created() || created.canceled()) {
    const grpc::Status s = stream->Finish();
    if (!s.ok()) return FromGrpc(s, endpoint_, absl::StrCat("watch '", prefix, "*'"));
    return absl::UnavailableError(absl::StrCat("etcd at ", endpoint_, " did not start the watch of '", prefix, "*'",
                                               created.cancel_reason().empty() ? "" : ": " + created.cancel_reason()));
  }
  return std::unique_ptr<EtcdWatch>(
      new GrpcWatch(std::move(ctx), std::move(stream), endpoint_, std::move(on_events), std::move(on_end)));
}

}  // namespace oar::elastic
