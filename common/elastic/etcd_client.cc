#include "common/elastic/etcd_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status.h"
#include "common/elastic/etcd_grpc.h"
#include "grpcpp/grpcpp.h"

namespace oar::elastic {

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

absl::StatusOr<std::optional<std::string>> EtcdClient::CreateUnless(const std::string& key, const std::string& unless,
                                                                    const std::string& value, int64_t lease,
                                                                    const std::string& record) {
  pb::TxnRequest req;
  for (const std::string& absent : {key, unless}) {
    pb::Compare* c = req.add_compare();
    c->set_key(absent);
    c->set_result(pb::Compare::EQUAL);
    c->set_target(pb::Compare::CREATE);
    c->set_create_revision(0);
  }
  pb::PutRequest* put = req.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  pb::PutRequest* rec = req.add_success()->mutable_request_put();
  rec->set_key(record);
  rec->set_value(value);
  rec->set_prev_kv(true);
  pb::TxnResponse resp;
  bool again = false;
  const grpc::Status s = Retrying(
      timeout_, [&](grpc::ClientContext* ctx) { return stubs_->kv->Txn(ctx, req, &resp); }, &again);
  if (!s.ok()) return FromGrpc(s, endpoint_, absl::StrCat("create '", key, "' unless '", unless, "'"));
  if (resp.succeeded() && resp.responses_size() == 2) {
    return std::optional<std::string>(resp.responses(1).response_put().prev_kv().value());
  }
  if (again) {  // the first try's, cut off before its answer?
    OAR_ASSIGN_OR_RETURN(const bool held, Holds(key, value, lease));
    if (held) return std::optional<std::string>(std::string());
  }
  return std::optional<std::string>();
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

}  // namespace oar::elastic
