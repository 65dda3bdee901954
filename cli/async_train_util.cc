#include "cli/async_train_util.h"

#include <glob.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"
#include "common/data/exact_auc.h"
#include "common/data/multi_slot_feed.h"

namespace oar::cli {

absl::StatusOr<std::vector<std::string>> ExpandFiles(const std::string& patterns, const char* flag) {
  std::vector<std::string> files;
  for (absl::string_view p : absl::StrSplit(patterns, ',', absl::SkipEmpty())) {
    const std::string pattern(p);
    glob_t g{};
    const int rc = glob(pattern.c_str(), GLOB_NOSORT | GLOB_BRACE, nullptr, &g);
    if (rc != 0) {
      globfree(&g);
      return absl::NotFoundError(absl::StrCat(flag, ": '", pattern, "' matches no file"));
    }
    std::vector<std::string> matched(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    globfree(&g);
    std::sort(matched.begin(), matched.end());
    files.insert(files.end(), matched.begin(), matched.end());
  }
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat("give the files with ", flag));
  return files;
}

absl::StatusOr<TestMetrics> TestOnFiles(Executor& exe, const ProgramDesc& test, const std::string& prediction,
                                        const DataFeedDesc& feed, const std::string& patterns, Scope* scope) {
  OAR_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(patterns, "--test_files"));
  FileQueue queue(files);
  FeedStats stats;
  MultiSlotDataFeed reader(feed, &queue, &stats);
  std::vector<std::pair<double, int>> scored;
  double loss = 0;
  std::vector<Tensor> batch;
  while (true) {
    OAR_ASSIGN_OR_RETURN(bool more, reader.Next(&batch));
    if (!more) break;
    FeedMap in;
    for (size_t k = 0; k < batch.size(); ++k) in[reader.names()[k]] = batch[k];
    OAR_ASSIGN_OR_RETURN(std::vector<Tensor> out, exe.Run(test, scope, in, {prediction}));
    const Tensor& prob = out[0];
    const Tensor& label = in.at("label");
    const int64_t n = prob.dims()[0], w = prob.dims()[1];
    for (int64_t i = 0; i < n; ++i) {
      const int y = label.data<int64_t>()[i] != 0 ? 1 : 0;
      const double q = prob.data<float>()[i * w + w - 1];
      scored.emplace_back(q, y);
      loss -= std::log(std::max(1e-12, y ? q : 1 - q));
    }
  }
  if (scored.empty()) return absl::InvalidArgumentError("--test_files: no test examples");
  return TestMetrics{ExactAuc(scored), loss / static_cast<double>(scored.size()), static_cast<int64_t>(scored.size())};
}

}  // namespace oar::cli
