#include "common/rpc/stream/client_conn.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/wire.h"

namespace oar::rpc::stream {
namespace {

// Whether a reply with header `h` may be read straight into `t`.
bool Fits(const Tensor& t, const MessageHeader& h, const std::string& requested) {
  return h.kind == PayloadKind::kTensor && (h.name().empty() || h.name() == requested) && t.initialized() &&
         !t.BufferShared() && t.Writable() && t.dtype() == h.dtype && t.nbytes() == h.payload_bytes &&
         t.place() == Place{};
}

}  // namespace

class ClientConn::Reader final : public ReplyReader {
 public:
  Reader(std::shared_ptr<ClientConn> conn, uint64_t id) : conn_(std::move(conn)), id_(id) {}
  ~Reader() override { conn_->Unclaim(id_); }
  void Await(absl::Time until) override { conn_->Await(id_, until); }

 private:
  std::shared_ptr<ClientConn> conn_;
  uint64_t id_;
};

ClientConn::ClientConn(std::unique_ptr<ByteStream> stream, std::string name, std::shared_ptr<WakeDebts> debts,
                       std::shared_ptr<LentSends> lent, absl::Duration io_timeout)
    : io_timeout_(io_timeout),
      stream_(std::move(stream)),
      name_(std::move(name)),
      debts_(std::move(debts)),
      lent_(std::move(lent)),
      can_hand_over_(stream_->CanWaitReadable()),
      defers_(debts_ != nullptr && stream_->DefersWakeups()) {}

ClientConn::~ClientConn() {
  if (reader_.joinable()) reader_.detach();  // only when dropped without Join (never, see StreamClient)
}

void ClientConn::Start() {
  reader_ = std::thread([this] {
    ReaderLoop();
    finished_ = true;
  });
}

void ClientConn::Join() {
  if (reader_.joinable()) reader_.join();
}

bool ClientConn::broken() {
  absl::MutexLock l(&mu_);
  return broken_;
}

std::unique_ptr<ReplyReader> ClientConn::Call(RpcKind kind, std::shared_ptr<const OutgoingMessage> request,
                                              absl::Time deadline, CallDone done, bool claim) {
  claim = claim && can_hand_over_;
  uint64_t id = 0;
  std::string why;
  {
    absl::MutexLock l(&mu_);
    if (broken_) {
      why = why_;
    } else {
      id = next_id_++;
      pending_[id] = Pending{.done = std::move(done),
                             .deadline = deadline,
                             .var = request->header.name(),
                             .into = request->reply_into,
                             .claimed = claim,
                             .may_view = request->reply_may_view};
      if (!claim) ++unclaimed_;
    }
  }
  if (id == 0) {
    done(absl::UnavailableError(why), nullptr);
    return nullptr;
  }
  const std::string& var = request->header.name();
  const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
  const uint32_t timeout_ms =
      deadline == absl::InfiniteFuture() ? 0 : static_cast<uint32_t>(std::clamp<int64_t>(left, 1, UINT32_MAX));
  // A call its caller will wait for may leave the server asleep: the wait
  // (Await, on whichever connection) wakes it, after the caller's other
  // requests, so a burst costs the server one wake-up.
  const bool more = claim && defers_;
  // A payload the caller lets us lend: copied into its slot of our lent
  // memory (as it would be into the ring) and sent as where it lies there.
  Variable in_slot;
  if (lent_ != nullptr && request->lend_payload && request->header.kind == PayloadKind::kTensor &&
      request->var.IsType<Tensor>()) {
    std::optional<Tensor> t =
        lent_->CopyIn(absl::StrCat(name_, "|", request->header.trainer_id(), "|", var), request->var.Get<Tensor>());
    if (t.has_value()) *in_slot.GetMutable<Tensor>() = *std::move(t);
  }
  const bool lending = in_slot.IsInitialized();
  absl::Status st;
  {
    absl::MutexLock l(&write_mu_);
    st = WriteMessage(stream_.get(), FrameType::kRequest, static_cast<uint8_t>(kind), id, timeout_ms, request->header,
                      lending ? &in_slot : &request->var, deadline, more, lending ? &lent_->region() : nullptr);
  }
  if (!st.ok()) Break(absl::UnavailableError(absl::StrCat(name_, ": sending '", var, "' failed: ", st.message())));
  if (st.ok() && more) debts_->Owe(weak_from_this());
  if (!claim) return nullptr;
  return std::make_unique<Reader>(shared_from_this(), id);
}

void ClientConn::Sweep(absl::Time now) {
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
  if (!can_hand_over_) return;
  // Nobody reads: look (holding the turn, briefly) whether something came —
  // a claimed call's reply before its caller waits, or the peer's hang-up.
  {
    absl::MutexLock l(&mu_);
    if (broken_ || reading_ || waiters_ > 0 || kick_) return;
    reading_ = true;
  }
  const bool readable = stream_->Readable();
  absl::MutexLock l(&mu_);
  reading_ = false;
  if (readable) kick_ = true;
}

void ClientConn::Break(const absl::Status& why) {
  std::vector<Pending> failed;
  {
    absl::MutexLock l(&mu_);
    if (broken_) return;
    broken_ = true;
    why_ = std::string(why.message());
    // A call whose reply is being read into its caller's tensor is the
    // reading thread's to end: its read fails once the stream is closed.
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.receiving) {
        ++it;
      } else {
        failed.push_back(Take(it++));
      }
    }
  }
  stream_->Close();
  for (Pending& p : failed) p.done(why, nullptr);
}

