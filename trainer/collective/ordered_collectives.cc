#include "trainer/collective/ordered_collectives.h"

namespace oar {

OrderedCollectives::OrderedCollectives() : thread_([this] { Loop(); }) {}

OrderedCollectives::~OrderedCollectives() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void OrderedCollectives::BeginStep() {
  absl::MutexLock l(&mu_);
  waiting_.clear();
  next_ = 0;
  cancelled_ = absl::OkStatus();
}

void OrderedCollectives::Submit(size_t index, std::function<absl::Status()> work,
                                std::function<void(absl::Status)> done) {
  absl::Status cancelled;
  {
    absl::MutexLock l(&mu_);
    cancelled = cancelled_;
    if (cancelled.ok()) {
      waiting_[index] = Call{std::move(work), std::move(done)};
      return;
    }
  }
  done(cancelled);
}

void OrderedCollectives::Cancel(const absl::Status& why) {
  std::map<size_t, Call> dropped;
  {
    absl::MutexLock l(&mu_);
    if (!cancelled_.ok()) return;
    cancelled_ = why;
    dropped.swap(waiting_);
  }
  for (auto& [index, call] : dropped) call.done(why);
}

bool OrderedCollectives::TryRunInline(size_t index) {
  absl::MutexLock l(&mu_);
  if (busy_ || next_ != index || !cancelled_.ok()) return false;
  busy_ = true;
  ++next_;
  return true;
}

void OrderedCollectives::InlineDone() {
  absl::MutexLock l(&mu_);
  busy_ = false;
}

void OrderedCollectives::Loop() {
  absl::MutexLock l(&mu_);
  while (true) {
    mu_.Await(absl::Condition(
        +[](OrderedCollectives* o)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return o->stopping_ || (!o->busy_ && o->waiting_.count(o->next_) > 0); },
        this));
    if (stopping_) return;
    Call call = std::move(waiting_[next_]);
    waiting_.erase(next_);
    ++next_;
    busy_ = true;
    mu_.Unlock();
    absl::Status s = call.work();
    call.done(std::move(s));
    mu_.Lock();
    busy_ = false;
  }
}

}  // namespace oar
