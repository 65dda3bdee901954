// The data layer's flags and sources; see data_flags.h.
//
// Thread-safety: main's thread.
#include "cli/data_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cli/async_train_util.h"
#include "cli/command.h"
#include "common/base/status.h"
#include "common/data/array_source.h"
#include "common/data/data_feed_desc.h"
#include "common/data/fashion_mnist.h"
#include "common/data/feed_check.h"
#include "common/data/multi_slot_source.h"
#include "common/data/prefetch_source.h"
#include "gflags/gflags.h"

DEFINE_string(test_data, "",
              "evaluate on these arrays after training: npy:DIR (one <variable>.npy per feed) or "
              "npy:FILE.npz, printing test_loss= and test_<name>= for each --fetch");
DEFINE_string(dataset, "queue",
              "with --data_feed, Fluid's Dataset kind: queue (QueueDataset: the files are streamed "
              "every epoch) or in_memory (InMemoryDataset: read once, then shuffled per --shuffle); "
              "arrays (--data) are always in memory");
DEFINE_string(shuffle, "",
              "none (the data's own order), local (each trainer shuffles its share every epoch) or "
              "global (arrays: one permutation of all the data per epoch, dealt to the trainers; "
              "MultiSlot files, in memory: the lines dealt across the trainers at random once, as "
              "InMemoryDataset.global_shuffle, then shuffled locally every epoch; a pserver job's "
              "trainers need PADDLE_TRAINER_ENDPOINTS, which oar launch sets); "
              "default: global for fashion_mnist, none otherwise. The seed is --seed");
DEFINE_bool(drop_last, false,
            "leave out each epoch's last batch when it has fewer than --batch_size examples "
            "(default: train on it)");
DEFINE_int32(prefetch, 2,
             "batches a reader thread prepares ahead of training (Fluid's double_buffer); 0: read in "
             "the training thread");
DECLARE_string(data);
DECLARE_string(data_dir);
DECLARE_string(data_feed);
DECLARE_string(files);
DECLARE_string(test_files);
DECLARE_int32(batch_size);
DECLARE_int64(limit);
DECLARE_int32(seed);
DECLARE_bool(skip_bad_lines);

namespace oar::cli {
namespace {

ArraySourceOptions ArrayOptions(const DataConfig& c, int64_t shard, int64_t shards) {
  return ArraySourceOptions{.batch_size = c.batch_size,
                            .shuffle = c.shuffle == "none"    ? ArrayShuffle::kNone
                                       : c.shuffle == "local" ? ArrayShuffle::kLocal
                                                              : ArrayShuffle::kGlobal,
                            .seed = c.seed,
                            .shard = shard,
                            .shards = shards,
                            .drop_last = c.drop_last,
                            .min_batch = c.min_batch};
}

// Fashion-MNIST's split as the two feed variables' arrays.
absl::StatusOr<std::map<std::string, Tensor>> FashionArrays(const DataConfig& c,
                                                            const std::vector<const VarDesc*>& vars,
                                                            const std::string& split) {
  if (vars.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--data fashion_mnist feeds two variables (the image, then the "
                     "label); --feed_names names ",
                     vars.size(), ". For other feeds bring your data: --data npy:DIR or --data_feed"));
  }
  OAR_ASSIGN_OR_RETURN(Dataset d, LoadFashionMnist(c.data_dir, split));
  if (split == "train" && c.limit > 0 && c.limit < d.size()) {
    d.images = d.images.Slice(0, c.limit);
    d.labels = d.labels.Slice(0, c.limit);
  }
  const std::string where = absl::StrCat("Fashion-MNIST ", split);
  OAR_RETURN_IF_ERROR(FitFeedToVar(*vars[0], where + " images", &d.images));
  OAR_RETURN_IF_ERROR(FitFeedToVar(*vars[1], where + " labels", &d.labels));
  return std::map<std::string, Tensor>{{vars[0]->name, d.images}, {vars[1]->name, d.labels}};
}

std::unique_ptr<FeedSource> Prefetched(const DataConfig& c, std::unique_ptr<FeedSource> s) {
  if (c.prefetch <= 0) return s;
  return std::make_unique<PrefetchSource>(std::move(s), c.prefetch);
}

absl::StatusOr<std::unique_ptr<MultiSlotSource>> MultiSlot(const DataConfig& c, const std::vector<const VarDesc*>& vars,
                                                           const std::string& patterns, const char* flag, bool train,
                                                           int64_t batch_size, int64_t shard, int64_t shards) {
  OAR_ASSIGN_OR_RETURN(DataFeedDesc desc, DataFeedDesc::Load(c.data_feed));
  desc.set_batch_size(static_cast<int>(batch_size));
  OAR_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(patterns, flag));
  const bool global = train && c.shuffle == "global" && shards > 1;
  if (global && c.shuffle_group == nullptr) {
    return absl::FailedPreconditionError(
        "--shuffle global over MultiSlot files exchanges lines between the "
        "trainers, and this trainer has no communicator to do it over: use "
        "--shuffle local");
  }
  MultiSlotSourceOptions o{.files = std::move(files),
                           .shard = shard,
                           .shards = shards,
                           .in_memory = train && c.in_memory,
                           .shuffle = train && c.shuffle != "none",
                           .seed = c.seed + (global ? 0 : static_cast<uint64_t>(shard)),
                           .skip_bad_lines = c.skip_bad_lines,
                           .global_shuffle = global ? c.shuffle_group : nullptr};
  return MultiSlotSource::Make(std::move(desc), vars, std::move(o));
}

}  // namespace

