// MultiSlotSource: batches from Fluid's MultiSlot text files described by a
// DataFeedDesc (multi_slot_batch.h), each used slot feeding the program
// variable of its name and checked against it (feed_check.h). Fluid's two
// Dataset kinds:
//  - QueueDataset (in_memory false): the files are streamed, in order, each
//    epoch (through the desc's pipe_command where it has one);
//  - InMemoryDataset (in_memory true): this trainer's lines are read and
//    parsed once (a bad line is refused then, before any training, and the
//    batches per epoch are known: nccl2 trainers agree on them); with
//    shuffle (local_shuffle) each epoch takes them in a permutation drawn
//    from (seed, epoch); with global_shuffle the lines are first dealt
//    across the trainers at random (InMemoryDataset.global_shuffle).
// Sharding: file i goes to trainer i % shards; with fewer files than
// trainers every trainer reads every file and takes the lines whose number
// in their file is ≡ shard (mod shards). A bad line is an error naming
// file, line and slot (or, with skip_bad_lines, counted and skipped).
//
// Thread-safety: externally synchronized (one thread).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/data_feed_desc.h"
#include "common/data/feed_source.h"
#include "common/data/global_shuffle.h"
#include "common/data/multi_slot_feed.h"
#include "common/framework/program_desc.h"

namespace oar {

struct MultiSlotSourceOptions {
  std::vector<std::string> files;  // the job's files, in order (globs expanded)
  int64_t shard = 0, shards = 1;
  bool in_memory = false, shuffle = false;
  uint64_t seed = 0;
  bool skip_bad_lines = false;
  // In memory: after loading, exchange the lines across the job's trainers
  // (global_shuffle.h; InMemoryDataset.global_shuffle). Not owned.
  const ShuffleGroup* global_shuffle = nullptr;
};

class MultiSlotSource : public SeekableSource {
 public:
  using Options = MultiSlotSourceOptions;
  // `vars`: the feed variables; each used slot must name one, and each must
  // be a used slot.
  static absl::StatusOr<std::unique_ptr<MultiSlotSource>> Make(DataFeedDesc desc,
                                                               const std::vector<const VarDesc*>& vars,
                                                               Options options);
  ~MultiSlotSource() override;

  absl::Status StartEpoch(int epoch) override;
  absl::StatusOr<bool> Next(FeedBatch* batch) override;
  int64_t batches_per_epoch() const override;   // in memory: known; streamed: -1
  int64_t examples_per_epoch() const override;  // likewise
  std::string Describe() const override;
  // In memory only (FailedPrecondition for a streamed QueueDataset).
  absl::Status Seek(int64_t offset) override;
  const FeedStats& stats() const { return stats_; }

 private:
  MultiSlotSource(DataFeedDesc desc, std::map<std::string, const VarDesc*> vars, Options options,
                  std::vector<std::string> my_files, MultiSlotFeedOptions feed_options);
  absl::Status LoadLines();  // InMemoryDataset: this shard's lines, once

  const DataFeedDesc desc_;
  const std::map<std::string, const VarDesc*> vars_;
  const Options options_;
  const std::vector<std::string> my_files_;
  const MultiSlotFeedOptions feed_options_;
  FeedStats stats_;
  std::unique_ptr<FileQueue> queue_;         // QueueDataset: this epoch's files
  std::unique_ptr<MultiSlotDataFeed> feed_;  // reading them
  std::vector<std::string> lines_;           // InMemoryDataset: every line of the shard
  std::vector<std::string> where_;           // each line's "file:line"
  std::vector<size_t> order_;                // this epoch's order of lines_
  size_t pos_ = 0;
  std::unique_ptr<class MultiSlotBatch> batch_;
};

}  // namespace oar
