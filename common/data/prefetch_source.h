// PrefetchSource: wraps a FeedSource and reads it on a thread of its own,
// keeping up to `depth` batches ready (Fluid's double_buffer: depth 2), so
// that parsing files or gathering rows overlaps the training step instead
// of preceding it. Batches, the end of an epoch and errors arrive in the
// inner source's order. StartEpoch may be called before the previous epoch
// was read to its end (max_steps): the reader abandons it.
//
// Every wait is bounded: a reader that yields nothing for `stall` (a
// pipe_command that never ends) is a DeadlineExceeded naming the source.
//
// Thread-safety: the FeedSource methods belong to one consumer thread; the
// reader thread touches the inner source only.
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/data/feed_source.h"

namespace oar {

class PrefetchSource : public FeedSource {
 public:
  explicit PrefetchSource(std::unique_ptr<FeedSource> inner, int depth = 2, absl::Duration stall = absl::Minutes(10));
  ~PrefetchSource() override;
  PrefetchSource(const PrefetchSource&) = delete;
  PrefetchSource& operator=(const PrefetchSource&) = delete;

  absl::Status StartEpoch(int epoch) override;
  absl::StatusOr<bool> Next(FeedBatch* batch) override;
  int64_t batches_per_epoch() const override { return batches_per_epoch_; }
  int64_t examples_per_epoch() const override { return examples_per_epoch_; }
  std::string Describe() const override { return describe_; }

 private:
  struct Item {
    FeedBatch batch;
    bool end = false;  // the epoch is over (after an error too)
    absl::Status error;
  };
  void ReaderLoop();

  const std::unique_ptr<FeedSource> inner_;
  const int depth_;
  const absl::Duration stall_;
  const std::string describe_;
  const int64_t batches_per_epoch_, examples_per_epoch_;
  absl::Mutex mu_;
  std::deque<Item> ready_ ABSL_GUARDED_BY(mu_);  // of generation gen_ only
  uint64_t gen_ ABSL_GUARDED_BY(mu_) = 0;        // one per StartEpoch; a newer one abandons the reader's epoch
  int epoch_ ABSL_GUARDED_BY(mu_) = 0;           // the epoch generation gen_ reads
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool ended_ = true;  // consumer side: the current epoch's end was seen
  std::thread reader_;
};

}  // namespace oar
