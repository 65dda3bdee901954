#include "common/base/thread_pool.h"

namespace oar {

ThreadPool::ThreadPool(int threads) {
  const size_t n = static_cast<size_t>(std::max(1, threads));
  {
    absl::MutexLock lock(&mu_);
    own_.resize(n);
  }
  for (size_t i = 0; i < n; ++i) workers_.emplace_back([this, i] { Work(i); });
}

ThreadPool::~ThreadPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (auto& w : workers_) w.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(fn));
}

bool ThreadPool::TrySchedule(std::function<void()> fn, size_t max_queued) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= max_queued) return false;
  queue_.push_back(std::move(fn));
  return true;
}

void ThreadPool::ScheduleOn(int worker, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  own_[static_cast<size_t>(worker) % own_.size()].push_back(std::move(fn));
}

void ThreadPool::Work(size_t index) {
  struct Ready {
    ThreadPool* pool;
    size_t index;
  } ready{this, index};
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Ready* r) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return r->pool->stopping_ || !r->pool->queue_.empty() || !r->pool->own_[r->index].empty();
          },
          &ready));
      if (!own_[index].empty()) {
        fn = std::move(own_[index].front());
        own_[index].pop_front();
      } else if (!queue_.empty()) {
        fn = std::move(queue_.front());
        queue_.pop_front();
      } else {
        return;  // stopping and nothing left for this worker
      }
    }
    fn();
  }
}

}  // namespace oar
