// What `oar async-train` and an AsyncExecutor trainer of `oar run` share:
// the training files from glob patterns, and the test-set metrics of a
// MultiSlot model (ctr_dnn).
//
// Thread-safety: stateless.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/model_build.h"
#include "common/data/data_feed_desc.h"
#include "common/framework/executor.h"

namespace oar::cli {

// Each comma-separated pattern's matches, sorted per pattern; a pattern
// that matches nothing is NotFound naming it and `flag`.
absl::StatusOr<std::vector<std::string>> ExpandFiles(const std::string& patterns, const char* flag = "--files");

struct TestMetrics {
  double auc = 0, loss = 0;
  int64_t examples = 0;
};
// Runs `test` (the model's test program, or one rewritten to prefetch a
// distributed table) over `patterns`' files: the exact AUC of the positive
// class's probability, and the mean cross-entropy.
absl::StatusOr<TestMetrics> TestOnFiles(Executor& exe, const ProgramDesc& test, const std::string& prediction,
                                        const DataFeedDesc& feed, const std::string& patterns, Scope* scope);

}  // namespace oar::cli
