#include "common/rpc/stream/server_conn.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/wire.h"
#include "glog/logging.h"

namespace oar::rpc::stream {
namespace {

absl::StatusOr<MessageHeader> ReplyHeader(const Reply& reply) {
  sendrecv::VariableMessage meta;
  meta.set_varname(reply.name);
  meta.set_oar_step(reply.step);
  return HeaderOf(std::move(meta), reply.var.IsInitialized() ? &reply.var : nullptr);
}

}  // namespace

ServerConn::ServerConn(const ServerContext* ctx, std::unique_ptr<ByteStream> stream)
    : ctx_(ctx), stream_(std::move(stream)) {}

ServerConn::~ServerConn() {
  Close();
  if (reader_.joinable()) reader_.detach();  // only if never joined: the server joins before dropping
}

void ServerConn::Start() {
  reader_ = std::thread([self = shared_from_this()] {
    self->reader_id_.store(std::this_thread::get_id());
    self->ReadLoop();
    self->reader_id_.store(std::thread::id{});
    self->stream_->Close();
    self->finished_ = true;
  });
}

void ServerConn::Close() {
  closing_ = true;
  stream_->Close();
}

void ServerConn::Join() {
  if (reader_.joinable()) reader_.join();
}

bool ServerConn::EnterGate(absl::Time deadline) {
  auto started = std::make_shared<absl::Notification>();
  ctx_->gate->Enter(this, [started] { started->Notify(); });
  while (!started->WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    if (closing_ || absl::Now() > deadline) {
      if (ctx_->gate->Cancel(this)) return false;
      started->WaitForNotification();  // it started meanwhile: the slot is ours
      return true;
    }
  }
  return true;
}

void ServerConn::ReadLoop() {
  absl::Status st = stream_->Open(IoDeadline(ctx_->io_timeout));  // TLS: its handshake
  if (st.ok()) {
    st = ServerHandshake(stream_.get(), ctx_->token, IoDeadline(ctx_->io_timeout), ctx_->region, &lent_,
                         ctx_->map_client_regions);
  }
  if (!st.ok()) {
    if (!closing_) LOG(WARNING) << ctx_->endpoint << ": refused a connection: " << st;
    return;
  }
  const std::string& peer = stream_->peer();
  while (!closing_) {
    FrameHeader f;
    st = stream_->Read(&f, sizeof(f), absl::InfiniteFuture());
    if (!st.ok()) {
      VLOG(1) << ctx_->endpoint << ": connection ends: " << st;
      return;
    }
    st = CheckFrame(f, /*expect_request=*/true, peer);
    if (!st.ok()) {
      LOG(WARNING) << ctx_->endpoint << ": dropping the connection: " << st;
      return;
    }
    const RpcKind kind = static_cast<RpcKind>(f.kind);
    const absl::Time deadline =
        f.timeout_ms > 0 ? absl::Now() + absl::Milliseconds(f.timeout_ms) : absl::InfiniteFuture();
    bool holds_slot = false;
    auto admit = [&](const MessageHeader& h) -> absl::StatusOr<Destination> {
      const uint64_t bytes = f.meta_len + h.payload_bytes;
      if (ctx_->max_request > 0 && bytes > ctx_->max_request) {
        return absl::ResourceExhaustedError(absl::StrCat(
            ctx_->endpoint, ": the request for '", h.name(), "' from ", peer, " has ", bytes,
            " bytes, more than this server accepts (", ctx_->max_request, "; FLAGS_rpc_max_message_bytes)"));
      }
      // The gate bounds the bytes held read; a payload left in the client's
      // lent memory holds none here.
      const bool in_region = (f.flags & FrameHeader::kInRegion) != 0;
      if (kind == RpcKind::kSend && !in_region && bytes >= ReadGate::kSmallRequestBytes) {
        if (!EnterGate(deadline)) {
          return absl::DeadlineExceededError(
              absl::StrCat(ctx_->endpoint, ": '", h.name(), "' waited past its deadline to be read"));
        }
        holds_slot = true;
      }
      // A pooled buffer; a payload in the client's lent region is read there.
      return Destination{.view = true};
    };
    ReadResult r = ReadMessage(stream_.get(), f, admit, pool_, IoDeadline(ctx_->io_timeout));
    if (!r.stream.ok()) {
      if (holds_slot) ctx_->gate->Leave();
      if (!closing_) LOG(WARNING) << ctx_->endpoint << ": connection from " << peer << " broke: " << r.stream;
      return;
    }
    if (!r.message.ok()) {
      Answer(f.call_id, r.message.status(), nullptr);
      continue;
    }
    std::shared_ptr<IncomingMessage> request = *std::move(r.message);
    ctx_->in_flight.fetch_add(1);  // until Serve (or the deferred answer) has answered it
    if (ctx_->handler->Defers(kind) && TryDefer(kind, f.call_id, request, holds_slot)) continue;
    if (ctx_->handler->NeverBlocks(kind)) {
      Serve(kind, f.call_id, deadline, std::move(request), holds_slot);
      continue;
    }
    auto self = shared_from_this();
    const uint64_t id = f.call_id;
    if (!ctx_->pools->TrySchedule(kind, [self, kind, id, deadline, request, holds_slot]() mutable {
          self->Serve(kind, id, deadline, std::move(request), holds_slot);
        })) {
      if (holds_slot) ctx_->gate->Leave();
      ctx_->in_flight.fetch_sub(1);
      Answer(id,
             absl::ResourceExhaustedError(absl::StrCat(ctx_->endpoint, ": ", ctx_->pools->max_queued(), " ",
                                                       KindName(kind),
                                                       " requests are already waiting "
                                                       "(FLAGS_rpc_max_queued_requests); retry later")),
             nullptr);
    }
  }
}

bool ServerConn::TryDefer(RpcKind kind, uint64_t call_id, const std::shared_ptr<IncomingMessage>& request,
                          bool holds_slot) {
  return ctx_->handler->TryHandleDeferred(
      kind, request, [self = shared_from_this(), kind, call_id, holds_slot](absl::Status s, Reply reply) {
        if (holds_slot) self->ctx_->gate->Leave();
        const Reply* r = s.ok() ? &reply : nullptr;
        // Answered at once on the reader thread: written there, as Serve
        // writes. Answered later by another thread, which must not wait on
        // this peer: written now if the stream has room, else queued.
        if (std::this_thread::get_id() == self->reader_id_.load()) {
          self->Answer(call_id, s, r);
        } else if (!self->TryAnswerNow(call_id, s, r)) {
          self->AnswerLater(kind, call_id, std::move(s), std::move(reply));  // counts it out when written
          return;
        }
        self->ctx_->in_flight.fetch_sub(1);
      });
}

void ServerConn::AnswerLater(RpcKind kind, uint64_t call_id, absl::Status s, Reply reply) {
  {
    absl::MutexLock l(&queue_mu_);
    queued_.push_back({call_id, std::move(s), std::move(reply)});
    if (draining_) return;  // the task under way writes it too
    draining_ = true;
  }
  if (ctx_->pools->TrySchedule(kind, [self = shared_from_this()] { self->DrainAnswers(); })) return;
  // No pool thread will take it (the server stops, or the queue is full),
  // and this thread must not wait on the peer: the connection ends (its
  // calls fail UNAVAILABLE, and the client retries them).
  LOG(WARNING) << ctx_->endpoint << ": no thread is free to answer " << stream_->peer() << "; closing the connection";
  Close();
  DrainAnswers();  // the stream is closed: this only counts them out
}

void ServerConn::DrainAnswers() {
  while (true) {
    Queued q;
    {
      absl::MutexLock l(&queue_mu_);
      if (queued_.empty()) {
        draining_ = false;
        return;
      }
      q = std::move(queued_.front());
      queued_.pop_front();
    }
    Answer(q.call_id, q.status, q.status.ok() ? &q.reply : nullptr);
    ctx_->in_flight.fetch_sub(1);
  }
}

void ServerConn::Serve(RpcKind kind, uint64_t call_id, absl::Time deadline, std::shared_ptr<IncomingMessage> request,
                       bool holds_slot) {
  Reply reply;
  absl::Status s;
  if (absl::Now() > deadline) {
    s = absl::DeadlineExceededError(
        absl::StrCat(ctx_->endpoint, ": '", request->header().name(), "' waited past its deadline for a handler"));
  } else {
    s = ctx_->handler->Handle(kind, *request, &reply);
  }
  request.reset();  // its buffer goes back to the pool (unless the handler kept it) before the reply is written
  if (holds_slot) ctx_->gate->Leave();
  Answer(call_id, s, s.ok() ? &reply : nullptr);
  ctx_->in_flight.fetch_sub(1);
}

void ServerConn::Answer(uint64_t call_id, const absl::Status& s, const Reply* reply) {
  absl::MutexLock l(&write_mu_);
  WriteAnswerLocked(call_id, s, reply, /*only_if_room=*/false);
}

bool ServerConn::TryAnswerNow(uint64_t call_id, const absl::Status& s, const Reply* reply) {
  if (!write_mu_.TryLock()) return false;
  const bool written = WriteAnswerLocked(call_id, s, reply, /*only_if_room=*/true);
  write_mu_.Unlock();
  return written;
}

bool ServerConn::InRegion(const Reply& reply) const {
  if (!lent_ || !reply.stable || ctx_->region == nullptr || !reply.var.IsType<Tensor>()) return false;
  const Tensor& t = reply.var.Get<Tensor>();
  return t.initialized() && ctx_->region->OffsetOf(t.raw_data(), t.nbytes()) >= 0;
}

bool ServerConn::WriteAnswerLocked(uint64_t call_id, const absl::Status& s, const Reply* reply, bool only_if_room) {
  if (closing_) return true;
  // Not OK: an error frame carrying `s` (or why the reply has no header).
  const absl::StatusOr<MessageHeader> header = s.ok() ? ReplyHeader(*reply) : absl::StatusOr<MessageHeader>(s);
  if (only_if_room) {
    constexpr size_t kSlack = 64;  // the tags and lengths around what is counted
    // A payload in the lent region travels as its 8-byte offset.
    const uint64_t payload = header.ok() && InRegion(*reply) ? sizeof(uint64_t)
                             : header.ok()                   ? header->payload_bytes
                                                             : 0;
    const size_t bytes = sizeof(FrameHeader) + kSlack +
                         (header.ok() ? header->meta.ByteSizeLong() + payload + header->rows.size() * sizeof(int64_t)
                                      : header.status().message().size());
    if (!stream_->WritableNow(bytes)) return false;
  }
  // The reader thread with the next request already in: the client is
  // woken after the last reply of the burst (or by the reader's own next
  // wait), not once per reply. Only where wake-ups are batched: elsewhere
  // (TCP) asking whether more is in would cost a system call per reply.
  const bool more = stream_->DefersWakeups() && std::this_thread::get_id() == reader_id_.load() && stream_->Readable();
  const absl::Status w =
      header.ok() ? WriteMessage(stream_.get(), FrameType::kReply, 0, call_id, 0, *header, &reply->var,
                                 IoDeadline(ctx_->io_timeout), more, lent_ && reply->stable ? ctx_->region : nullptr)
                  : WriteError(stream_.get(), call_id, header.status(), IoDeadline(ctx_->io_timeout));
  if (!w.ok()) {
    LOG(WARNING) << ctx_->endpoint << ": cannot answer " << stream_->peer() << ": " << w;
    stream_->Close();  // a half-written frame: the connection cannot go on
  }
  return true;
}

}  // namespace oar::rpc::stream
