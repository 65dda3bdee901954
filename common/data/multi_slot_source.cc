// MultiSlotSource; see multi_slot_source.h.
//
// Thread-safety: externally synchronized.
#include "common/data/multi_slot_source.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/data/feed_check.h"
#include "common/data/multi_slot_batch.h"

namespace oar {

absl::StatusOr<std::unique_ptr<MultiSlotSource>> MultiSlotSource::Make(DataFeedDesc desc,
                                                                       const std::vector<const VarDesc*>& vars,
                                                                       Options options) {
  if (options.files.empty()) return absl::InvalidArgumentError("no MultiSlot files to read (--files)");
  if (options.shards < 1 || options.shard < 0 || options.shard >= options.shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer ", options.shard, " of ", options.shards, " is out of range"));
  }
  std::map<std::string, const VarDesc*> by_name;
  for (const VarDesc* v : vars) by_name[v->name] = v;
  std::vector<std::string> used;
  for (int i : desc.used_slots()) used.push_back(desc.proto().multi_slot_desc().slots(i).name());
  for (const std::string& slot : used) {
    if (!by_name.count(slot)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the DataFeedDesc's used slot '", slot, "' is not one of the feed variables (",
                       absl::StrJoin(vars, ", ", [](std::string* o, const VarDesc* v) { o->append(v->name); }),
                       "); mark it is_used: false or feed it"));
    }
  }
  for (const VarDesc* v : vars) {
    if (std::find(used.begin(), used.end(), v->name) == used.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the feed variable '", v->name,
                       "' has no used slot of that name in the DataFeedDesc (used: ", absl::StrJoin(used, ", "), ")"));
    }
  }
  std::vector<std::string> mine;
  MultiSlotFeedOptions feed{.skip_bad_lines = options.skip_bad_lines};
  if (static_cast<int64_t>(options.files.size()) >= options.shards) {
    for (size_t i = static_cast<size_t>(options.shard); i < options.files.size();
         i += static_cast<size_t>(options.shards)) {
      mine.push_back(options.files[i]);
    }
  } else {  // fewer files than trainers: every file, every shards-th line
    mine = options.files;
    feed.line_shard = options.shard, feed.line_shards = options.shards;
  }
  std::unique_ptr<MultiSlotSource> s(
      new MultiSlotSource(std::move(desc), std::move(by_name), std::move(options), std::move(mine), feed));
  if (s->options_.in_memory) OAR_RETURN_IF_ERROR(s->LoadLines());
  OAR_RETURN_IF_ERROR(s->StartEpoch(0));
  return s;
}

MultiSlotSource::MultiSlotSource(DataFeedDesc desc, std::map<std::string, const VarDesc*> vars, Options options,
                                 std::vector<std::string> my_files, MultiSlotFeedOptions feed_options)
    : desc_(std::move(desc)),
      vars_(std::move(vars)),
      options_(std::move(options)),
      my_files_(std::move(my_files)),
      feed_options_(feed_options) {}

MultiSlotSource::~MultiSlotSource() = default;

absl::Status MultiSlotSource::LoadLines() {
  FileQueue files(my_files_);
  MultiSlotDataFeed feed(desc_, &files, &stats_, feed_options_);
  MultiSlotBatch check(desc_);  // each line parsed once now: a bad one is refused (or skipped) before training
  std::string_view line;
  while (true) {
    OAR_ASSIGN_OR_RETURN(const bool more, feed.NextLine(&line));
    if (!more) break;
    if (absl::Status s = check.AddLine(line); !s.ok()) {
      const std::string where = absl::StrCat(feed.where(), ": ", s.message());
      if (!options_.skip_bad_lines) return absl::InvalidArgumentError(where);
      stats_.NoteBadLine(where);
      continue;
    }
    if (check.size() >= 1024) (void)check.Take();
    lines_.emplace_back(line);
    where_.push_back(feed.where());
  }
  if (options_.global_shuffle != nullptr && options_.global_shuffle->size > 1) {
    // The same seed in every trainer: the job's, not this shard's.
    OAR_ASSIGN_OR_RETURN(lines_, GlobalShuffle(std::move(lines_), options_.seed, *options_.global_shuffle));
    where_.clear();
    for (size_t i = 0; i < lines_.size(); ++i)
      where_.push_back(absl::StrCat("line ", i + 1, " after the global shuffle"));
  }
  return absl::OkStatus();
}

