// The trainer role of `oar run` (pserver or nccl2 mode, Fashion-MNIST or a
// program file): what it feeds and fetches (TrainerIo), and RunTrainer —
// waits for the pservers (or joins the other trainers), pulls the
// parameters, trains on its shard of each epoch in batches of --batch_size /
// trainers on --cpu_num places, checks every step's loss, has the pservers
// checkpoint when asked, says COMPLETE, and trainer 0 evaluates on the test
// set. With --report it prints the "@oar progress" and "@oar result" lines
// `oar launch` reads. The flags it reads are run_cmd.cc's.
//
// Thread-safety: blocks the calling thread; one call per process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/model_build.h"
#include "cli/role_env.h"
#include "common/framework/program_desc.h"
#include "transpiler/distribute_transpiler.h"

namespace oar {
class Profiler;  // common/profiler/profiler.h
}  // namespace oar

namespace oar::cli {

struct ElasticJob;

// What a trainer feeds and fetches: from the model, or, for program files,
// from --loss_name and --feed_names (and then nothing to evaluate with).
struct TrainerIo {
  std::string loss;
  std::vector<std::string> feeds;        // the variables the data feeds (a model's: image, label)
  std::vector<std::string> fetch;        // a program's --fetch, averaged over its test data
  const ModelPrograms* model = nullptr;  // for the test-set evaluation
};

// The TrainerIo of `model`, or for a program file (model null) of
// --loss_name and --feed_names, checked against `main`.
absl::StatusOr<TrainerIo> IoFor(const ModelPrograms* model, const ProgramDesc& main);

// `origin`: the untranspiled program, for --params in nccl2 mode (each
// trainer holds whole parameters; in pserver mode the pservers load them and
// the trainers' startup pulls them). `elastic`: an elastic job's trainer
// takes its data as chunks from the job's queue (cli/elastic_job.h).
absl::Status RunTrainer(const RoleEnv& env, const TrainerIo& io, DistributeTranspiler& t, bool nccl2,
                        const ProgramDesc& origin, Profiler* profiler, ElasticJob* elastic = nullptr);

}  // namespace oar::cli
