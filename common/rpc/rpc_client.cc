#include "common/rpc/rpc_client.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/executor.h"
#include "common/status.h"
#include "glog/logging.h"

namespace oar::rpc {
namespace {

bool Retryable(const absl::Status& s) {
  return s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kDeadlineExceeded;
}

// One RPC with its retries; an attempt runs on gRPC's callback threads, the
// retry decision happens in Wait.
class Call : public RpcCall, public std::enable_shared_from_this<Call> {
 public:
  Call(std::shared_ptr<grpc::Channel> channel, RpcKind kind, std::string ep, std::string name,
       grpc::ByteBuffer request, Variable* out, const ClientOptions& o)
      : channel_(std::move(channel)), kind_(kind), ep_(std::move(ep)), name_(std::move(name)),
        request_(std::move(request)), out_(out), options_(o) {}

  void StartAttempt() {
    {
      absl::MutexLock l(&mu_);
      done_ = false;
      ctx_ = std::make_unique<grpc::ClientContext>();
      response_.Clear();
    }
    ctx_->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(options_.deadline_ms));
    if (!options_.auth_token.empty()) ctx_->AddMetadata(kAuthMetadataKey, options_.auth_token);
    grpc::GenericStub stub(channel_);
    auto self = shared_from_this();  // alive until the callback ran
    stub.UnaryCall(ctx_.get(), MethodPath(kind_), grpc::StubOptions(), &request_, &response_,
                   [self](grpc::Status s) {
                     absl::MutexLock l(&self->mu_);
                     self->status_ = FromGrpc(s);
                     self->done_ = true;
                   });
  }

