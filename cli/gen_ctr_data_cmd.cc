// `oar gen-ctr-data`: MultiSlot training and test files for ctr_dnn from a
// planted logistic model, so the best AUC a model can reach is known. Each
// example: 13 dense features, uniform in [0, 1); for each of 26 sparse
// slots 1-3 categorical values, skewed towards small ones, hashed into the
// embedding table's rows; label ~ Bernoulli(sigmoid(bias + w·dense + the
// sum of the weights of every slot's values)), the
// same form as ctr_dnn's summed embeddings. Writes
// DIR/train/part-NNNNN, DIR/test/part-NNNNN and DIR/data_feed.prototxt, and
// prints the planted model's own AUC on the test split as planted_auc=….
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "common/base/status.h"
#include "common/data/exact_auc.h"
#include "examples/model_zoo.h"
#include "gflags/gflags.h"

DEFINE_int64(examples, 100000, "training examples to write (the test split gets a tenth as many more)");
DECLARE_string(out);
DECLARE_string(files);
DECLARE_int32(seed);
DECLARE_int32(batch_size);

namespace oar::cli {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finalizer: a stable hash
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Planted {
  std::vector<float> dense_w;              // [13]
  std::vector<std::vector<float>> slot_w;  // [26][vocabulary of the slot]
  float bias = -1.2f;
  explicit Planted(std::mt19937_64& rng) {
    std::normal_distribution<float> n(0.0f, 1.0f);
    for (int k = 0; k < kCtrDenseFeatures; ++k) dense_w.push_back(n(rng) * 0.8f);
    for (int s = 0; s < kCtrSparseSlots; ++s) {
      std::vector<float> w(100 + 40 * s);
      for (float& v : w) v = n(rng) * 0.3f;
      slot_w.push_back(std::move(w));
    }
  }
};

// Writes `n` examples over `files` files under `dir`; returns (probability, label) of each.
absl::StatusOr<std::vector<std::pair<double, int>>> WriteSplit(const Planted& m, std::mt19937_64& rng,
                                                               const std::string& dir, int64_t n, int files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(dir, ": ", ec.message()));
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<std::pair<double, int>> scored;
  std::string line;
  for (int f = 0; f < files; ++f) {
    const std::string path = absl::StrFormat("%s/part-%05d", dir, f);
    std::ofstream out(path);
    if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
    const int64_t begin = n * f / files, end = n * (f + 1) / files;
    for (int64_t i = begin; i < end; ++i) {
      double logit = m.bias;
      line = absl::StrCat(kCtrDenseFeatures);
      for (int k = 0; k < kCtrDenseFeatures; ++k) {
        const float x = u(rng);
        logit += m.dense_w[k] * x;
        absl::StrAppend(&line, " ", x);
      }
      for (int s = 0; s < kCtrSparseSlots; ++s) {
        const int ids = 1 + static_cast<int>(rng() % 3);
        const size_t vocab = m.slot_w[s].size();
        absl::StrAppend(&line, " ", ids);
        double sum = 0;
        for (int k = 0; k < ids; ++k) {
          const size_t v = static_cast<size_t>(std::pow(u(rng), 2.0f) * static_cast<float>(vocab)) % vocab;
          sum += m.slot_w[s][v];
          absl::StrAppend(&line, " ", Mix(static_cast<uint64_t>(s) << 32 | v) % kCtrSparseFeatureDim);
        }
        logit += sum;
      }
      const double p = 1.0 / (1.0 + std::exp(-logit));
      const int label = u(rng) < p ? 1 : 0;
      absl::StrAppend(&line, " 1 ", label, "\n");
      out << line;
      scored.emplace_back(p, label);
    }
  }
  return scored;
}

// The DataFeedDesc's batch: --batch_size when given, else 64 (ctr_dnn's
// Adam at 0.003 reaches the planted AUC in one epoch of 1M examples with it).
int FeedBatch() { return gflags::GetCommandLineFlagInfoOrDie("batch_size").is_default ? 64 : FLAGS_batch_size; }

std::string FeedDesc() {
  std::string d = absl::StrCat("name: \"MultiSlotDataFeed\"\nbatch_size: ", FeedBatch(), "\nmulti_slot_desc {\n");
  absl::StrAppend(&d, "  slots { name: \"", kCtrDenseSlot, "\" type: \"float\" is_dense: true is_used: true shape: -1 ",
                  "shape: ", kCtrDenseFeatures, " }\n");
  for (int s = 1; s <= kCtrSparseSlots; ++s) {
    absl::StrAppend(&d, "  slots { name: \"C", s, "\" type: \"uint64\" is_dense: false is_used: true }\n");
  }
  d += "  slots { name: \"label\" type: \"uint64\" is_dense: false is_used: true }\n}\n";
  return d;
}

absl::Status GenCtrData() {
  if (FLAGS_out.empty()) return absl::InvalidArgumentError("give the output folder with --out DIR");
  int files = 0;
  if (!absl::SimpleAtoi(FLAGS_files.empty() ? "4" : FLAGS_files, &files) || files < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--files '", FLAGS_files, "' is not a positive count of files"));
  }
  if (FLAGS_examples < 1) return absl::InvalidArgumentError("--examples must be at least 1");
  if (files > FLAGS_examples) {  // else most training files would be empty
    return absl::InvalidArgumentError(absl::StrCat("--files ", files, " is more files than --examples ", FLAGS_examples,
                                                   ": each file needs at least one example"));
  }
  if (FeedBatch() < 1) return absl::InvalidArgumentError("--batch_size must be at least 1");
  std::mt19937_64 rng(static_cast<uint64_t>(FLAGS_seed));
  const Planted model(rng);
  OAR_RETURN_IF_ERROR(WriteSplit(model, rng, FLAGS_out + "/train", FLAGS_examples, files).status());
  const int64_t test_n = std::max<int64_t>(1, FLAGS_examples / 10);
  OAR_ASSIGN_OR_RETURN(auto test,
                       WriteSplit(model, rng, FLAGS_out + "/test", test_n, std::min<int64_t>(files, test_n)));
  std::ofstream(FLAGS_out + "/data_feed.prototxt") << FeedDesc();
  int64_t positives = 0;
  for (const auto& [p, y] : test) positives += y;
  std::printf("wrote %lld training examples in %d file(s), %lld test examples in %lld, and data_feed.prototxt to %s\n",
              static_cast<long long>(FLAGS_examples), files, static_cast<long long>(test_n),
              static_cast<long long>(std::min<int64_t>(files, test_n)), FLAGS_out.c_str());
  std::printf("test click rate %.3f\nplanted_auc=%.4f\n", static_cast<double>(positives) / test_n, ExactAuc(test));
  return absl::OkStatus();
}

}  // namespace

int RunGenCtrData(const std::vector<std::string>& args) { return RunWithoutArgs("gen-ctr-data", args, GenCtrData); }

}  // namespace oar::cli