int64_t MultiSlotSource::batches_per_epoch() const {
  if (!options_.in_memory) return -1;  // streamed: not known until read
  const int64_t n = static_cast<int64_t>(lines_.size()), b = desc_.batch_size();
  return (n + b - 1) / b;
}

int64_t MultiSlotSource::examples_per_epoch() const {
  return options_.in_memory ? static_cast<int64_t>(lines_.size()) : -1;
}

absl::Status MultiSlotSource::StartEpoch(int epoch) {
  if (!options_.in_memory) {
    feed_.reset();
    queue_ = std::make_unique<FileQueue>(my_files_);
    feed_ = std::make_unique<MultiSlotDataFeed>(desc_, queue_.get(), &stats_, feed_options_);
    return absl::OkStatus();
  }
  order_.resize(lines_.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  if (options_.shuffle) {
    std::mt19937_64 rng(options_.seed * 1000003u + static_cast<uint64_t>(epoch));
    std::shuffle(order_.begin(), order_.end(), rng);
  }
  pos_ = 0;
  if (batch_ == nullptr) batch_ = std::make_unique<MultiSlotBatch>(desc_);
  return absl::OkStatus();
}

absl::Status MultiSlotSource::Seek(int64_t offset) {
  if (!options_.in_memory) {
    return absl::FailedPreconditionError(
        "a streamed MultiSlot dataset (a QueueDataset) is read in order: load it in memory (--dataset in_memory) to "
        "read from an example on");
  }
  pos_ = static_cast<size_t>(std::clamp<int64_t>(offset, 0, static_cast<int64_t>(order_.size())));
  return absl::OkStatus();
}

absl::StatusOr<bool> MultiSlotSource::Next(FeedBatch* batch) {
  std::vector<Tensor> tensors;
  const std::vector<std::string>* names = nullptr;
  if (!options_.in_memory) {
    OAR_ASSIGN_OR_RETURN(const bool more, feed_->Next(&tensors));
    if (!more) return false;
    names = &feed_->names();
  } else {
    while (batch_->size() < desc_.batch_size() && pos_ < order_.size()) {
      const size_t i = order_[pos_++];
      absl::Status s = batch_->AddLine(lines_[i]);
      if (!s.ok()) {
        const std::string where = absl::StrCat(where_[i], ": ", s.message());
        if (!options_.skip_bad_lines) return absl::InvalidArgumentError(where);
        stats_.NoteBadLine(where);
      }
    }
    if (batch_->size() == 0) return false;
    tensors = batch_->Take();
    names = &batch_->names();
  }
  batch->feeds.clear();
  batch->examples = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    const std::string& name = (*names)[k];
    Tensor& t = batch->feeds[name] = std::move(tensors[k]);
    OAR_RETURN_IF_ERROR(FitFeedToVar(*vars_.at(name), absl::StrCat("MultiSlot slot '", name, "'"), &t));
    if (batch->examples == 0)
      batch->examples = t.lod().empty() ? t.dims()[0] : static_cast<int64_t>(t.lod()[0].size()) - 1;
  }
  return true;
}

std::string MultiSlotSource::Describe() const {
  return absl::StrCat(
      my_files_.size(), " MultiSlot file(s)",
      feed_options_.line_shards > 1 ? absl::StrCat(" (every ", feed_options_.line_shards, "th line)") : "",
      options_.in_memory ? absl::StrCat(", in memory: ", lines_.size(), " lines") : ", streamed",
      options_.global_shuffle != nullptr && options_.global_shuffle->size > 1 ? ", shuffled globally"
      : options_.in_memory && options_.shuffle                                ? ", shuffled"
                                                                              : "");
}

}  // namespace oar
