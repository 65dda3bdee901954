// The data layer's flags (issue 21's "one data layer"), read once into a
// DataConfig, and the FeedSources they describe for a trainer and for its
// evaluation. Sources: --data fashion_mnist (the default), --data npy:DIR
// or npy:FILE.npz (one array per feed variable), --data_feed DESC --files
// GLOBS (Fluid's MultiSlot files). Every command that trains a program
// reads its data through here.
//
// Thread-safety: call from main's thread (flags are read here).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/array_source.h"
#include "common/data/feed_source.h"
#include "common/data/global_shuffle.h"
#include "common/framework/program_desc.h"

namespace oar::cli {

struct DataConfig {
  std::string data;               // fashion_mnist, npy:DIR, npy:FILE.npz; "" with data_feed
  std::string data_dir;           // Fashion-MNIST's IDX files
  std::string data_feed;          // a DataFeedDesc file: MultiSlot files
  std::string files, test_files;  // with data_feed: comma-separated paths or globs
  std::string test_data;          // npy:DIR or npy:FILE.npz to evaluate on
  bool in_memory = false;         // --dataset in_memory (MultiSlot)
  std::string shuffle;            // none, local or global
  bool drop_last = false;
  int64_t min_batch = 1;  // arrays: a last batch of fewer is left out (the places it is split across)
  int prefetch = 2;
  int64_t batch_size = 128, limit = 0;
  uint64_t seed = 1;
  bool skip_bad_lines = false;
  // --shuffle global over MultiSlot files in a job: how its trainers
  // exchange lines (nccl2 trainers: their communicator). Not owned.
  const ShuffleGroup* shuffle_group = nullptr;
};

// Reads and checks the flags (a conflicting or unknown value is an error
// naming the flag).
absl::StatusOr<DataConfig> DataConfigFromFlags();

// Trainer `shard` of `shards`'s training batches for the feed variables
// `vars` (in --feed_names order: for Fashion-MNIST the image, then the
// label), read ahead on a thread when prefetch > 0.
absl::StatusOr<std::unique_ptr<FeedSource>> MakeTrainSource(const DataConfig& c,
                                                            const std::vector<const VarDesc*>& vars, int64_t shard = 0,
                                                            int64_t shards = 1);

// Sources of shard c of C of one configuration's training data, the data
// read once: arrays (Fashion-MNIST, .npy) are loaded by Load (or the first
// Make) and shared by every shard (their tensors are not copied); MultiSlot
// files are opened per shard. What an elastic job's trainer reads its
// chunks through; it loads before it takes a chunk (and before its clock
// starts, as a fixed job's trainer reads its share).
// Why Whole() (and `oar run`/`oar launch`, before anything starts) refuses
// MultiSlot files streamed as a queue dataset.
extern const char kQueueDatasetNotSeekable[];

class ShardSources {
 public:
  ShardSources(DataConfig c, std::vector<const VarDesc*> vars) : c_(std::move(c)), vars_(std::move(vars)) {}
  absl::Status Load();
  absl::StatusOr<std::unique_ptr<FeedSource>> Make(int64_t shard, int64_t shards);
  // Every example in each epoch's order, seekable (an elastic nccl2
  // trainer reads its rank's batch of each step): the arrays, or every
  // MultiSlot file's lines in memory (InvalidArgument for a queue dataset).
  absl::StatusOr<std::unique_ptr<SeekableSource>> Whole();

 private:
  const DataConfig c_;
  const std::vector<const VarDesc*> vars_;
  std::optional<std::map<std::string, Tensor>> arrays_;
};

// The evaluation batches (in order, every example), or nullptr when the
// configuration names no test data (Fashion-MNIST's is its t10k split).
absl::StatusOr<std::unique_ptr<FeedSource>> MakeTestSource(const DataConfig& c, const std::vector<const VarDesc*>& vars,
                                                           int64_t batch_size);

}  // namespace oar::cli
