// StepBarrier: the sync-mode pserver's step state machine over `fanin`
// trainers. A step goes
//   kServe (trainers pull parameters; ends when every live trainer has sent
//           FETCH_BARRIER) → kRecv (trainers push gradients; ends when every
//           live trainer has sent BATCH_BARRIER) → kOptimize → kServe ...
// and the first phase is kServe, for the trainers' initial pull. A trainer
// that sends COMPLETE stops counting ("live" = not completed), so the
// others go on; when all have completed the loop ends.
//
// A trainer's gradients and BATCH_BARRIER may arrive while the others are
// still pulling (kServe): they are taken at once (nothing reads gradients
// then); only kOptimize holds them back. A trainer's Get and FETCH_BARRIER
// wait for kServe and for the optimize that consumes its own pending
// BATCH_BARRIER, so it never reads the previous step's parameters nor ends
// a step that was not applied (after a restored pserver's resync). Barrier arrivals are sets of
// trainer ids, so a retried message counts once.
//
// A trainer may write its BATCH_BARRIER right behind its gradients, before
// they are answered (over a connection that keeps order): the barrier then
// says how many it sent since its previous one (oar_sent), and counts only
// once that many were stored — else it is refused UNAVAILABLE and sent
// again after them, so a gradient that was refused or overtaken never
// leaves a step applied without it.
//
// A Get that arrives before it may be served either waits (BeforeGet, a
// pool thread) or is parked (WhenGetReady, a transport's I/O thread) and
// served by the thread that ends the optimize pass, without a wake-up.
//
// Every wait is bounded by `timeout` (a Get's and a FETCH_BARRIER's by
// twice that); the loop's errors list the trainer ids that never arrived,
// and End(error) gives that reason to every wait and parked Get. Stop()
// ends them all with Cancelled.
//
// Elastic (an elastic job's sync pserver, step_barrier_elastic.cc):
// trainers come and go. A trainer counts from the step it joined at
// (Hold, then Join: the JOIN handshake every pserver of the job agrees
// on), until it completes or leaves. One whose lease ran out is frozen
// (Depart: its messages are refused from then on) until the pservers have
// agreed on the last step it contributed to (Resolve), which counts it as
// arrived at that step if this pserver is still collecting it. A
// BATCH_BARRIER that carried no gradient (sent 0: a trainer waiting for
// data) arrives without contributing; the step's contributors are the rest
// (contributors_at_optimize), and a step without any is not applied.
//
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pserver/trainer_runs.h"

namespace oar {

class StepBarrier {
 public:
  enum class Phase { kServe, kRecv, kOptimize };
  // `first_step`: the optimize passes already done — a pserver restored
  // from a checkpoint resumes serving that step's parameters.
  StepBarrier(int fanin, absl::Duration timeout, int first_step = 0)
      : fanin_(fanin), timeout_(timeout), step_(first_step) {}
  struct Elastic {
    int min_trainers = 1;  // the fewest the job goes on with (--trainers MIN:MAX)
  };
  StepBarrier(int fanin, absl::Duration timeout, Elastic elastic)
      : fanin_(fanin), timeout_(timeout), elastic_(true), min_trainers_(elastic.min_trainers), step_(0) {}

  // --- handler side (one call per message) ---
  // Before storing a trainer's gradient: waits while an optimize pass runs,
  // then counts the store as in progress, so the loop does not start the
  // next optimize pass until EndReceive (no check-then-act gap between the
  // phase check and the store). Every OK BeginReceive needs one EndReceive.
  // `incarnation`: the sender's (rpc::IncarnationOf its oar_seq: one per
  // RpcClient, so one client per trainer id). A trainer's latest
  // incarnation is the one counted: a restarted trainer's count starts
  // afresh, and a gradient (or barrier) of an incarnation it replaced is
  // refused (FAILED_PRECONDITION) before anything is stored. 0 (Fluid's
  // clients) is never refused.
  absl::Status BeginReceive(int trainer_id, uint64_t incarnation = 0);
  // `stored`: the gradient was stored (it counts toward the trainer's next
  // BATCH_BARRIER, if its incarnation is still the latest).
  void EndReceive(int trainer_id, bool stored, uint64_t incarnation = 0);
  // `sent` > 0: the trainer's count of gradients sent since its previous
  // BATCH_BARRIER; fewer stored → UNAVAILABLE, and the barrier is not
  // counted.
  absl::Status BatchBarrier(int trainer_id, int64_t sent = 0, uint64_t incarnation = 0);
  // A replaced incarnation's FETCH_BARRIER and COMPLETE are refused
  // (FAILED_PRECONDITION) like its gradients: an earlier run must not end
  // the new run's serve phase, nor stop the trainer counting.
  absl::Status FetchBarrier(int trainer_id, uint64_t incarnation = 0);
  // Before serving a trainer's Get.
  absl::Status BeforeGet(int trainer_id);
  // BeforeGet for a caller that must not block (a transport's I/O thread):
  // `serve` runs exactly once — at once on this thread when the Get may be
  // served now (OK) or never will (why not), else on the thread that makes
  // it servable (OptimizeDone, OK) or gives up on it (End, Stop).
  using GetReady = std::function<void(absl::Status)>;
  void WhenGetReady(int trainer_id, GetReady serve);
  absl::Status Complete(int trainer_id, uint64_t incarnation = 0);
  // A trainer that rejoins a restored pserver having pulled this step's
  // parameters already (from before the restart) counts as fetched.
  void AdmitFetched(int trainer_id);