absl::StatusOr<DataConfig> DataConfigFromFlags() {
  DataConfig c;
  c.data = FLAGS_data;
  c.data_dir = FLAGS_data_dir;
  c.data_feed = FLAGS_data_feed;
  c.files = FLAGS_files;
  c.test_files = FLAGS_test_files;
  c.test_data = FLAGS_test_data;
  c.drop_last = FLAGS_drop_last;
  c.prefetch = FLAGS_prefetch;
  c.batch_size = FLAGS_batch_size;
  c.limit = FLAGS_limit;
  c.seed = static_cast<uint64_t>(FLAGS_seed);
  c.skip_bad_lines = FLAGS_skip_bad_lines;
  if (!c.data_feed.empty()) {
    if (FlagGiven("data"))
      return absl::InvalidArgumentError("give --data (arrays) or --data_feed (MultiSlot files), not both");
    if (c.files.empty())
      return absl::InvalidArgumentError("--data_feed needs the training files: --files 'dir/part-*'");
    if (!c.test_data.empty())
      return absl::InvalidArgumentError("with --data_feed, evaluate on --test_files (MultiSlot), not --test_data");
    c.data.clear();
  } else {
    if (!c.files.empty() || !c.test_files.empty()) {
      return absl::InvalidArgumentError("--files and --test_files are MultiSlot files: give --data_feed DESC too");
    }
    if (c.data != "fashion_mnist" && !absl::StartsWith(c.data, "npy:")) {
      return absl::InvalidArgumentError(absl::StrCat("--data ", c.data,
                                                     ": give fashion_mnist, npy:DIR (one "
                                                     "<variable>.npy per feed) or npy:FILE.npz; MultiSlot files go "
                                                     "through --data_feed DESC --files GLOBS"));
    }
    if (!c.test_data.empty() && !absl::StartsWith(c.test_data, "npy:")) {
      return absl::InvalidArgumentError(absl::StrCat("--test_data ", c.test_data, ": give npy:DIR or npy:FILE.npz"));
    }
  }
  if (FLAGS_dataset != "queue" && FLAGS_dataset != "in_memory") {
    return absl::InvalidArgumentError(absl::StrCat("--dataset ", FLAGS_dataset, ": give queue or in_memory"));
  }
  if (FLAGS_dataset == "in_memory" && c.data_feed.empty()) {
    return absl::InvalidArgumentError("--dataset applies to --data_feed (arrays are always held in memory)");
  }
  c.in_memory = FLAGS_dataset == "in_memory";
  c.shuffle = FLAGS_shuffle.empty() ? (c.data == "fashion_mnist" ? "global" : "none") : FLAGS_shuffle;
  if (c.shuffle != "none" && c.shuffle != "local" && c.shuffle != "global") {
    return absl::InvalidArgumentError(absl::StrCat("--shuffle ", c.shuffle, ": give none, local or global"));
  }
  if (!c.data_feed.empty() && c.shuffle != "none" && !c.in_memory) {
    return absl::InvalidArgumentError(absl::StrCat("--shuffle ", c.shuffle,
                                                   " needs --dataset in_memory (a queue "
                                                   "dataset streams its files in order, as Fluid's QueueDataset)"));
  }
  if (c.prefetch < 0) return absl::InvalidArgumentError("--prefetch must be >= 0");
  if (c.batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  return c;
}

namespace {

absl::StatusOr<std::map<std::string, Tensor>> TrainArrays(const DataConfig& c,
                                                          const std::vector<const VarDesc*>& vars) {
  std::map<std::string, Tensor> arrays;
  if (c.data == "fashion_mnist") {
    OAR_ASSIGN_OR_RETURN(arrays, FashionArrays(c, vars, "train"));
  } else {
    OAR_ASSIGN_OR_RETURN(arrays, LoadNpyArrays(c.data, vars));
    if (c.limit > 0) {
      for (auto& [name, t] : arrays) {
        if (c.limit < t.dims()[0]) t = t.Slice(0, c.limit);
      }
    }
  }
  return arrays;
}

}  // namespace

absl::StatusOr<std::unique_ptr<FeedSource>> MakeTrainSource(const DataConfig& c,
                                                            const std::vector<const VarDesc*>& vars, int64_t shard,
                                                            int64_t shards) {
  return ShardSources(c, vars).Make(shard, shards);
}

absl::Status ShardSources::Load() {
  if (!c_.data_feed.empty() || arrays_.has_value()) return absl::OkStatus();
  OAR_ASSIGN_OR_RETURN(arrays_, TrainArrays(c_, vars_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<FeedSource>> ShardSources::Make(int64_t shard, int64_t shards) {
  if (!c_.data_feed.empty()) {
    OAR_ASSIGN_OR_RETURN(auto s, MultiSlot(c_, vars_, c_.files, "--files", true, c_.batch_size, shard, shards));
    return Prefetched(c_, std::move(s));
  }
  OAR_RETURN_IF_ERROR(Load());
  OAR_ASSIGN_OR_RETURN(auto s, ArraySource::Make(c_.data, *arrays_, ArrayOptions(c_, shard, shards)));
  return Prefetched(c_, std::move(s));
}

const char kQueueDatasetNotSeekable[] =
    "an elastic nccl2 job reads each step's batches at the job's place in the epoch, and a queue dataset is read in "
    "order: give --dataset in_memory";

absl::StatusOr<std::unique_ptr<SeekableSource>> ShardSources::Whole() {
  if (!c_.data_feed.empty()) {
    if (!c_.in_memory) {
      return absl::InvalidArgumentError(kQueueDatasetNotSeekable);
    }
    // Every trainer holds every line, in one order per epoch (shard 0's seed).
    OAR_ASSIGN_OR_RETURN(auto s, MultiSlot(c_, vars_, c_.files, "--files", true, c_.batch_size, 0, 1));
    return std::unique_ptr<SeekableSource>(std::move(s));
  }
  OAR_RETURN_IF_ERROR(Load());
  OAR_ASSIGN_OR_RETURN(auto s, ArraySource::Make(c_.data, *arrays_, ArrayOptions(c_, 0, 1)));
  return std::unique_ptr<SeekableSource>(std::move(s));
}

absl::StatusOr<std::unique_ptr<FeedSource>> MakeTestSource(const DataConfig& c, const std::vector<const VarDesc*>& vars,
                                                           int64_t batch_size) {
  DataConfig t = c;
  t.batch_size = batch_size;
  t.shuffle = "none";
  t.drop_last = false;
  t.in_memory = false;
  if (!c.data_feed.empty()) {
    if (c.test_files.empty()) return std::unique_ptr<FeedSource>();
    OAR_ASSIGN_OR_RETURN(auto s, MultiSlot(t, vars, c.test_files, "--test_files", false, batch_size, 0, 1));
    return Prefetched(t, std::move(s));
  }
  std::map<std::string, Tensor> arrays;
  std::string what = c.test_data;
  if (!c.test_data.empty()) {
    OAR_ASSIGN_OR_RETURN(arrays, LoadNpyArrays(c.test_data, vars));
  } else if (c.data == "fashion_mnist") {
    OAR_ASSIGN_OR_RETURN(arrays, FashionArrays(c, vars, "t10k"));
    what = "fashion_mnist t10k";
  } else {
    return std::unique_ptr<FeedSource>();
  }
  OAR_ASSIGN_OR_RETURN(auto s, ArraySource::Make(what, std::move(arrays), ArrayOptions(t, 0, 1)));
  return Prefetched(t, std::move(s));
}

}  // namespace oar::cli
