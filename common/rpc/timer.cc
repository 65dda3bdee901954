#include "common/rpc/timer.h"

namespace oar::rpc {

Timer::Timer() : thread_([this] { Loop(); }) {}

Timer::~Timer() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

uint64_t Timer::At(absl::Time when, std::function<void()> fn) {
  absl::MutexLock l(&mu_);
  const uint64_t id = next_id_++;
  due_.emplace(std::make_pair(when, id), std::move(fn));
  when_[id] = when;
  return id;
}

void Timer::Cancel(uint64_t id) {
  std::function<void()> dropped;  // destroyed outside the lock
  absl::MutexLock l(&mu_);
  auto it = when_.find(id);
  if (it == when_.end()) return;
  auto d = due_.find(std::make_pair(it->second, id));
  dropped = std::move(d->second);
  due_.erase(d);
  when_.erase(it);
}

void Timer::Loop() {
  absl::MutexLock l(&mu_);
  while (!stopping_) {
    const absl::Time next = due_.empty() ? absl::InfiniteFuture() : due_.begin()->first.first;
    if (next > absl::Now()) {
      // Wake for the earliest closure, a new earlier one, or stopping.
      struct Changed {
        Timer* t;
        absl::Time next;
      } c{this, next};
      mu_.AwaitWithDeadline(absl::Condition(
                                +[](Changed* c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                  return c->t->stopping_ ||
                                         (!c->t->due_.empty() && c->t->due_.begin()->first.first < c->next);
                                },
                                &c),
                            next);
      continue;
    }
    std::function<void()> fn = std::move(due_.begin()->second);
    when_.erase(due_.begin()->first.second);
    due_.erase(due_.begin());
    mu_.Unlock();
    fn();
    mu_.Lock();
  }
}

}  // namespace oar::rpc
