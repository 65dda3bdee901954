// ArraySource: batches from whole arrays held in memory, one per feed
// variable, all with the same first axis (examples): NumPy files
// (`npy:DIR`, one DIR/<variable>.npy each, or `npy:FILE.npz`) and
// Fashion-MNIST (images and labels). Fluid's InMemoryDataset semantics,
// loaded once. Trainer `shard` of `shards` takes the positions
// p ≡ shard (mod shards) of each epoch's order:
//  - kNone: the arrays' order;
//  - kGlobal: a permutation of all the examples, the same in every trainer
//    (std::mt19937_64 from `seed` reshuffling the order each epoch) —
//    disjoint shares whose union is the data, a global shuffle without
//    moving data (every trainer holds the arrays);
//  - kLocal: the arrays' order dealt out, then each share permuted by
//    (seed, epoch, shard): the same examples every epoch, in a new order.
// A last batch of fewer than batch_size examples is kept unless drop_last.
//
//   OAR_ASSIGN_OR_RETURN(auto arrays, LoadNpyArrays("npy:data", {"x", "label"}));
//   OAR_ASSIGN_OR_RETURN(auto src, ArraySource::Make("npy:data", std::move(arrays), {.batch_size = 64}));
//
// Thread-safety: externally synchronized (one thread).
#pragma once

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data/feed_source.h"
#include "common/framework/program_desc.h"

namespace oar {

enum class ArrayShuffle { kNone, kLocal, kGlobal };

struct ArraySourceOptions {
  int64_t batch_size = 1;
  ArrayShuffle shuffle = ArrayShuffle::kNone;
  uint64_t seed = 0;
  int64_t shard = 0, shards = 1;  // this trainer of how many
  bool drop_last = false;
  int64_t min_batch = 1;  // a last batch of fewer is left out (it is split across that many places)
};

class ArraySource : public SeekableSource {
 public:
  using Options = ArraySourceOptions;
  // `arrays` by variable name; checked to share their first axis.
  static absl::StatusOr<std::unique_ptr<ArraySource>> Make(std::string what, std::map<std::string, Tensor> arrays,
                                                           Options options);

  absl::Status StartEpoch(int epoch) override;
  absl::StatusOr<bool> Next(FeedBatch* batch) override;
  int64_t batches_per_epoch() const override;
  int64_t examples_per_epoch() const override { return static_cast<int64_t>(order_.size()); }
  std::string Describe() const override;
  int64_t examples() const { return examples_; }                                  // in the arrays
  int64_t shard_examples() const { return static_cast<int64_t>(order_.size()); }  // this trainer's per epoch
  absl::Status Seek(int64_t offset) override {
    pos_ = std::clamp<int64_t>(offset, 0, static_cast<int64_t>(order_.size()));
    return absl::OkStatus();
  }

 private:
  ArraySource(std::string what, std::map<std::string, Tensor> arrays, Options options, int64_t examples);

  const std::string what_;
  const std::map<std::string, Tensor> arrays_;
  const Options options_;
  const int64_t examples_;
  std::vector<int64_t> all_;    // every example, in the epoch's order (kGlobal: shuffled)
  std::mt19937_64 rng_;         // kGlobal: the generator that shuffled all_
  int shuffled_epoch_ = -1;     // kGlobal: the epoch all_ is in
  std::vector<int64_t> order_;  // this shard's examples, in the epoch's order
  int64_t pos_ = 0;
};

// The arrays `spec` ("npy:DIR" or "npy:FILE.npz") holds for `names`,
// checked against the program's variables (feed_check.h): a missing array
// is an error naming the file expected and what is there.
absl::StatusOr<std::map<std::string, Tensor>> LoadNpyArrays(const std::string& spec,
                                                            const std::vector<const VarDesc*>& vars);

}  // namespace oar
