#include "common/rpc/stream/stream_client.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/rpc/rpc_common.h"
#include "common/rpc/stream/client_conn.h"
#include "common/rpc/stream/frame_io.h"
#include "common/rpc/stream/lent_sends.h"
#include "common/rpc/stream/shm_stream.h"
#include "common/rpc/stream/tcp_stream.h"
#include "common/rpc/stream/tls_stream.h"
#include "common/rpc/stream/wire.h"
#include "glog/logging.h"

namespace oar::rpc::stream {

struct StreamClient::Slot {
  absl::Mutex mu;  // one connect at a time per route
  std::shared_ptr<ClientConn> conn ABSL_GUARDED_BY(mu);
};

StreamClient::StreamClient(const RpcOptions& options) : options_(options) {
  sweeper_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(kSweep)) {
      std::vector<std::shared_ptr<Slot>> slots;
      {
        absl::MutexLock l(&mu_);
        for (auto& [key, slot] : slots_) slots.push_back(slot);
      }
      const absl::Time now = absl::Now();
      for (auto& slot : slots) {
        std::shared_ptr<ClientConn> conn;
        {
          absl::MutexLock sl(&slot->mu);
          conn = slot->conn;
        }
        if (conn != nullptr) conn->Sweep(now);
      }
      debts_->PayAll();  // a request whose caller never waited: woken within a sweep
    }
  });
}

StreamClient::~StreamClient() {
  stop_.Notify();
  sweeper_.join();
  std::list<std::shared_ptr<ClientConn>> all;
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

absl::StatusOr<std::shared_ptr<ClientConn>> StreamClient::Get(const Route& route, absl::Time deadline) {
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
    std::list<std::shared_ptr<ClientConn>> done;
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
    if (options_.tls_ca.empty()) {
      OAR_ASSIGN_OR_RETURN(
          s, TcpStream::Connect(route.address.substr(0, colon), port, deadline, options_.socket_buffer_bytes));
    } else {
      OAR_ASSIGN_OR_RETURN(std::string ca, ReadTlsFile("rpc_tls_ca", options_.tls_ca));
      OAR_ASSIGN_OR_RETURN(s, TlsStream::Connect(route.address.substr(0, colon), port, ca, deadline));
    }
  } else {
    const ShmOptions shm{.ring_bytes = static_cast<uint64_t>(options_.shm_ring_bytes),
                         .spin_us = options_.shm_spin_us,
                         .batch_wakeups = options_.shm_batch_wakeups > 0};
    OAR_ASSIGN_OR_RETURN(s, ShmStream::Connect(route.address, absl::StrCat("shm ", route.endpoint), deadline, shm));
  }
  std::shared_ptr<LentSends> lent = route.kind == Route::kShm ? LentMemory() : nullptr;
  bool server_maps = false;
  absl::Status st = ClientHandshake(s.get(), options_.auth_token, deadline, lent ? &lent->region() : nullptr,
                                    &server_maps, options_.shm_lend_params);
  if (!st.ok()) return Annotate(st, absl::StrCat("connecting to ", route.endpoint, " over ", route.Key()));
  auto conn =
      std::make_shared<ClientConn>(std::move(s), absl::StrCat(route.endpoint, " over ", route.Key()), debts_,
                                   server_maps ? std::move(lent) : nullptr, absl::Milliseconds(options_.deadline_ms));
  conn->Start();
  slot->conn = conn;
  return conn;
}

std::shared_ptr<LentSends> StreamClient::LentMemory() {
  absl::MutexLock l(&lent_mu_);
  if (lent_tried_ || !options_.shm_lend_sends || options_.shm_send_region_bytes <= 0) return lent_;
  lent_tried_ = true;
  absl::StatusOr<std::shared_ptr<LentSends>> made =
      LentSends::Create(static_cast<size_t>(options_.shm_send_region_bytes));
  if (made.ok()) {
    lent_ = *std::move(made);
  } else {
    LOG(WARNING) << "sends over shm are copied through the ring: " << made.status();
  }
  return lent_;
}

absl::Status StreamClient::Connect(const Route& route, absl::Time deadline) { return Get(route, deadline).status(); }

absl::Status StreamClient::Call(RpcKind kind, const Route& route, std::shared_ptr<const OutgoingMessage> request,
                                absl::Time deadline, CallDone&& done, std::unique_ptr<ReplyReader>* reader) {
  OAR_ASSIGN_OR_RETURN(std::shared_ptr<ClientConn> conn, Get(route, deadline));
  auto r = conn->Call(kind, std::move(request), deadline, std::move(done), /*claim=*/reader != nullptr);
  if (reader != nullptr) *reader = std::move(r);
  return absl::OkStatus();
}

}  // namespace oar::rpc::stream
