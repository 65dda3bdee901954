// ArraySource and LoadNpyArrays; see array_source.h.
//
// Thread-safety: externally synchronized.
#include "common/data/array_source.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status.h"
#include "common/data/feed_check.h"
#include "common/data/npy.h"

namespace oar {

absl::StatusOr<std::unique_ptr<ArraySource>> ArraySource::Make(std::string what, std::map<std::string, Tensor> arrays,
                                                               Options options) {
  if (arrays.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no arrays to feed"));
  if (options.batch_size < 1) return absl::InvalidArgumentError("the batch size must be >= 1");
  if (options.shards < 1 || options.shard < 0 || options.shard >= options.shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("trainer ", options.shard, " of ", options.shards, " is out of range"));
  }
  int64_t n = -1;
  std::string first;
  for (const auto& [name, t] : arrays) {
    if (t.dims().size() == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": '", name, "' is a scalar"));
    if (n < 0) {
      n = t.dims()[0], first = name;
    } else if (t.dims()[0] != n) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": '", name, "' holds ", t.dims()[0], " examples, '", first,
                                                     "' ", n, " (the first axis is examples; they must agree)"));
    }
  }
  return std::unique_ptr<ArraySource>(new ArraySource(std::move(what), std::move(arrays), options, n));
}

ArraySource::ArraySource(std::string what, std::map<std::string, Tensor> arrays, Options options, int64_t examples)
    : what_(std::move(what)), arrays_(std::move(arrays)), options_(options), examples_(examples), rng_(options.seed) {
  all_.resize(static_cast<size_t>(examples_));
  std::iota(all_.begin(), all_.end(), 0);
  for (size_t p = static_cast<size_t>(options_.shard); p < all_.size(); p += static_cast<size_t>(options_.shards)) {
    order_.push_back(all_[p]);  // batches_per_epoch() before the first StartEpoch
  }
}

absl::Status ArraySource::StartEpoch(int epoch) {
  if (options_.shuffle == ArrayShuffle::kGlobal) {
    // One generator from `seed`, shuffling the previous epoch's order again
    // each epoch (as the Batcher of `oar train --model` does, so both walk
    // Fashion-MNIST alike); an epoch out of turn is replayed from the start.
    if (epoch != shuffled_epoch_ + 1) {
      rng_.seed(options_.seed);
      all_.resize(static_cast<size_t>(examples_));
      std::iota(all_.begin(), all_.end(), 0);
      shuffled_epoch_ = -1;
    }
    while (shuffled_epoch_ < epoch) {
      std::shuffle(all_.begin(), all_.end(), rng_);
      ++shuffled_epoch_;
    }
  } else if (all_.empty()) {
    all_.resize(static_cast<size_t>(examples_));
    std::iota(all_.begin(), all_.end(), 0);
  }
  order_.clear();
  for (size_t p = static_cast<size_t>(options_.shard); p < all_.size(); p += static_cast<size_t>(options_.shards)) {
    order_.push_back(all_[p]);
  }
  if (options_.shuffle == ArrayShuffle::kLocal) {
    std::mt19937_64 rng((options_.seed * 1000003u + static_cast<uint64_t>(epoch)) * 7919u +
                        static_cast<uint64_t>(options_.shard));
    std::shuffle(order_.begin(), order_.end(), rng);
  }
  pos_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<bool> ArraySource::Next(FeedBatch* batch) {
  const int64_t n = static_cast<int64_t>(order_.size());
  const int64_t b = std::min(options_.batch_size, n - pos_);
  if (b <= 0 || b < options_.min_batch || (options_.drop_last && b < options_.batch_size)) return false;
  batch->feeds.clear();
  for (const auto& [name, src] : arrays_) {
    const size_t row = static_cast<size_t>(src.numel() / std::max<int64_t>(examples_, 1)) * SizeOf(src.dtype());
    DDim dims = src.dims();
    dims[0] = b;
    Tensor& t = batch->feeds[name];
    t.Resize(dims);
    char* dst = static_cast<char*>(t.mutable_data(src.dtype()));
    const char* from = static_cast<const char*>(src.raw_data());
    for (int64_t i = 0; i < b; ++i) {
      std::memcpy(dst + static_cast<size_t>(i) * row, from + static_cast<size_t>(order_[pos_ + i]) * row, row);
    }
  }
  batch->examples = b;
  pos_ += b;
  return true;
}

int64_t ArraySource::batches_per_epoch() const {
  const int64_t n = static_cast<int64_t>(order_.size()), bs = options_.batch_size;
  const bool last = n % bs != 0 && !options_.drop_last && n % bs >= options_.min_batch;
  return n / bs + (last ? 1 : 0);
}

std::string ArraySource::Describe() const {
  return absl::StrCat(what_, " (", arrays_.size(), " arrays, ", order_.size(),
                      options_.shards > 1 ? absl::StrCat(" of ", examples_) : std::string(), " examples",
                      options_.shuffle == ArrayShuffle::kGlobal  ? ", shuffled globally"
                      : options_.shuffle == ArrayShuffle::kLocal ? ", shuffled locally"
                                                                 : "",
                      ")");
}

absl::StatusOr<std::map<std::string, Tensor>> LoadNpyArrays(const std::string& spec,
                                                            const std::vector<const VarDesc*>& vars) {
  namespace fs = std::filesystem;
  if (!absl::StartsWith(spec, "npy:")) {
    return absl::InvalidArgumentError(absl::StrCat("'", spec, "' is not npy:DIR or npy:FILE.npz"));
  }
  const std::string path = spec.substr(4);
  std::map<std::string, Tensor> all, out;
  const bool npz = absl::EndsWith(path, ".npz");
  if (npz) {
    OAR_ASSIGN_OR_RETURN(all, ReadNpz(path));
  } else if (!fs::is_directory(path)) {
    return absl::NotFoundError(absl::StrCat(spec, ": ", path,
                                            " is not a directory (npy:DIR holds one <variable>.npy "
                                            "per feed) nor an .npz file"));
  }
  for (const VarDesc* var : vars) {
    std::string where;
    Tensor t;
    if (npz) {
      where = absl::StrCat(path, "[", var->name, ".npy]");
      auto it = all.find(var->name);
      if (it == all.end()) {
        std::vector<std::string> have;
        for (const auto& [k, v] : all) have.push_back(k);
        return absl::NotFoundError(absl::StrCat(path, " has no array '", var->name,
                                                "' for the feed variable of that "
                                                "name (it has: ",
                                                absl::StrJoin(have, ", "), ")"));
      }
      t = std::move(it->second);
    } else {
      where = (fs::path(path) / (var->name + ".npy")).string();
      if (!fs::exists(where)) {
        std::vector<std::string> have;
        for (const auto& e : fs::directory_iterator(path)) {
          if (e.path().extension() == ".npy") have.push_back(e.path().filename().string());
        }
        std::sort(have.begin(), have.end());
        return absl::NotFoundError(
            absl::StrCat(where, " is missing: the feed variable '", var->name, "' reads it (", path,
                         " has: ", have.empty() ? "no .npy files" : absl::StrJoin(have, ", "), ")"));
      }
      OAR_ASSIGN_OR_RETURN(t, ReadNpy(where));
    }
    OAR_RETURN_IF_ERROR(FitFeedToVar(*var, "array " + where, &t));
    out[var->name] = std::move(t);
  }
  return out;
}

}  // namespace oar
