// TrainOnElasticRing: an elastic nccl2 trainer (`oar run --mode nccl2
// --elastic_server ...`, `oar launch --elastic --mode nccl2`), in the
// manner of Horovod Elastic:
//  - The trainers agree through etcd on each ring (common/elastic/
//    ring_rendezvous.h), form it (the TCP ring, shared memory on one host)
//    and take the newest commit any of them holds (trainer/
//    committed_state.h): a joiner gets the survivors' state by broadcast.
//  - Every --elastic_commit_every steps, and at each epoch's end, each
//    commits its state in memory (rank 0 also to --checkpoint_dir, when
//    given: cli/ring_checkpoint.h), and the ring sums one flag: whether the
//    member list differs from the ring's trainers. If it does, all stop
//    there and form the next ring (a joiner enters at a commit).
//  - A step whose all-reduce fails (a peer died, or did not answer within
//    --rpc_deadline) rolls every survivor back to its last commit; they
//    form the next ring once the dead trainer's lease has run out, or,
//    if it is stuck with its lease renewed, once it has not come to the
//    rendezvous for --rpc_deadline after they did, or at once when their
//    shared-memory collective timed out on it (they revoke its lease;
//    woken, it registers again and joins at a commit).
// The data policy: the job's step s of an epoch trains the examples
// [offset, offset + n x b) of the epoch's order (the same on every
// trainer: --shuffle global by default), rank r taking the r-th batch of b
// (--batch_size / MAX of --trainers MIN:MAX) — each trainer's batch stays
// b, the global batch is n x b, the learning rate is unchanged, and the
// gradient is the mean over the n x b examples. An epoch ends when fewer
// than n x b examples are left (they are counted as unused). A commit
// holds the position, so after a rollback the same examples are trained
// again with the restored parameters: each example counts once per epoch.
// Each step is said on stdout as
//   @oar ring-step trainer=ID ring=GEN rank=R size=N step=S epoch=E offset=O loss=L
// and each ring as
//   @oar ring trainer=ID ring=GEN rank=R size=N trainers=0,2 step=S epoch=E offset=O
//
// Thread-safety: the trainer's main thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "cli/elastic_job.h"
#include "cli/progress_bar.h"
#include "common/data/feed_source.h"
#include "trainer/trainer_runtime.h"

namespace oar::cli {

struct RingTrainerOptions {
  ElasticJob* job = nullptr;
  int trainer_id = 0;
  std::vector<std::string> trainer_endpoints;  // every slot's, by id
  int64_t batch = 1;                           // this trainer's
  int epochs = 1;
  int64_t max_steps = 0;  // the job's steps; 0: every epoch
  std::string transport;  // --collective_transport
  std::string checkpoint_dir;
  bool report = false;
  StepLog* step_log = nullptr;
};

struct RingTrainerResult {
  int64_t steps = 0;     // steps this trainer took (those rolled back too)
  int64_t examples = 0;  // that it trained
  int64_t unused = 0;    // examples left over at the ends of the epochs
  double loss = 0;       // its last
  double seconds = 0;    // from its first ring's forming to its end
  int rank = 0;          // in the last ring
  std::string backend;   // of the last ring: "shm", "tcp-ring"
};

// CPU places only (NCCL communicators are not re-made for each ring).
absl::Status CheckElasticRingDevice(bool gpu);
// What `oar run` and `oar launch` refuse of an elastic nccl2 job before
// anything starts: --device gpu; --data_feed files not held in memory.
absl::Status CheckElasticRingFlags();

absl::StatusOr<RingTrainerResult> TrainOnElasticRing(TrainerRuntime* rt, SeekableSource* data,
                                                     const RingTrainerOptions& options);

}  // namespace oar::cli
