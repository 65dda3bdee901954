#include "common/rpc/stream/stream_client.h"

#include <atomic>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/shm_stream.h"
#include "common/rpc/stream/tcp_stream.h"
#include "common/rpc/stream/tls_stream.h"
#include "common/rpc/stream/wire.h"
#include "common/status.h"
#include "glog/logging.h"

namespace oar::rpc::stream {

// One connection: its stream, the calls waiting for replies, its reader.
class StreamClient::Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(std::unique_ptr<ByteStream> stream, const Route& route)
      : stream_(std::move(stream)), name_(absl::StrCat(route.endpoint, " over ", route.Key())) {}
  ~Conn() {
    if (reader_.joinable()) reader_.detach();  // only when dropped without Join (never, see StreamClient)
  }

  void Start() {
    reader_ = std::thread([this] {
      ReadLoop();
      finished_ = true;
    });
  }
  void Join() {
    if (reader_.joinable()) reader_.join();
  }
  bool finished() const { return finished_.load(); }
  bool broken() {
    absl::MutexLock l(&mu_);
    return broken_;
  }

  void Call(RpcKind kind, std::shared_ptr<const OutgoingMessage> request, absl::Time deadline, CallDone done) {
    uint64_t id = 0;
    std::string why;
    {
      absl::MutexLock l(&mu_);
      if (broken_) {
        why = why_;
      } else {
        id = next_id_++;
        pending_[id] = Pending{std::move(done), deadline, request->header.name(), request->reply_into};
      }
    }
    if (id == 0) {
      done(absl::UnavailableError(why), nullptr);
      return;
    }
    const std::string& var = request->header.name();
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    const uint32_t timeout_ms = deadline == absl::InfiniteFuture() ? 0 : static_cast<uint32_t>(std::clamp<int64_t>(left, 1, UINT32_MAX));
    absl::Status st;
    {
      absl::MutexLock l(&write_mu_);
      st = WriteMessage(stream_.get(), FrameType::kRequest, static_cast<uint8_t>(kind), id, timeout_ms,
                        request->header, &request->var, deadline);
    }
    if (!st.ok()) Break(absl::UnavailableError(absl::StrCat(name_, ": sending '", var, "' failed: ", st.message())));
  }

  // Ends the calls whose deadline passed (DEADLINE_EXCEEDED); a reply
  // that comes later is skipped.
  void Expire(absl::Time now) {
    std::vector<std::pair<uint64_t, std::string>> late;
    {
      absl::MutexLock l(&mu_);
      for (const auto& [id, p] : pending_) {
        // One being read into its caller's tensor ends when the read does
        // (by its deadline and a second): the caller must not see its
        // tensor before that.
        if (p.deadline <= now && !p.receiving) late.emplace_back(id, p.var);
      }
    }
    for (const auto& [id, var] : late) {
      Finish(id, absl::DeadlineExceededError(absl::StrCat(name_, ": no answer for '", var, "' by the deadline")),
             nullptr);
    }
  }

  // Fails every call in flight and closes the stream; later calls fail too.
  void Break(const absl::Status& why) {
    std::map<uint64_t, Pending> failed;
    {
      absl::MutexLock l(&mu_);
      if (broken_) return;
      broken_ = true;
      why_ = std::string(why.message());
      // A call whose reply is being read into its caller's tensor is the
      // reader's to end: its read fails once the stream is closed.
      for (auto it = pending_.begin(); it != pending_.end();) {
        if (it->second.receiving) {
          ++it;
        } else {
          failed.insert(pending_.extract(it++));
        }
      }
    }
    stream_->Close();
    for (auto& [id, p] : failed) p.done(why, nullptr);
  }

 private:
  struct Pending {
    CallDone done;
    absl::Time deadline;
    std::string var;
    Tensor* into = nullptr;  // OutgoingMessage::reply_into
    bool receiving = false;  // its reply's payload is being read into `into`
  };

  // Whether a reply with header `h` may be read straight into `t`.
  static bool Fits(const Tensor& t, const MessageHeader& h, const std::string& requested) {
    return h.kind == PayloadKind::kTensor && (h.name().empty() || h.name() == requested) && t.initialized() &&
           !t.BufferShared() && t.dtype() == h.dtype && t.nbytes() == h.payload_bytes && t.place() == Place{};
  }

  void Finish(uint64_t id, absl::Status status, std::unique_ptr<IncomingMessage> reply) {
    Pending p;
    {
      absl::MutexLock l(&mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) return;  // already ended (its deadline, or the connection broke)
      p = std::move(it->second);
      pending_.erase(it);
    }
    p.done(std::move(status), std::move(reply));
  }