  absl::Status Wait() override {
    int backoff_ms = 50;
    for (int attempt = 0;; ++attempt) {
      absl::Status s;
      {
        absl::MutexLock l(&mu_);
        mu_.Await(absl::Condition(&done_));
        s = status_;
      }
      if (s.ok()) return Finish();
      if (!Retryable(s) || attempt >= options_.retry_times) {
        return absl::Status(s.code(), absl::StrCat(KindName(kind_), " '", name_, "' to pserver ", ep_, " failed",
                                                   attempt > 0 ? absl::StrCat(" after ", attempt + 1, " attempts") : "",
                                                   ": ", s.message()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
      backoff_ms = std::min(backoff_ms * 2, 2000);
      StartAttempt();
    }
  }

 private:
  absl::Status Finish() {
    if (out_ == nullptr) return absl::OkStatus();
    // Into the caller's variable, reusing its buffer (recv ops pull into the
    // same parameter every step).
    auto r = DeserializeVar(response_, [this](const sendrecv::VariableMessage&) { return std::move(*out_); });
    response_.Clear();
    if (!r.ok()) return Annotate(r.status(), absl::StrCat("reply to ", KindName(kind_), " '", name_, "' from ", ep_));
    if (!r->var.IsInitialized()) {
      return absl::NotFoundError(absl::StrCat(KindName(kind_), " '", name_, "' from ", ep_, ": the reply holds no value"));
    }
    *out_ = std::move(r->var);
    return absl::OkStatus();
  }

  std::shared_ptr<grpc::Channel> channel_;
  RpcKind kind_;
  std::string ep_, name_;
  grpc::ByteBuffer request_, response_;
  Variable* out_;
  ClientOptions options_;
  absl::Mutex mu_;
  bool done_ = false;
  absl::Status status_;
  std::unique_ptr<grpc::ClientContext> ctx_;
};

class FailedCall : public RpcCall {
 public:
  explicit FailedCall(absl::Status s) : s_(std::move(s)) {}
  absl::Status Wait() override { return s_; }

 private:
  absl::Status s_;
};

}  // namespace

ClientOptions ClientOptions::FromFlagsAndEnv() {
  ClientOptions o;
  o.auth_token = AuthTokenFromEnv();
  o.tls_ca = FLAGS_rpc_tls_ca;
  return o;
}

RpcClient::RpcClient(ClientOptions options) : options_(std::move(options)) {
  if (options_.deadline_ms <= 0) options_.deadline_ms = FLAGS_rpc_deadline;
  if (options_.retry_times < 0) options_.retry_times = FLAGS_rpc_retry_times;
}

RpcClient::~RpcClient() = default;

RpcClient* RpcClient::Global() {
  static RpcClient* client = [] {
    auto* c = new RpcClient();
    Executor::AddCloseHook([c] { return c->SendCompleteToAll(); });
    return c;
  }();
  return client;
}

std::shared_ptr<grpc::Channel> RpcClient::Channel(const std::string& ep) {
  absl::MutexLock l(&mu_);
  auto& ch = channels_[ep];
  if (ch == nullptr) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024);
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
    if (!options_.tls_ca.empty()) {
      auto ca = ReadTlsFile("rpc_tls_ca", options_.tls_ca);
      grpc::SslCredentialsOptions ssl;
      if (ca.ok()) ssl.pem_root_certs = *ca;
      creds = grpc::SslCredentials(ssl);
    }
    ch = grpc::CreateCustomChannel(ep, creds, args);
  }
  return ch;
}

std::shared_ptr<RpcCall> RpcClient::Start(RpcKind kind, const std::string& ep, const std::string& name,
                                          absl::StatusOr<grpc::ByteBuffer> request, Variable* out,
                                          int64_t trainer_id) {
  if (absl::Status s = CheckEndpoint(ep); !s.ok()) return std::make_shared<FailedCall>(s);
  {
    absl::MutexLock l(&mu_);
    contacted_[trainer_id].insert(ep);
  }
  if (!request.ok()) {
    return std::make_shared<FailedCall>(Annotate(request.status(), absl::StrCat(KindName(kind), " to ", ep)));
  }
  auto call = std::make_shared<Call>(Channel(ep), kind, ep, name, *std::move(request), out, options_);
  call->StartAttempt();
  return call;
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendVar(const std::string& ep, const std::string& name, const Variable* var,
                                                 const SendOptions& options) {
  return Start(RpcKind::kSend, ep, name, SerializeVar(name, var, options), nullptr, options.trainer_id);
}

std::shared_ptr<RpcCall> RpcClient::AsyncGetVar(const std::string& ep, const std::string& name, Variable* out,
                                                int64_t trainer_id, bool no_barrier) {
  SendOptions o;
  o.trainer_id = trainer_id;
  return Start(no_barrier ? RpcKind::kGetNoBarrier : RpcKind::kGet, ep, name, SerializeVar(name, nullptr, o), out,
               trainer_id);
}

std::shared_ptr<RpcCall> RpcClient::AsyncPrefetchVar(const std::string& ep, const std::string& name,
                                                     const Variable* ids, const std::string& table, Variable* out,
                                                     int64_t trainer_id) {
  SendOptions o;
  o.trainer_id = trainer_id;
  o.table_name = table;
  o.out_varname = name;
  return Start(RpcKind::kPrefetch, ep, name, SerializeVar(name, ids, o), out, trainer_id);
}

std::shared_ptr<RpcCall> RpcClient::AsyncSendBatchBarrier(const std::string& ep, int64_t trainer_id) {
  return AsyncSendVar(ep, kBatchBarrier, nullptr, {.trainer_id = trainer_id});
}
std::shared_ptr<RpcCall> RpcClient::AsyncSendFetchBarrier(const std::string& ep, int64_t trainer_id) {
  return AsyncSendVar(ep, kFetchBarrier, nullptr, {.trainer_id = trainer_id});
}
std::shared_ptr<RpcCall> RpcClient::AsyncSendComplete(const std::string& ep, int64_t trainer_id) {
  return AsyncSendVar(ep, kComplete, nullptr, {.trainer_id = trainer_id});
}

std::shared_ptr<RpcCall> RpcClient::AsyncCheckpointNotify(const std::string& ep, const std::string& dir,
                                                          int64_t trainer_id) {
  SendOptions o;
  o.trainer_id = trainer_id;
  o.out_varname = dir;
  return Start(RpcKind::kCheckpointNotify, ep, kCheckpointSave, SerializeVar(kCheckpointSave, nullptr, o), nullptr,
               trainer_id);
}

absl::Status RpcClient::WaitServerReady(const std::vector<std::string>& endpoints, int timeout_ms) {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<std::string> missing;
  for (const auto& ep : endpoints) {
    OAR_RETURN_IF_ERROR(CheckEndpoint(ep));
    if (!Channel(ep)->WaitForConnected(deadline)) missing.push_back(ep);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("pservers not reachable after ", timeout_ms, " ms: ",
                                                  absl::StrJoin(missing, ", ")));
}

void RpcClient::AddPending(int64_t trainer_id, std::shared_ptr<RpcCall> call) {
  absl::MutexLock l(&mu_);
  pending_[trainer_id].push_back(std::move(call));
}

absl::Status RpcClient::WaitPending(int64_t trainer_id) {
  std::vector<std::shared_ptr<RpcCall>> calls;
  {
    absl::MutexLock l(&mu_);
    auto it = pending_.find(trainer_id);
    if (it == pending_.end()) return absl::OkStatus();
    calls.swap(it->second);
  }
  absl::Status first;
  for (auto& c : calls) first.Update(c->Wait());
  return first;
}

absl::Status RpcClient::SendCompleteToAll(int64_t trainer_id) {
  std::vector<int64_t> waiting;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [id, calls] : pending_) {
      if (trainer_id < 0 || id == trainer_id) waiting.push_back(id);
    }
  }
  for (int64_t id : waiting) (void)WaitPending(id);  // their errors were the ops' to report
  std::map<int64_t, std::set<std::string>> todo;
  {
    absl::MutexLock l(&mu_);
    for (auto it = contacted_.begin(); it != contacted_.end();) {
      if (trainer_id < 0 || it->first == trainer_id) {
        todo.insert(contacted_.extract(it++));
      } else {
        ++it;
      }
    }
  }
  std::vector<std::shared_ptr<RpcCall>> calls;
  for (const auto& [id, eps] : todo) {
    for (const auto& ep : eps) calls.push_back(AsyncSendComplete(ep, id));
  }
  absl::Status first;
  for (auto& c : calls) {
    absl::Status s = c->Wait();
    // A pserver that is already gone has nothing left to wait for: this
    // trainer's work is done either way, so say so and go on.
    if (s.code() == absl::StatusCode::kUnavailable) {
      LOG(WARNING) << s.message();
      continue;
    }
    first.Update(s);
  }
  {
    absl::MutexLock l(&mu_);  // the COMPLETE calls themselves are no reason to send another
    for (const auto& [id, eps] : todo) contacted_.erase(id);
  }
  return first;
}

}  // namespace oar::rpc
