#include "common/rpc/read_gate.h"

#include <utility>

namespace oar::rpc {

void ReadGate::Enter(const void* key, std::function<void()> start) {
  {
    absl::MutexLock l(&mu_);
    if (slots_ > 0 && in_use_ >= slots_) {
      parked_.push_back({key, std::move(start)});
      return;
    }
    ++in_use_;
  }
  start();
}

void ReadGate::Leave() {
  std::function<void()> next;
  {
    absl::MutexLock l(&mu_);
    if (parked_.empty()) {
      --in_use_;
      return;
    }
    next = std::move(parked_.front().start);  // the slot passes straight to it
    parked_.pop_front();
  }
  next();
}

bool ReadGate::Cancel(const void* key) {
  absl::MutexLock l(&mu_);
  for (auto it = parked_.begin(); it != parked_.end(); ++it) {
    if (it->key == key) {
      parked_.erase(it);
      return true;
    }
  }
  return false;
}

int ReadGate::parked() const {
  absl::MutexLock l(&mu_);
  return static_cast<int>(parked_.size());
}

}  // namespace oar::rpc