  void ReadLoop() {
    const std::string& peer = stream_->peer();
    while (true) {
      FrameHeader f;
      absl::Status st = stream_->Read(&f, sizeof(f), absl::InfiniteFuture());
      if (st.ok()) st = CheckFrame(f, /*expect_request=*/false, peer);
      const absl::Time io_deadline = absl::Now() + absl::Milliseconds(FLAGS_rpc_deadline);
      if (st.ok() && f.type == FrameType::kError) {
        absl::Status error;
        st = ReadError(stream_.get(), f, &error, io_deadline);
        if (st.ok()) {
          Finish(f.call_id, error, nullptr);
          continue;
        }
      }
      if (!st.ok()) {
        Break(absl::UnavailableError(absl::StrCat(name_, ": ", st.message())));
        return;
      }
      auto admit = [&](const MessageHeader& h) -> absl::StatusOr<Destination> {
        absl::MutexLock l(&mu_);
        auto it = pending_.find(f.call_id);
        if (it == pending_.end()) return absl::CancelledError("nobody waits for it");
        Pending& p = it->second;
        Destination to;
        if (p.into != nullptr && h.payload_bytes > 0 && Fits(*p.into, h, p.var)) {
          p.receiving = true;
          to.tensor = p.into;
          to.deadline = p.deadline + absl::Seconds(1);
        }
        return to;
      };
      ReadResult r = ReadMessage(stream_.get(), f, admit, pool_, io_deadline);
      if (!r.stream.ok()) {
        const absl::Status lost = absl::UnavailableError(absl::StrCat(name_, ": ", r.stream.message()));
        Finish(f.call_id, lost, nullptr);  // first: Break leaves a call being read in place to this reader
        Break(lost);
        return;
      }
      if (r.message.ok()) {
        Finish(f.call_id, absl::OkStatus(), *std::move(r.message));
      } else if (!absl::IsCancelled(r.message.status())) {
        Finish(f.call_id, Annotate(r.message.status(), "the reply"), nullptr);
      }
    }
  }

  std::unique_ptr<ByteStream> stream_;
  const std::string name_;  // "127.0.0.1:6174 over tcp 127.0.0.1:41234"
  std::shared_ptr<BufferPool> pool_ = std::make_shared<BufferPool>();
  absl::Mutex write_mu_;
  absl::Mutex mu_;
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::string why_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
  std::atomic<bool> finished_{false};
};

struct StreamClient::Slot {
  absl::Mutex mu;  // one connect at a time per route
  std::shared_ptr<Conn> conn ABSL_GUARDED_BY(mu);
};

StreamClient::StreamClient(std::string auth_token, std::string tls_ca)
    : token_(std::move(auth_token)), tls_ca_(std::move(tls_ca)) {
  sweeper_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(kSweep)) {
      std::vector<std::shared_ptr<Slot>> slots;
      {
        absl::MutexLock l(&mu_);
        for (auto& [key, slot] : slots_) slots.push_back(slot);
      }
      const absl::Time now = absl::Now();
      for (auto& slot : slots) {
        std::shared_ptr<Conn> conn;
        {
          absl::MutexLock sl(&slot->mu);
          conn = slot->conn;
        }
        if (conn != nullptr) conn->Expire(now);
      }
    }
  });
}

StreamClient::~StreamClient() {
  stop_.Notify();
  sweeper_.join();
  std::list<std::shared_ptr<Conn>> all;
  std::map<std::string, std::shared_ptr<Slot>> slots;
  {
    absl::MutexLock l(&mu_);
    slots.swap(slots_);
    all.splice(all.end(), retired_);
  }
  for (auto& [key, slot] : slots) {  // a slot's lock is never taken under mu_
    absl::MutexLock sl(&slot->mu);
    if (slot->conn) all.push_back(std::move(slot->conn));
  }
  for (auto& c : all) c->Break(absl::CancelledError("the stream transport shut down"));
  for (auto& c : all) c->Join();
}

absl::StatusOr<std::shared_ptr<StreamClient::Conn>> StreamClient::Get(const Route& route, absl::Time deadline) {
  std::shared_ptr<Slot> slot;
  {
    absl::MutexLock l(&mu_);
    auto& s = slots_[route.Key()];
    if (s == nullptr) s = std::make_shared<Slot>();
    slot = s;
  }
  absl::MutexLock sl(&slot->mu);
  if (slot->conn != nullptr && !slot->conn->broken()) return slot->conn;
  if (slot->conn != nullptr) {
    std::list<std::shared_ptr<Conn>> done;
    {
      absl::MutexLock l(&mu_);
      retired_.push_back(std::move(slot->conn));
      for (auto it = retired_.begin(); it != retired_.end();) {
        if ((*it)->finished()) {
          done.push_back(*it);
          it = retired_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& c : done) c->Join();
  }
  std::unique_ptr<ByteStream> s;
  if (route.kind == Route::kTcp) {
    const size_t colon = route.address.rfind(':');
    int port = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(route.address.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError(absl::StrCat("bad stream address '", route.address, "'"));
    }
    if (tls_ca_.empty()) {
      OAR_ASSIGN_OR_RETURN(s, TcpStream::Connect(route.address.substr(0, colon), port, deadline));
    } else {
      OAR_ASSIGN_OR_RETURN(std::string ca, ReadTlsFile("rpc_tls_ca", tls_ca_));
      OAR_ASSIGN_OR_RETURN(s, TlsStream::Connect(route.address.substr(0, colon), port, ca, deadline));
    }
  } else {
    OAR_ASSIGN_OR_RETURN(s, ShmStream::Connect(route.address, absl::StrCat("shm ", route.endpoint), deadline));
  }
  absl::Status st = ClientHandshake(s.get(), token_, deadline);
  if (!st.ok()) return Annotate(st, absl::StrCat("connecting to ", route.endpoint, " over ", route.Key()));
  auto conn = std::make_shared<Conn>(std::move(s), route);
  conn->Start();
  slot->conn = conn;
  return conn;
}

absl::Status StreamClient::Connect(const Route& route, absl::Time deadline) { return Get(route, deadline).status(); }

absl::Status StreamClient::Call(RpcKind kind, const Route& route, std::shared_ptr<const OutgoingMessage> request,
                                absl::Time deadline, CallDone&& done) {
  OAR_ASSIGN_OR_RETURN(std::shared_ptr<Conn> conn, Get(route, deadline));
  conn->Call(kind, std::move(request), deadline, std::move(done));
  return absl::OkStatus();
}

}  // namespace oar::rpc::stream
