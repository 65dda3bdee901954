// PrefetchSource; see prefetch_source.h.
//
// Thread-safety: as the header says; the shared state is under mu_.
#include "common/data/prefetch_source.h"

#include "absl/strings/str_cat.h"

namespace oar {

PrefetchSource::PrefetchSource(std::unique_ptr<FeedSource> inner, int depth, absl::Duration stall)
    : inner_(std::move(inner)),
      depth_(depth < 1 ? 1 : depth),
      stall_(stall),
      describe_(inner_->Describe()),
      batches_per_epoch_(inner_->batches_per_epoch()),
      examples_per_epoch_(inner_->examples_per_epoch()) {
  reader_ = std::thread([this] { ReaderLoop(); });
}

PrefetchSource::~PrefetchSource() {
  {
    absl::MutexLock l(&mu_);
    stop_ = true;
  }
  reader_.join();
}

void PrefetchSource::ReaderLoop() {
  uint64_t mine = 0;  // the generation being read
  while (true) {
    int epoch;
    {
      absl::MutexLock l(&mu_);
      auto asked = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stop_ || gen_ != mine; };
      mu_.Await(absl::Condition(&asked));
      if (stop_) return;
      mine = gen_;
      epoch = epoch_;
    }
    Item item;
    item.error = inner_->StartEpoch(epoch);
    while (true) {
      if (item.error.ok()) {
        absl::StatusOr<bool> more = inner_->Next(&item.batch);
        if (!more.ok())
          item.error = more.status();
        else if (!*more)
          item.end = true;
      }
      if (!item.error.ok()) item.end = true;
      absl::MutexLock l(&mu_);
      auto room = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return stop_ || gen_ != mine || static_cast<int>(ready_.size()) < depth_;
      };
      mu_.Await(absl::Condition(&room));
      if (stop_ || gen_ != mine) break;  // abandoned: a new epoch (or the end) was asked for
      const bool end = item.end;
      ready_.push_back(std::move(item));
      item = Item{};
      if (end) break;
    }
  }
}

absl::Status PrefetchSource::StartEpoch(int epoch) {
  absl::MutexLock l(&mu_);
  ++gen_;
  epoch_ = epoch;
  ready_.clear();  // the last epoch's batches, where it was not read to its end
  ended_ = false;
  return absl::OkStatus();
}

absl::StatusOr<bool> PrefetchSource::Next(FeedBatch* batch) {
  if (ended_) return false;
  absl::MutexLock l(&mu_);
  auto ready = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return !ready_.empty(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), stall_)) {
    return absl::DeadlineExceededError(absl::StrCat(describe_, ": no batch from the reader in ",
                                                    absl::FormatDuration(stall_),
                                                    " (a pipe_command that never ends?)"));
  }
  Item item = std::move(ready_.front());
  ready_.pop_front();
  if (item.end) {
    ended_ = true;
    if (!item.error.ok()) return item.error;
    return false;
  }
  *batch = std::move(item.batch);
  return true;
}

}  // namespace oar
