// ElasticJob: an `oar run` process's part in an elastic job
// (--elastic_server etcd://HOST:PORT --job_id ID): its entry in the job's
// member list in etcd ("pserver/<i>", "trainer/<id>"), under a lease of
// --rpc_deadline, and, for a trainer, the queue its data comes from
// (common/elastic/task_queue.h: each epoch cut into --elastic_chunks chunks,
// each trained once by whichever trainer takes it).
//
// What works elastically today (docs/elastic.md): pserver mode, async and
// sync — trainers join a running job and leave or die; the pservers end
// once every trainer that joined has completed or left (sync: each step
// applies the mean gradient of the trainers that contributed to it, and
// the pservers agree through etcd on a departed trainer's last step);
// nccl2 mode on CPUs, the trainers forming a new ring at each change
// (cli/elastic_ring.h).
//
// Thread-safety: an ElasticJob is used by its process's main thread; the
// Membership inside tends itself on its own thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "cli/role_env.h"
#include "common/elastic/etcd_client.h"
#include "common/elastic/membership.h"
#include "common/elastic/task_queue.h"
#include "common/framework/run_env.h"

namespace oar::cli {

struct ElasticJob {
  std::unique_ptr<elastic::EtcdClient> etcd;
  std::unique_ptr<elastic::Membership> me;
  std::string member;    // "trainer/2", "pserver/0"
  std::string value;     // its entry's value: "host pid N"
  int64_t chunks = 0;    // per epoch (trainers)
  int min_trainers = 1;  // the fewest it goes on with (--trainers MIN:MAX)
  bool done = false;     // a trainer that joined a job already over (MarkElasticJobDone)
  // The trainers' queue of chunks (trainers only).
  std::unique_ptr<elastic::TaskQueue> tasks;
};

// Whether this process is part of an elastic job: --elastic_server, or
// PaddlePaddle elastic launch's PADDLE_ELASTIC_SERVER (HOST:PORT). Its job
// is --job_id, else PADDLE_ELASTIC_JOB_ID; its fewest trainers MIN of
// --trainers MIN:MAX, else of PADDLE_ELASTIC_NP.
bool ElasticRequested();

// An elastic sync job's pserver: how it agrees with the job's other
// pservers on a departed trainer's last step (common/elastic/
// leave_agreement.h), waiting up to --rpc_deadline for their records.
AgreeOnLeave LeaveAgreement(ElasticJob* job, const RoleEnv& env);

// Chunks per epoch: --elastic_chunks, else 4 per trainer slot; for
// AsyncExecutor trainers (`files` > 0 MultiSlot files, a chunk is a set of
// whole files) at most one per file.
int64_t ElasticChunks(int slots, int64_t files = 0);

// The job's name (--job_id, else PADDLE_ELASTIC_JOB_ID, else oar).
std::string ElasticJobId();

// Registers this process (a name another live process holds is waited for
// until --rpc_deadline: a restarted pod whose old lease has not run out).
absl::StatusOr<std::unique_ptr<ElasticJob>> JoinElasticJob(const RoleEnv& env);

// Said by a pserver whose elastic job ended well: /oar/<job>/done. A
// trainer started afterwards (a StatefulSet restarts the pods that end)
// then says the job is over and ends at once (JoinElasticJob: `done`)
// instead of failing to reach pservers that are gone.
absl::Status MarkElasticJobDone(const ElasticJob& job);
// Whether MarkElasticJobDone was said.
absl::StatusOr<bool> ElasticJobOver(const ElasticJob& job);

// The trainer ids among the job's members now, and among all it ever had,
// and the fewest it goes on with.
TrainerMembers TrainersOf(const ElasticJob& job);

// Whether this trainer evaluates the job's result at its end: trainer 0
// in a fixed job (`job` null); in an elastic one, the lowest id among the
// live trainers (trainer 0 may have died; two that both think so each
// evaluate, which does no harm).
bool EvaluatesTheJob(const ElasticJob* job, int trainer_id);

// Trains, once the job has its fewest trainers (waiting up to
// --rpc_deadline for them, else an error), epochs 1..`epochs` chunk by chunk as the job's queue hands them
// out: `train(epoch, chunk, chunks)` trains one and returns its examples
// (or nullopt: stopped early, --max_steps; the chunk is left to the queue).
// It takes every chunk free now, epoch after epoch, without waiting for
// those others hold; then, epoch by epoch, waits (up to --rpc_deadline
// each) until all are done, taking those a dead trainer left. Each chunk
// done is said on stdout as
//   @oar chunk trainer=2 epoch=1 chunk=5 examples=1875
// (what a log check of "each chunk once" reads). False: stopped early.
// `idle` (a sync trainer): while every chunk left is another's, one step
// without data each time, instead of waiting (the others' steps wait for
// this trainer's); the wait then lasts while the others train.
using ChunkTrainer = std::function<absl::StatusOr<std::optional<int64_t>>(int epoch, int64_t chunk, int64_t chunks)>;
absl::StatusOr<bool> TrainElasticEpochs(ElasticJob* job, int trainer_id, int epochs, const ChunkTrainer& train,
                                        const std::function<absl::Status()>& idle = nullptr);

}  // namespace oar::cli
