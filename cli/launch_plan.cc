#include "cli/launch_plan.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/command.h"
#include "cli/communicator_flags.h"
#include "cli/elastic_job.h"
#include "cli/elastic_ring.h"
#include "cli/mode_flags.h"
#include "cli/model_build.h"
#include "cli/runtime_flags.h"
#include "cli/trainers_flag.h"
#include "cli/transpile_cmd.h"
#include "common/base/status.h"
#include "gflags/gflags.h"
#include "trainer/collective/nccl_collective.h"
#include "trainer/places.h"

DECLARE_string(pservers);
DECLARE_bool(async);
DECLARE_bool(sync);
DECLARE_string(program);
DECLARE_string(mode);
DECLARE_int32(cpu_num);     // run_cmd.cc
DECLARE_int32(batch_size);  // train_cmd.cc
DECLARE_string(data_feed);  // async_train_cmd.cc
DECLARE_string(trainers);   // trainers_flag.cc

namespace oar::cli {

absl::StatusOr<LaunchPlan> PlanLaunch() {
  LaunchPlan plan;
  const bool nccl2 = plan.nccl2 = FLAGS_mode == "nccl2";
  if (!nccl2 && FLAGS_mode != "pserver") {
    return absl::InvalidArgumentError(absl::StrCat("--mode is pserver or nccl2, got '", FLAGS_mode, "'"));
  }
  int& pservers = plan.pservers;
  pservers = nccl2 ? 0 : 1;  // when --pservers is not given
  if (nccl2 && FlagGiven("pservers"))
    return absl::InvalidArgumentError("--mode nccl2 has no pservers: drop --pservers");
  if (nccl2 && (FLAGS_async || !FLAGS_sync))
    return absl::InvalidArgumentError("--mode nccl2 is synchronous: drop --async");
  if (FlagGiven("pservers") && (!absl::SimpleAtoi(FLAGS_pservers, &pservers) || pservers < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pservers takes the number of pservers (>= 1), got '", FLAGS_pservers, "'"));
  }
  const TrainerRange range = TrainersFromFlag();
  const int trainers = plan.trainers = range.max;  // an elastic job starts with its most
  OAR_ASSIGN_OR_RETURN(plan.elastic, ElasticLaunchRequested());
  const bool elastic = plan.elastic;
  if (range.range && !elastic) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trainers ", FLAGS_trainers, ": MIN:MAX is an elastic job's; add --elastic (and --async)"));
  }
  OAR_ASSIGN_OR_RETURN(plan.chaos, ChaosFromFlag(trainers));
  if (FLAGS_cpu_num < 0) return absl::InvalidArgumentError("--cpu_num must be 0 (the CPU_NUM variable) or positive");
  std::string& batch_note = plan.batch_note;
  // AsyncExecutor trainers (a model's or an async program's --data_feed)
  // take the DataFeedDesc's batch; the others split --batch_size (oar run).
  const bool async_executor = plan.async_executor =
      !FLAGS_data_feed.empty() && (FLAGS_program.empty() || FLAGS_async || !FLAGS_sync);
  if (!async_executor) {
    if (FLAGS_batch_size < 1) return absl::InvalidArgumentError("--batch_size must be at least 1");
    const int batch = std::max(1, FLAGS_batch_size / trainers);
    OAR_RETURN_IF_ERROR(
        CheckPlacesFitBatch(FLAGS_cpu_num, batch,
                            absl::StrCat("--cpu_num ", FLAGS_cpu_num, " (a trainer's batch is ", batch,
                                         ": --batch_size ", FLAGS_batch_size, " over ", trainers, " trainer(s))")));
    if (batch * trainers != FLAGS_batch_size) {
      batch_note = absl::StrFormat("--batch_size %d over %d trainers is %d each, %d a step", FLAGS_batch_size, trainers,
                                   batch, batch * trainers);
    }
  }
  // --device gpu: trainer i on selected GPU i (round robin in pserver mode;
  // in nccl2 mode each needs a GPU of its own, as NCCL cannot put two ranks
  // on one), the pservers on CPUs. Checked here, so a host without a GPU
  // gets one line, not one per trainer.
  OAR_ASSIGN_OR_RETURN(plan.place, TrainPlaceFromFlags());
  const Place& place = plan.place;
  // nccl2 mode has neither communicator nor GEO-SGD (and no slicing flags
  // to parse); pserver mode's are as the children will read them.
  DistributeTranspilerConfig config;
  config.mode = "nccl2";
  if (!nccl2) {
    OAR_ASSIGN_OR_RETURN(config, TranspilerConfigFromFlags());
  }
  OAR_RETURN_IF_ERROR(RefuseFlagsTheModeIgnores({.nccl2 = nccl2,
                                                 .data_feed = FlagGiven("data_feed"),
                                                 .async_executor = async_executor,
                                                 .gpu = place.is_gpu(),
                                                 .communicator = CommunicatorOptionsFromFlags(config).has_value(),
                                                 .geo = config.geo_sgd_mode}));
  if (elastic) {
    if (nccl2) OAR_RETURN_IF_ERROR(CheckElasticRingFlags());
    if (!nccl2 && !FLAGS_async && FLAGS_sync && async_executor) {
      return absl::UnimplementedError(
          "--elastic: AsyncExecutor trainers (--data_feed files) of an elastic job train async: add --async");
    }
  }
  std::vector<int>& gpus = plan.gpus;
  if (place.is_gpu()) {
    OAR_ASSIGN_OR_RETURN(gpus, SelectedGpusFromFlags());
    if (FLAGS_cpu_num > 1)
      return absl::InvalidArgumentError("--cpu_num counts CPU places; --device gpu trains on GPUs");
    if (async_executor) {
      return absl::UnimplementedError("--data_feed trainers (AsyncExecutor threads) run on CPUs: drop --device gpu");
    }
    if (nccl2 && !NcclAvailable()) {
      return absl::FailedPreconditionError(
          "--mode nccl2 --device gpu all-reduces through NCCL, which this oar "
          "was built without");
    }
    if (nccl2 && trainers > static_cast<int>(gpus.size())) {
      return absl::InvalidArgumentError(absl::StrCat("--mode nccl2 --device gpu: ", trainers,
                                                     " trainers need a GPU each, ", gpus.size(),
                                                     " selected; lower --trainers or select more GPUs"));
    }
  }
  plan.mode = nccl2 ? "nccl2" : FLAGS_async || !FLAGS_sync ? "async" : "sync";  // as the children read them
  return plan;
}

}  // namespace oar::cli
