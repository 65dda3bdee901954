#include "common/rpc/stream/wake_debts.h"

#include <utility>

#include "common/rpc/stream/client_conn.h"

namespace oar::rpc::stream {

void WakeDebts::Owe(std::weak_ptr<ClientConn> conn) {
  absl::MutexLock l(&mu_);
  for (const auto& w : owed_) {
    if (!w.owner_before(conn) && !conn.owner_before(w)) return;  // owed already
  }
  owed_.push_back(std::move(conn));
  any_.store(true, std::memory_order_release);
}

void WakeDebts::PayAll() {
  if (!any_.load(std::memory_order_acquire)) return;
  std::vector<std::weak_ptr<ClientConn>> owed;
  {
    absl::MutexLock l(&mu_);
    owed.swap(owed_);
    any_.store(false, std::memory_order_release);
  }
  for (const auto& weak : owed) {
    if (std::shared_ptr<ClientConn> conn = weak.lock()) conn->Flush();
  }
}

}  // namespace oar::rpc::stream
