// The data layer's interface (DESIGN §8, "one data layer"): a FeedSource
// yields one trainer's batches, each a set of feed tensors named after the
// program's variables and already checked against their VarDescs
// (feed_check.h). Sources: ArraySource (npy/npz arrays, Fashion-MNIST),
// MultiSlotSource (Fluid's MultiSlot files); PrefetchSource wraps either to
// prepare batches on a reader thread ahead of training. Every command and
// mode reads through one (cli/data_flags.h builds it from the flags).
//
//   OAR_RETURN_IF_ERROR(source->StartEpoch(epoch));
//   FeedBatch b;
//   while (true) {
//     OAR_ASSIGN_OR_RETURN(bool more, source->Next(&b));
//     if (!more) break;
//     exe.Run(main, &scope, b.feeds, {loss});
//   }
//
// Thread-safety: a FeedSource belongs to one thread (PrefetchSource's
// reader thread is its own business).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/framework/tensor.h"

namespace oar {

struct FeedBatch {
  std::map<std::string, Tensor> feeds;  // variable name → its batch
  int64_t examples = 0;
};

class FeedSource {
 public:
  virtual ~FeedSource() = default;
  // Starts epoch `epoch` (0-based): reshuffles where the source shuffles,
  // reopens files where it streams them.
  virtual absl::Status StartEpoch(int epoch) = 0;
  // The epoch's next batch; false at its end (and after an error).
  virtual absl::StatusOr<bool> Next(FeedBatch* batch) = 0;
  // Batches per epoch where known before reading (a progress bar's total),
  // else -1.
  virtual int64_t batches_per_epoch() const { return -1; }
  // Examples per epoch where known before reading, else -1.
  virtual int64_t examples_per_epoch() const { return -1; }
  // What it reads, for the run's first line: "npy:data/ (2 arrays, 600 of
  // 1200 examples)".
  virtual std::string Describe() const = 0;
};

// A source whose epoch may be read from any example on (an elastic nccl2
// trainer reads its rank's batch of each of the job's steps:
// cli/elastic_ring.h): arrays, and MultiSlot files held in memory.
class SeekableSource : public FeedSource {
 public:
  // Next reads from the `offset`th example of this epoch's order on (past
  // the end: nothing). FailedPrecondition where the epoch is streamed.
  virtual absl::Status Seek(int64_t offset) = 0;
};

}  // namespace oar