  // --- loop side ---
  // Waits until every live trainer has sent the barrier of the current
  // phase (FETCH in kServe, BATCH in kRecv) — and, before kOptimize, until no
  // gradient is being stored — then moves to the next phase (kServe → kRecv,
  // kRecv → kOptimize). Returns false (and OK) when every trainer has
  // completed; DeadlineExceeded listing the missing ids.
  absl::StatusOr<bool> AwaitPhaseEnd();
  // kOptimize → kServe, after the optimize blocks ran; then serves, on the
  // caller's thread, the parked Gets this makes servable.
  void OptimizeDone();
  // The loop gave up (`why`: a barrier that timed out, naming the missing
  // trainers) or the pserver stops: every wait and parked Get, now and
  // later, ends with `why` (the first reason given, if several).
  void End(const absl::Status& why);
  // End(Cancelled("the pserver is shutting down")).
  void Stop();
  Phase phase() const;
  int step() const;  // optimizes done
  // The trainers that had completed when the step moved to kOptimize (a
  // COMPLETE arriving during the pass counts from the next step).
  std::set<int> completed_at_optimize() const;
  // The trainers that have completed so far.
  std::set<int> completed() const;

  // --- elastic only (step_barrier_elastic.cc) ---
  bool elastic() const { return elastic_; }
  // The first half of a trainer's JOIN: this pserver will not leave the
  // serve phase of the step it returns (the current one while serving,
  // else the next) until the trainer's Join (or `timeout`, or its leave).
  absl::StatusOr<int> Hold(int trainer_id);
  // The trainer counts from `entry_step`, the highest step its Holds
  // returned: FailedPrecondition when this pserver has left that step's
  // serve phase already (the trainer holds again). `member`: its entry in
  // etcd, which the caller watches.
  absl::Status Join(int trainer_id, int entry_step, const std::string& member);
  struct Joined {
    int entry = 0;
    std::string member;
    absl::Time at;
  };
  // Trainers joined that have neither completed nor left (nor departed).
  std::map<int, Joined> joined() const;
  // The trainers that are etcd members now: until each has joined and
  // completed or left, the job is not over.
  void SetMembers(std::set<int> members);
  // What this pserver saw of a trainer whose lease ran out, frozen from now
  // on: the step it collects, whether the trainer contributed to it, and to
  // the step before. nullopt when the trainer had not joined (a Hold of
  // its is dropped).
  struct Departure {
    int entry = 0, step = 0;
    bool contributed = false, contributed_before = false;
  };
  std::optional<Departure> Depart(int trainer_id);
  // The pservers agreed that `last_step` was the departed trainer's last:
  // counted as arrived at it when this pserver still collects it, gone for
  // the steps after.
  void Resolve(int trainer_id, int last_step);
  // The trainers whose gradients the step moving to kOptimize applies.
  std::set<int> contributors_at_optimize() const;
  // Elastic: the trainers that count at the step being collected (joined
  // by it, not completed, not left) — its likely contributors, before its
  // barrier fixes them (a trainer may still leave, or send no gradient).
  std::set<int> live() const;
  // Whether the trainer was taken out of the job (departed; its messages
  // are refused) and has not joined again.
  bool HasLeft(int trainer_id) const;
  // The live trainers the current phase still waits on that have sent
  // nothing for `timeout` since another live trainer last arrived at it
  // (and since they joined), with how long: a trainer that died without a
  // word (its machine lost) or is stuck. Empty while none has arrived
  // (every trainer may be in a long step) and during kOptimize; a trainer
  // that has not sent a BATCH_BARRIER since it joined is still starting
  // (its setup after its first pull may be long) and is not named.
  std::map<int, absl::Duration> Silent(absl::Time now) const;

