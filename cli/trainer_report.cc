#include "cli/trainer_report.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/program_eval.h"
#include "common/api/io.h"
#include "common/base/status.h"
#include "common/data/fashion_mnist.h"
#include "gflags/gflags.h"

DECLARE_string(data_dir);

namespace oar::cli {

absl::Status ReportTrainer(TrainerRuntime* rt, const TrainerIo& io, const ProgramDesc& origin, const DataConfig& data,
                           const std::vector<const VarDesc*>& vars, int trainer_id, const TrainerTotals& t,
                           bool evaluates) {
  std::string result =
      absl::StrFormat("@oar result trainer=%d examples=%lld seconds=%.3f loss=%.6f unused=%lld", trainer_id,
                      static_cast<long long>(t.examples), t.seconds, t.loss, static_cast<long long>(t.unused));
  if (!t.collective.empty()) absl::StrAppend(&result, " collective=", t.collective);
  if (evaluates && io.model != nullptr) {
    OAR_ASSIGN_OR_RETURN(Dataset test, LoadFashionMnist(FLAGS_data_dir, "t10k"));
    OAR_ASSIGN_OR_RETURN(EvalResult eval, Evaluate(rt->executor(), *io.model, rt->scope(), test, 500));
    absl::StrAppendFormat(&result, " test_accuracy=%.4f test_loss=%.4f", eval.accuracy, eval.loss);
  } else if (evaluates) {  // a program file: its loss and --fetch over the test data, where given
    OAR_ASSIGN_OR_RETURN(std::unique_ptr<FeedSource> test, MakeTestSource(data, vars, 500));
    if (test != nullptr) {
      std::vector<std::string> targets = {io.loss};
      targets.insert(targets.end(), io.fetch.begin(), io.fetch.end());
      const ProgramDesc test_program = PruneToTargets(origin, io.feeds, targets);
      OAR_ASSIGN_OR_RETURN(const std::vector<double> values,
                           EvaluateProgram(rt->executor(), test_program, rt->scope(), test.get(), targets));
      absl::StrAppend(&result, " ", EvalLine(targets, values, ' '));
    }
  }
  std::printf("%s\n", result.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace oar::cli
