// Evaluating a program on test data; see program_eval.h.
//
// Thread-safety: the calling thread.
#include "cli/program_eval.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/async_train_util.h"
#include "common/base/status.h"
#include "common/data/feed_check.h"
#include "common/data/multi_slot_source.h"

namespace oar::cli {

absl::StatusOr<double> ScalarOf(const Tensor& t, const std::string& name) {
  if (t.numel() != 1 || (t.dtype() != DataType::kFloat32 && t.dtype() != DataType::kFloat64)) {
    return absl::InvalidArgumentError(absl::StrCat("'", name, "' is not a float scalar (", DataTypeName(t.dtype()), " ",
                                                   t.dims().ToString(), "): fetch a loss or metric of one value"));
  }
  return t.dtype() == DataType::kFloat32 ? static_cast<double>(t.data<float>()[0]) : t.data<double>()[0];
}

absl::StatusOr<std::vector<double>> EvaluateProgram(Executor& exe, const ProgramDesc& test_program, Scope* scope,
                                                    FeedSource* source, const std::vector<std::string>& targets) {
  std::vector<double> sums(targets.size(), 0.0);
  int64_t tested = 0;
  OAR_RETURN_IF_ERROR(source->StartEpoch(0));
  FeedBatch batch;
  while (true) {
    OAR_ASSIGN_OR_RETURN(const bool more, source->Next(&batch));
    if (!more) break;
    OAR_ASSIGN_OR_RETURN(auto out, exe.Run(test_program, scope, batch.feeds, targets));
    for (size_t i = 0; i < targets.size(); ++i) {
      OAR_ASSIGN_OR_RETURN(const double v, ScalarOf(out[i], targets[i]));
      sums[i] += v * static_cast<double>(batch.examples);
    }
    tested += batch.examples;
  }
  if (tested == 0) return absl::InvalidArgumentError(absl::StrCat(source->Describe(), ": no test examples"));
  for (double& s : sums) s /= static_cast<double>(tested);
  return sums;
}

std::vector<std::string> UsedSlotNames(const DataFeedDesc& feed) {
  std::vector<std::string> names;
  for (int i : feed.used_slots()) names.push_back(feed.proto().multi_slot_desc().slots(i).name());
  return names;
}

absl::StatusOr<std::vector<double>> EvaluateProgramOnFiles(Executor& exe, const ProgramDesc& test_program,
                                                           const ProgramDesc& main, Scope* scope,
                                                           const DataFeedDesc& feed, const std::string& patterns,
                                                           const std::vector<std::string>& targets) {
  std::vector<const VarDesc*> vars;
  for (const std::string& slot : UsedSlotNames(feed)) {
    OAR_ASSIGN_OR_RETURN(const VarDesc* v, FeedVar(main, "the program", slot));
    vars.push_back(v);
  }
  OAR_ASSIGN_OR_RETURN(std::vector<std::string> files, ExpandFiles(patterns, "--test_files"));
  OAR_ASSIGN_OR_RETURN(auto source, MultiSlotSource::Make(feed, vars, {.files = std::move(files)}));
  return EvaluateProgram(exe, test_program, scope, source.get(), targets);
}

std::string EvalLine(const std::vector<std::string>& targets, const std::vector<double>& values, char sep) {
  std::string line;
  for (size_t i = 0; i < targets.size() && i < values.size(); ++i) {
    absl::StrAppendFormat(&line, "%s%s=%.6g", i == 0 ? "" : std::string(1, sep),
                          i == 0 ? std::string("test_loss") : "test_" + targets[i], values[i]);
  }
  return line;
}

}  // namespace oar::cli
