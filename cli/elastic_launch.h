// What `oar launch --elastic` adds to a local cluster: an etcd-server of its
// own (unless --elastic_server names one), every process joined to the job
// through it, trainers that may die without stopping the job, and a chaos
// schedule that kills and adds trainers as the job goes:
//
//   oar launch --elastic --async --trainers 2:4 --model fashion_mlp
//       --chaos 'kill trainer 1 at step 200; add 1 at step 400'
//
// A step is one trainer's step, counted over all trainers (in an async job,
// one update of the parameters). "kill trainer N" SIGKILLs trainer N's
// process, as a machine that went down (the launcher then revokes its
// lease, as an operator that saw the pod go would); "freeze trainer N"
// SIGSTOPs it, as a machine that stopped answering without a word (hung,
// or cut off from the network): nothing is revoked, its lease is left to
// run out, and the pservers take it out once a step has waited on it for
// the lease (pserver/departure_watch.h); the launcher kills it once every
// other trainer is done, unless "thaw trainer N" (SIGCONT) wakes it first:
// taken out, it finds its calls refused and ends (kExitTakenOut), which
// the launcher counts as a leave. "stop trainer N" sends it SIGTERM, as
// Kubernetes does to a pod it scales away (the trainer leaves the job at
// once: cli/elastic_leave.h); "add K" starts K trainers on the lowest free
// ids (a new process on the id of a dead one waits for its lease to run
// out). The summary says what the schedule did, which trainer trained which
// chunks, and whether every chunk of every epoch was trained exactly once.
//
// Thread-safety: used by the launcher's main thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cli/launch_monitor.h"
#include "cli/process_group.h"
#include "common/elastic/etcd_client.h"

namespace oar::cli {

struct ChaosEvent {
  enum class Kind { kKill, kStop, kFreeze, kThaw, kAdd };
  Kind kind = Kind::kKill;
  int trainer = -1;  // kKill, kStop, kFreeze, kThaw: whose process
  int count = 0;     // kAdd: how many
  int64_t at_step = 0;
  std::string text;  // as the user wrote it
};

// "kill trainer 1 at step 200; stop trainer 2 at step 300; freeze trainer 0
// at step 350; add 1 at step 400" (clauses in any order, separated by ';'). Every clause it cannot read
// is named in one error.
absl::StatusOr<std::vector<ChaosEvent>> ParseChaos(absl::string_view text, int max_trainers);

// Whether --elastic was given; refuses --chaos without it.
absl::StatusOr<bool> ElasticLaunchRequested();
// --chaos, parsed (empty when not given).
absl::StatusOr<std::vector<ChaosEvent>> ChaosFromFlag(int max_trainers);

// A trainer process of the job died (`pid`): its membership in etcd is
// revoked now, as an operator that saw the pod go would, so its unfinished
// chunk is handed out again without waiting out its lease. Nothing is done
// when the member is another process (a new one on the same id).
absl::Status ForgetDeadTrainer(elastic::EtcdClient* etcd, const std::string& job, int trainer, pid_t pid);

// Trainer `first`'s spec for another process on its id, named `name`
// ("trainer.1.run2"): its files (metrics, trace, step log) under the new
// name, and with `metrics` a metrics socket of its own.
absl::StatusOr<ChildSpec> RespawnSpec(ChildSpec first, const std::string& name, bool metrics);

// Runs a chaos schedule against the launcher's processes.
class ChaosRunner {
 public:
  struct Hooks {
    // The live process of trainer `id`, if any.
    std::function<std::optional<size_t>(int id)> process_of;
    std::function<void(size_t process, int signal)> kill;
    // Whether `process` has taken a step (unset: every one has). A kill or
    // stop waits for its trainer's first step: one still starting (reading
    // its data, joining) is not yet a trainer the job would lose. The
    // events after it wait with it: the schedule happens in its order,
    // and an add waits until the processes killed or stopped before it
    // are gone (their ids free).
    std::function<bool(size_t process)> has_stepped;
    // Starts trainer `id` again; its process's name.
    std::function<absl::StatusOr<std::string>(int id)> start;
  };
  ChaosRunner(std::vector<ChaosEvent> events, int max_trainers, Hooks hooks);

  // Carries out every event due at `job_steps`; each is said on stderr and
  // kept for the summary.
  absl::Status Tick(int64_t job_steps);
  // What was done, and the events the job ended before.
  const std::vector<std::string>& done() const { return done_; }
  // Whether the schedule froze `process` (SIGSTOP): it no longer counts as
  // a running trainer, and its id is free for an add.
  bool frozen(size_t process) const { return frozen_.count(process) > 0; }
  // The job is done without the frozen processes: kills them (SIGKILL).
  void KillFrozen();
  std::vector<std::string> NotReached() const;

 private:
  std::vector<ChaosEvent> events_;
  std::vector<bool> fired_;
  const int max_trainers_;
  Hooks hooks_;
  std::vector<std::string> done_;
  std::map<size_t, int> frozen_;  // process -> its trainer id
  std::map<int, size_t> ending_;  // trainer id -> its process killed or stopped, until it is gone
};

// The elastic part of the launch summary: the schedule's changes, each
// trainer process's chunks, and whether every chunk of `epochs` x
// `chunks_per_epoch` was trained exactly once (naming any that were not;
// `*once` false then). The trainers' "@oar chunk" lines say who trained
// what; a trainer killed after etcd took its report of a chunk and before
// it said so leaves no line: `done_in_etcd` ((epoch, chunk) -> the member
// etcd holds as having trained it) counts such a chunk for the last of
// that trainer's processes that died, and says so.
using DoneInEtcd = std::map<std::pair<int, int64_t>, std::string>;
std::vector<std::string> ElasticSummaryLines(const std::vector<TrainerReport>& trainers,
                                             const std::vector<ChunkDone>& chunks,
                                             const std::vector<std::string>& names, int epochs,
                                             int64_t chunks_per_epoch, const std::vector<std::string>& changes,
                                             bool* once, const DoneInEtcd& done_in_etcd = {});

}  // namespace oar::cli
