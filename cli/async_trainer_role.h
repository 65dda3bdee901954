// A trainer of a pserver job that trains from MultiSlot files with
// AsyncExecutor threads (`oar run` / `oar launch` with --data_feed and
// --files), as Fluid's distributed CTR jobs ran: the trainer takes file i
// of the sorted --files when i % trainers is its id, pulls the parameters
// (its startup program), and runs --threads threads, each feeding its own
// batches through the async trainer program — its own sends of gradients,
// recvs of parameters and prefetches of a distributed table's rows. Trainer
// 0 then predicts --test_files (a model's test program, rewritten to
// prefetch the table), before saying COMPLETE so the pservers still serve.
// In an elastic job (`elastic` not null) it takes its files chunk by chunk
// from the job's queue instead (chunk c of C: file i when i % C == c).
//
// Thread-safety: blocks the calling thread; one call per process.
#pragma once

#include "absl/status/status.h"
#include "cli/elastic_job.h"
#include "cli/model_build.h"
#include "cli/role_env.h"
#include "transpiler/distribute_transpiler.h"

namespace oar::cli {

absl::Status RunAsyncTrainerRole(const RoleEnv& env, DistributeTranspiler& transpiler, const ModelPrograms* model,
                                 bool report, ElasticJob* elastic = nullptr);

}  // namespace oar::cli