 private:
  absl::Status CheckTrainer(int trainer_id) const;
  // Waits for cond (mu_ held) up to `limit`, or until End; `what` names
  // the wait.
  absl::Status AwaitLocked(const std::function<bool()>& cond, const std::string& what, absl::Duration limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A Get or FETCH_BARRIER waits for the optimize pass, which only the
  // loop's own barrier wait (one timeout) can fail: it waits longer, so that
  // the loop's reason (End: the missing trainers) reaches it first.
  static constexpr int kLoopVerdict = 2;
  // An elastic job's loop waits up to twice `timeout` (a lease and the
  // pservers' agreement) since the last change of members: 3.
  int Verdict() const { return elastic_ ? 3 : kLoopVerdict; }
  // Whether trainer t must arrive at the current step (elastic: joined by
  // it, not completed, not left).
  bool LiveLocked(int t) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: refuses a message from a trainer that has not joined or has
  // left (OK otherwise, and always in a fixed job).
  absl::Status CheckMemberLocked(int trainer_id, const char* what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Elastic: the loop's wait, in slices (holds expire; MIN is timed).
  absl::StatusOr<bool> AwaitPhaseEndElastic() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DoneLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every trainer due arrived: kServe -> kRecv, or kRecv -> kOptimize (the
  // step's contributors fixed).
  void EndPhaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int InPlayLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether trainer_id's Get may be served now.
  bool GetReadyLocked(int trainer_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (elastic_) {
      auto e = joined_.find(trainer_id);
      if (e == joined_.end() || step_ < e->second.entry) return false;
    }
    return phase_ == Phase::kServe && batch_.count(trainer_id) == 0;
  }
  // Runs each parked Get's `serve` (mu_ not held).
  static void RunParked(std::vector<std::pair<int, GetReady>>& parked, const absl::Status& s);
  // Gradients and BATCH_BARRIER are taken in any phase but kOptimize.
  absl::Status AwaitNotOptimizing(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int fanin_;
  const absl::Duration timeout_;
  const bool elastic_ = false;
  const int min_trainers_ = 1;
  mutable absl::Mutex mu_;
  Phase phase_ ABSL_GUARDED_BY(mu_) = Phase::kServe;
  std::set<int> batch_ ABSL_GUARDED_BY(mu_), fetch_ ABSL_GUARDED_BY(mu_), completed_ ABSL_GUARDED_BY(mu_);
  absl::Status ended_ ABSL_GUARDED_BY(mu_);  // OK until End
  int step_ ABSL_GUARDED_BY(mu_);
  int receiving_ ABSL_GUARDED_BY(mu_) = 0;  // gradients being stored now
  // Gradients stored per trainer since its last BATCH_BARRIER, by its
  // latest run (ReplayGuard logs a restart).
  struct Stored {
    TrainerRun run;
    int64_t count = 0;  // the latest run's
  };
  // The count of `incarnation` (made the trainer's latest if new), or null
  // for one that was replaced.
  int64_t* StoredLocked(int trainer_id, uint64_t incarnation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::map<int, Stored> stored_ ABSL_GUARDED_BY(mu_);
  std::set<int> completed_at_optimize_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<int, GetReady>> parked_ ABSL_GUARDED_BY(mu_);  // (trainer, serve) by arrival
  // Elastic state.
  std::map<int, Joined> joined_ ABSL_GUARDED_BY(mu_);  // every trainer that joined (kept once it completes or leaves)
  std::map<int, absl::Time> holds_ ABSL_GUARDED_BY(mu_);
  std::set<int> members_ ABSL_GUARDED_BY(mu_);
  std::set<int> departing_ ABSL_GUARDED_BY(mu_), left_ ABSL_GUARDED_BY(mu_);
  std::set<int> leave_after_step_ ABSL_GUARDED_BY(mu_);                       // resolved into the current step
  std::set<int> idle_ ABSL_GUARDED_BY(mu_);                                   // this step's barriers without gradients
  std::set<int> contributors_ ABSL_GUARDED_BY(mu_);                           // the step in kOptimize's
  std::set<int> last_contributors_ ABSL_GUARDED_BY(mu_);                      // the step applied last
  int64_t events_ ABSL_GUARDED_BY(mu_) = 0;                                   // joins, leaves, completions
  std::map<int, absl::Time> heard_ ABSL_GUARDED_BY(mu_);                      // each trainer's last message
  std::set<int> stepped_ ABSL_GUARDED_BY(mu_);                                // sent a BATCH_BARRIER since it joined
  absl::Time fetch_at_ ABSL_GUARDED_BY(mu_), batch_at_ ABSL_GUARDED_BY(mu_);  // the last arrival at each
  // Elastic: notes a message from the trainer (Silent's clock).
  void HeardLocked(int trainer_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (elastic_) heard_[trainer_id] = absl::Now();
  }
  bool had_min_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace oar