ClientConn::Pending ClientConn::Take(PendingMap::iterator it) {
  if (!it->second.claimed) --unclaimed_;
  Pending p = std::move(it->second);
  pending_.erase(it);
  return p;
}

void ClientConn::Finish(uint64_t id, absl::Status status, std::unique_ptr<IncomingMessage> reply) {
  Pending p;
  {
    absl::MutexLock l(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;  // already ended (its deadline, or the connection broke)
    p = Take(it);
  }
  p.done(std::move(status), std::move(reply));
}

void ClientConn::Unclaim(uint64_t id) {
  absl::MutexLock l(&mu_);
  auto it = pending_.find(id);
  if (it == pending_.end() || !it->second.claimed) return;
  it->second.claimed = false;
  ++unclaimed_;
}

bool ClientConn::ReadFrame(absl::Time header_deadline) {
  const std::string& peer = stream_->peer();
  FrameHeader f;
  absl::Status st = stream_->Read(&f, sizeof(f), header_deadline);
  if (st.ok()) st = CheckFrame(f, /*expect_request=*/false, peer);
  const absl::Time io_deadline = IoDeadline(io_timeout_);
  if (st.ok() && f.type == FrameType::kError) {
    absl::Status error;
    st = ReadError(stream_.get(), f, &error, io_deadline);
    if (st.ok()) {
      Finish(f.call_id, error, nullptr);
      return true;
    }
  }
  if (!st.ok()) {
    Break(absl::UnavailableError(absl::StrCat(name_, ": ", st.message())));
    return false;
  }
  auto admit = [&](const MessageHeader& h) -> absl::StatusOr<Destination> {
    absl::MutexLock l(&mu_);
    auto it = pending_.find(f.call_id);
    if (it == pending_.end()) return absl::CancelledError("nobody waits for it");
    Pending& p = it->second;
    Destination to;
    to.view = p.may_view;
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
    return false;
  }
  if (r.message.ok()) {
    Finish(f.call_id, absl::OkStatus(), *std::move(r.message));
  } else if (!absl::IsCancelled(r.message.status())) {
    Finish(f.call_id, Annotate(r.message.status(), "the reply"), nullptr);
  }
  return true;
}

bool ClientConn::ReaderMayRead() const {
  return broken_ || (!reading_ && waiters_ == 0 && (unclaimed_ > 0 || kick_ || !can_hand_over_));
}

void ClientConn::ReaderLoop() {
  mu_.Lock();
  while (true) {
    mu_.Await(absl::Condition(this, &ClientConn::ReaderMayRead));
    if (broken_) break;
    // For a call nobody will wait for, sleep in the read itself; for bytes
    // the sweep saw, read what is there.
    const bool block = unclaimed_ > 0 || !can_hand_over_;
    kick_ = false;
    reading_ = true;
    mu_.Unlock();
    bool go_on = true, read = false;
    if (block || stream_->Readable()) {
      go_on = ReadFrame(block ? absl::InfiniteFuture() : IoDeadline(io_timeout_));
      read = true;
    }
    mu_.Lock();
    reading_ = false;
    if (!go_on) break;
    if (read && !block) kick_ = true;  // more may have come with it
  }
  mu_.Unlock();
}

void ClientConn::Await(uint64_t id, absl::Time until) {
  struct Ended {
    ClientConn* conn;
    uint64_t id;
    bool operator()() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(conn->mu_) {
      return conn->broken_ || !conn->reading_ || conn->pending_.count(id) == 0;
    }
  } turn_free_or_ended{this, id};
  if (debts_ != nullptr) debts_->PayAll();  // every server this caller left asleep, before it sleeps
  mu_.Lock();
  ++waiters_;
  while (!broken_ && pending_.count(id) > 0 && absl::Now() < until) {
    if (reading_) {  // another thread reads: it may read our reply, or hand the turn over
      mu_.AwaitWithDeadline(absl::Condition(&turn_free_or_ended), until);
      continue;
    }
    reading_ = true;
    mu_.Unlock();
    const absl::Status ready = stream_->WaitReadable(until);
    bool go_on = true;
    if (ready.ok()) {
      go_on = ReadFrame(IoDeadline(io_timeout_));
    } else if (!absl::IsDeadlineExceeded(ready)) {
      Break(absl::UnavailableError(absl::StrCat(name_, ": ", ready.message())));
      go_on = false;
    }
    mu_.Lock();
    reading_ = false;
    if (!go_on) break;
  }
  --waiters_;
  mu_.Unlock();
}

}  // namespace oar::rpc::stream
