// EtcdClient's watches: a gRPC bidirectional stream per watch, read on a
// thread of its own that hands each batch of events to the callback.
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status.h"
#include "common/elastic/etcd_grpc.h"

namespace oar::elastic {
namespace {

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
